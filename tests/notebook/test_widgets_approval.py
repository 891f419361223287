"""ApprovalPolicy: clicks decide exactly their own call; unattended modes; fail closed."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.approval import ApprovalPolicy, ApprovalWidget

from ._approval import CALLS, add, ask_policy, click, instant_sleep, script, wait_for_pending
from ._fakes import record_sends


def two_adds_then_done() -> Scripted:
    return Scripted(
        [
            lf.ToolCall("c1", "add", {"a": 1, "b": 2}),
            lf.ToolCall("c2", "add", {"a": 3, "b": 4}),
            "done",
        ]
    )


async def test_approve_runs_the_tool_and_records_who() -> None:
    policy = ask_policy()
    sent = record_sends(policy.widget)
    agent = lf.Agent("add 2 and 3", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 2, "b": 3}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        pending = await wait_for_pending(policy.widget)
        assert pending["tool"] == "add" and pending["call_id"] == "c1"
        assert pending["description"].startswith("Add two integers")
        assert pending["args"] == {"a": 2, "b": 3}
        assert pending["schema"]["properties"]["a"]["type"] == "integer"
        click(policy.widget, pending, "approve")
        assert await task == "The answer is 5."
        tool_node = session.all_tool_calls[0]
        assert tool_node.decision.outcome == "approve"
        assert tool_node.decision.by == "tester (notebook)"
        logs = [
            n
            for n in session.all_logs
            if n.inputs.get("call_id") == "c1" and "approved" in n.inputs["message"]
        ]
        assert (
            logs
            and logs[0].inputs["by"] == "tester (notebook)"
            and logs[0].inputs["at"].endswith("Z")
        )
    assert CALLS == [(2, 3)]
    assert sent[-1] == {"kind": "decision_result", "prompt_id": pending["prompt_id"], "ok": True}
    assert policy.widget.state["pending"] is None
    assert policy.widget.state["history"][0]["decision"] == "approved"


async def test_deny_stops_the_run_with_tool_denied_error_and_a_denied_node() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        click(policy.widget, await wait_for_pending(policy.widget), "deny")
        with pytest.raises(lf.ToolDeniedError):
            await task
        assert session.all_tool_calls[0].status == "denied"
        assert session.all_tool_calls[0].decision.outcome == "stop"
    assert CALLS == []


async def test_deny_with_note_tells_the_model_and_the_run_continues() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        click(
            policy.widget, await wait_for_pending(policy.widget), "deny_note", note="use 7 instead"
        )
        assert await task == "The answer is use 7 instead."
        assert session.all_tool_calls[0].decision.note == "use 7 instead"
    assert CALLS == []


async def test_edited_arguments_are_revalidated_before_they_count() -> None:
    policy = ask_policy()
    sent = record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        pending = await wait_for_pending(policy.widget)
        click(policy.widget, pending, "approve_edited", args={"a": "many", "b": 1})
        assert sent[-1]["ok"] is False and "invalid arguments" in sent[-1]["error"]
        assert sent[-1]["field_errors"] == [
            {
                "loc": ["a"],
                "msg": "Input should be a valid integer, unable to parse string as an integer",
            }
        ]
        assert not task.done()
        click(policy.widget, pending, "approve_edited", args={"a": 10, "b": 20})
        assert await task == "The answer is 30."
        assert session.all_tool_calls[0].decision.args == {"a": 10, "b": 20}
    assert CALLS == [(10, 20)]


async def test_a_stale_or_second_click_cannot_approve_another_call() -> None:
    policy = ask_policy()
    sent = record_sends(policy.widget)
    widget = policy.widget
    agent = lf.Agent(
        "add twice", tools=[add], allow_tool=policy, limits=lf.AgentLimits(max_tool_calls=4)
    )
    model = script(
        lf.ToolCall("c1", "add", {"a": 1, "b": 2}), lf.ToolCall("c2", "add", {"a": 3, "b": 4})
    )
    async with lf.Session(model) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        first = await wait_for_pending(widget)
        # a decision naming the right prompt but another call id is refused
        widget.handle_decision(
            {"prompt_id": first["prompt_id"], "call_id": "c2", "action": "approve"}
        )
        assert sent[-1]["ok"] is False
        click(widget, first, "approve")
        second = await wait_for_pending(widget, previous=first["prompt_id"])
        assert second["call_id"] == "c2"
        # the old prompt's button clicked again: stale, must not approve c2
        assert widget.handle_decision({**first, "action": "approve"}) is False
        assert sent[-1]["ok"] is False and "no longer waiting" in sent[-1]["error"]
        await asyncio.sleep(0)
        assert not task.done()
        click(widget, second, "deny")
        with pytest.raises(lf.ToolDeniedError):
            await task
        # and a second click on an already decided prompt is refused too
        assert widget.handle_decision({**second, "action": "approve"}) is False
    assert CALLS == []  # c1 was approved, but the batch stopped at c2 before anything ran


async def test_always_allow_skips_the_prompt_for_the_rest_of_the_run() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(two_adds_then_done()) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        click(policy.widget, await wait_for_pending(policy.widget), "approve", always=True)
        assert await task == "done"
        assert "always" in session.all_tool_calls[1].decision.by
    assert CALLS == [(1, 2), (3, 4)]
    assert len(policy.widget.state["history"]) == 1


@pytest.mark.parametrize(
    ("action", "extra"),
    [("deny_note", {"note": "no"}), ("approve_edited", {"args": {"a": 1, "b": 2}})],
)
async def test_always_ticked_with_anything_but_approve_never_allows_later_calls(
    action: str, extra: dict[str, Any]
) -> None:
    # The page sends the checkbox with every action; only a plain Approve may honour it. A
    # denial with "always" ticked once let every later call of the tool run unasked.
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(two_adds_then_done()) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        first = await wait_for_pending(policy.widget)
        click(policy.widget, first, action, always=True, **extra)
        second = await wait_for_pending(policy.widget, previous=first["prompt_id"])
        assert second["call_id"] == "c2"  # asked again: "always" was not granted
        assert not task.done()
        click(policy.widget, second, "deny")
        with pytest.raises(lf.ToolDeniedError):
            await task
    assert (3, 4) not in CALLS
    assert all("always" not in h["decision"] for h in policy.widget.state["history"])


def open_prompt(
    widget: ApprovalWidget, loop: asyncio.AbstractEventLoop, prompt_id: str, validate: Any = None
) -> Any:
    """A prompt for call c1 of ``add``, waiting in ``widget`` (no agent run behind it)."""
    from langfx_nb.notebook.approval import _Prompt

    prompt = _Prompt(
        prompt_id=prompt_id,
        call_id="c1",
        tool="add",
        loop=loop,
        decided=loop.create_future(),
        rendered=loop.create_future(),
        validate=validate,
    )
    widget.open_prompt(prompt)
    return prompt


def test_always_counts_only_for_approve_whatever_the_page_sends() -> None:
    widget = ApprovalWidget()
    record_sends(widget)
    loop = asyncio.new_event_loop()
    try:
        for action, extra, expect in [
            ("deny", {}, False),
            ("deny_note", {"note": "x"}, False),
            ("approve_edited", {"args": {}}, False),
            ("approve", {}, True),
        ]:
            prompt = open_prompt(widget, loop, f"p-{action}")
            content = {"prompt_id": prompt.prompt_id, "call_id": "c1", "action": action}
            assert widget.handle_decision({**content, "always": True, **extra})
            loop.run_until_complete(asyncio.sleep(0))
            assert prompt.decided.result().always is expect, action
    finally:
        loop.close()


class Guest(pydantic.BaseModel):
    name: str


@lf.tool
async def book(seats: Annotated[int, pydantic.Field(ge=1)], guests: list[Guest]) -> str:
    """Book seats."""
    return "booked"


def _rejected(validate: Any, args: dict[str, Any]) -> dict[str, Any]:
    """The reply to an edited-arguments click that ``validate`` refuses."""
    widget = ApprovalWidget()
    sent = record_sends(widget)
    loop = asyncio.new_event_loop()
    try:
        prompt = open_prompt(widget, loop, "p1", validate)
        content = {"prompt_id": "p1", "call_id": "c1", "action": "approve_edited", "args": args}
        assert not widget.handle_decision({"kind": "decision", **content})
        assert not prompt.decided.done() and not prompt.closed  # still waiting for a fix
    finally:
        loop.close()
    assert sent[-1]["ok"] is False
    return sent[-1]


def test_rejected_edits_name_the_field_each_error_belongs_to() -> None:
    reply = _rejected(book.validate_args, {"seats": 0, "guests": [{"name": 3}], "x": "secret"})
    assert reply["field_errors"] == [
        {"loc": ["seats"], "msg": "Input should be greater than or equal to 1"},
        {"loc": ["guests", 0, "name"], "msg": "Input should be a valid string"},
    ]
    assert "seats" in reply["error"]  # the whole message too, for pages that show it generally
    assert "secret" not in str(reply)  # pydantic's input values are not echoed


def test_a_rejection_without_fields_is_only_a_general_error() -> None:
    def validate(args: Any) -> None:  # like an MCP tool: a JSON-schema message, no fields
        raise lf.ToolExecutionError("invalid arguments for MCP tool t: args: 'q' is required")

    reply = _rejected(validate, {})
    assert "field_errors" not in reply
    assert reply["error"] == "invalid arguments for MCP tool t: args: 'q' is required"


async def test_prompt_never_rendered_fails_closed_with_a_clear_message() -> None:
    policy = ask_policy(sleep=instant_sleep, render_timeout=7)
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 1, "b": 1}))) as session:
        with pytest.raises(lf.ToolDeniedError) as info:
            await agent.invoke(session)
    # The policy's own reason is the run's error, not a wrapped cause.
    # what happened, and the ways on; never that a prompt was "not shown"
    assert "no notebook page acknowledged the approval prompt" in str(info.value)
    assert "within 7 s" in str(info.value)
    assert "not shown" not in str(info.value)
    assert "mode='deny'" in str(info.value)
    assert policy.widget.state["pending"] is None
    assert "fail closed" in policy.widget.state["notice"]
    assert CALLS == []


async def test_a_click_from_another_thread_resolves_the_wait() -> None:
    policy = ask_policy()
    record_sends(policy.widget)
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 4, "b": 4}))) as session:
        task = asyncio.ensure_future(agent.invoke(session))
        pending = await wait_for_pending(policy.widget)
        t = threading.Thread(target=click, args=(policy.widget, pending, "approve"))
        t.start()
        t.join()
        assert await task == "The answer is 8."


@pytest.mark.parametrize(
    ("policy", "expect"),
    [
        (ApprovalPolicy(mode="allow", allow=["add"]), "ok"),
        (ApprovalPolicy(mode="allow", allow=["other"]), "denied"),
        (ApprovalPolicy(mode="deny"), "denied"),
        (ApprovalPolicy(mode="deny", deny_message="not in CI"), "told"),
    ],
)
async def test_unattended_modes_never_prompt(policy: ApprovalPolicy, expect: str) -> None:
    agent = lf.Agent("add", tools=[add], allow_tool=policy)
    async with lf.Session(script(lf.ToolCall("c1", "add", {"a": 2, "b": 2}))) as session:
        if expect == "denied":
            with pytest.raises(lf.ToolDeniedError):
                await agent.invoke(session)
        elif expect == "told":
            assert "not in CI" in await agent.invoke(session)
        else:
            assert await agent.invoke(session) == "The answer is 4."
    assert policy._widget is None  # nothing was displayed


def test_policy_rejects_unknown_modes_and_has_a_stable_repr() -> None:
    with pytest.raises(ValueError, match="mode"):
        ApprovalPolicy(mode="sometimes")  # type: ignore[arg-type]
    assert (
        repr(ApprovalPolicy(mode="allow", allow=["b", "a"]))
        == "ApprovalPolicy(mode='allow', allow=['a', 'b'])"
    )


def test_widget_text_repr_is_deterministic() -> None:
    widget = ApprovalWidget()
    widget.state = {
        "pending": None,
        "history": [
            {"tool": "add", "call_id": "c1", "decision": "approved", "approved": True, "who": "x"}
        ],
        "notice": None,
    }
    assert widget._fallback_text() == "ApprovalWidget: 1 decisions (1 approved, 0 denied)"


def test_the_copy_of_a_waiting_prompt_never_says_the_call_did_not_run() -> None:
    """Classic Notebook showed the copy next to the live prompt while the run waited; it said
    the call "did not run", which the click then made false."""
    from langfx_nb.notebook.approval import _approval_static_html

    pending = {"tool": "add", "call_id": "c1", "args": {"a": 2, "b": 3}}
    html = _approval_static_html({"history": [], "pending": pending})
    assert "did not run" not in html
    assert "was waiting for approval when this copy was written" in html
