"""Resumable approvals: invoke(on_approval="suspend") → RunState (JSON) → Agent.resume."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.errors import BudgetExceededError, ToolDeniedError
from langfx_nb.llms import LMRequest, Scripted
from langfx_nb.messages import ToolResultPart

from .conftest import Ledger

TC = lf.ToolCall


@pytest.fixture
def tools(ledger: Ledger) -> list[lf.Tool[Any, Any]]:
    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        ledger.ran.append(("add", (a, b)))
        return a + b

    @lf.tool
    async def send_email(to: str, body: str) -> str:
        """Send an email."""
        ledger.ran.append(("send_email", to))
        return f"sent to {to}"

    return [add, send_email]


def results(request: LMRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


def safe_only(call: lf.ToolCall, session: lf.Session) -> bool | None:
    return True if call.name == "add" else None  # None: ask a person (suspend)


def two_step_script() -> Scripted:
    """Step 1 calls add; step 2 calls add and send_email together; then the model answers."""
    return Scripted(
        [
            TC("c1", "add", {"a": 1, "b": 2}),
            [
                TC("c2", "add", {"a": 3, "b": 4}),
                TC("c3", "send_email", {"to": "x@y", "body": "hi"}),
            ],
            "done",
        ]
    )


async def test_suspend_returns_a_json_state_and_nothing_in_the_batch_runs(
    tools: list[lf.Tool[Any, Any]], ledger: Ledger
) -> None:
    lm = two_step_script()
    agent = lf.Agent("go", tools=tools, allow_tool=safe_only)
    state = await agent.invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    assert [(c.id, c.name) for c in state.pending] == [("c3", "send_email")]
    # c1 ran in step 1; in step 2 nothing ran, even the approved c2, until c3 is decided.
    assert ledger.ran == [("add", (1, 2))]
    data = json.loads(state.to_json_str())
    assert data["format"] == "langfx_nb.run_state"
    assert data["version"] == lf.agentic.runstate.RUN_STATE_VERSION
    assert [b["call_id"] for b in data["batch"]] == ["c2", "c3"]
    assert data["batch"][0]["decision"]["outcome"] == "approve"
    nodes = {n["id"]: n for n in data["trace"]["nodes"]}
    agent_node = nodes[data["node_id"]]
    assert agent_node["status"] == "suspended"
    calls = [n for n in nodes.values() if n["kind"] == "tool_call"]
    assert [(n["inputs"]["call_id"], n["status"]) for n in calls] == [
        ("c1", "ok"),
        ("c2", "suspended"),
        ("c3", "suspended"),
    ]


async def test_resume_runs_the_batch_once_and_finishes_under_the_same_root(
    tools: list[lf.Tool[Any, Any]], ledger: Ledger
) -> None:
    lm = two_step_script()
    agent = lf.Agent("go", tools=tools, allow_tool=safe_only)
    state = await agent.invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    saved = lf.RunState.from_json(state.to_json_str())  # through text, as across processes
    root_id = saved.trace["nodes"][0]["id"] if saved.trace else None
    session_id = saved.trace["session"]["id"] if saved.trace else None
    ledger.ran.clear()
    answer = await lf.Agent.resume(
        saved, {"c3": lf.Approve(by="alice")}, tools=tools, lm=lm, allow_tool=safe_only
    )
    assert answer == "done"
    assert ledger.ran == [("add", (3, 4)), ("send_email", "x@y")]  # c1 never ran again
    # The model got all three results, in order, after the resumed step.
    assert [(r.call_id, r.content) for r in results(lm.requests[2])] == [
        ("c1", "3"),
        ("c2", "7"),
        ("c3", '"sent to x@y"'),
    ]
    with pytest.raises(RuntimeError, match="already resumed"):
        await lf.Agent.resume(saved, {"c3": True}, tools=tools, lm=lm)
    assert root_id == "0" and session_id


async def test_resume_in_the_open_session_continues_the_same_trace(
    tools: list[lf.Tool[Any, Any]],
) -> None:
    lm = Scripted([TC("c1", "send_email", {"to": "a", "body": "b"}), "ok"])
    async with lf.Session(lm) as session:
        state = await lf.Agent("go", tools=tools).invoke(session, on_approval="suspend")
        assert isinstance(state, lf.RunState)
        answer = await lf.Agent.resume(
            state, {"c1": lf.Deny("not now")}, tools=tools, session=session
        )
        assert answer == "ok"
        first, second = session.all_actions
        assert first.status == "suspended" and second.status == "ok"
        assert second.metadata["resumed_from"] == first.id
        assert first.parent_id == second.parent_id == session.root.id
        resumed_call = [n for n in session.all_tool_calls if n.metadata.get("resumed")]
        assert resumed_call[0].status == "denied"
        assert resumed_call[0].decision is not None
        assert resumed_call[0].decision.by == "resume"
    (denied,) = results(lm.requests[1])
    assert denied.is_error and denied.content == "not now"


async def test_restored_trace_keeps_root_and_numbers_new_nodes_after_the_old(
    tools: list[lf.Tool[Any, Any]],
) -> None:
    lm = Scripted([TC("c1", "send_email", {"to": "a", "body": "b"}), "ok"])
    state = await lf.Agent("go", tools=tools).invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState) and state.trace is not None
    old_ids = {n["id"] for n in state.trace["nodes"]}
    from langfx_nb.agentic.runstate import restore_session

    (step,) = [n for n in state.trace["nodes"] if n["name"] == "step 1"]
    assert "prompt" not in step["inputs"]  # the transcript holds it: not saved twice
    session = restore_session(state.trace, lm, transcript=state.transcript)
    assert session.id == state.trace["session"]["id"]
    restored = session.find(step["id"])
    assert restored is not None
    assert restored.inputs["prompt"] == {"role": "user", "text": "go"}
    assert "prompt_turns" not in restored.metadata
    assert {n.id for n in session.root.walk()} == old_ids
    node = session.log("info", "x")
    assert node.id not in old_ids and node.start >= max(
        n["end"] or n["start"] for n in state.trace["nodes"]
    )
    await session.dispose()


async def test_decisions_must_match_the_pending_calls(tools: list[lf.Tool[Any, Any]]) -> None:
    lm = Scripted([TC("c1", "send_email", {"to": "a", "body": "b"}), "ok"])
    state = await lf.Agent("go", tools=tools).invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    with pytest.raises(ValueError, match="decision is needed for pending call"):
        await lf.Agent.resume(state, {}, tools=tools, lm=lm)
    with pytest.raises(ValueError, match="no pending call with id 'zz'"):
        await lf.Agent.resume(state, {"c1": True, "zz": True}, tools=tools, lm=lm)
    with pytest.raises(ValueError, match="missing: send_email"):
        await lf.Agent.resume(state, {"c1": True}, tools=tools[:1], lm=lm)
    with pytest.raises(ToolDeniedError):  # False stops the run, as from allow_tool
        await lf.Agent.resume(state, {"c1": False}, tools=tools, lm=lm)


def test_bad_state_json_is_refused() -> None:
    with pytest.raises(ValueError, match="not a langfx_nb run state"):
        lf.RunState.from_json({"format": "x"})
    with pytest.raises(ValueError, match="unsupported run state version 99"):
        lf.RunState.from_json({"format": "langfx_nb.run_state", "version": 99})


async def test_limits_used_carry_over(tools: list[lf.Tool[Any, Any]]) -> None:
    steps = [TC(f"c{i}", "send_email", {"to": "a", "body": "b"}) for i in range(5)]
    lm = Scripted(steps)
    agent = lf.Agent("go", tools=tools, limits=lf.AgentLimits(max_steps=3, max_total_tokens=10_000))
    state = await agent.invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    state = await lf.Agent.resume(state, {"c0": True}, tools=tools, lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    assert state.progress.steps == 2
    assert state.progress.budget_used is not None
    assert state.progress.budget_used["total_tokens"] > 0
    with pytest.raises(BudgetExceededError, match="max_steps=3"):
        await lf.Agent.resume(state, {"c1": True}, tools=tools, lm=lm)


async def test_state_holds_no_secrets_and_no_pickles(tools: list[lf.Tool[Any, Any]]) -> None:
    lm = Scripted([TC("c1", "send_email", {"to": "a", "body": "b"}), "ok"])
    async with lf.Session(lm, metadata={"api_key": "sk-SECRET"}) as session:
        state = await lf.Agent("go", tools=tools).invoke(
            session, on_approval="suspend", temperature=0.1
        )
    text = state.to_json_str() if isinstance(state, lf.RunState) else ""
    assert "sk-SECRET" not in text
    json.loads(text)


RESUMER = textwrap.dedent(
    """
    import asyncio, json, sys
    import langfx_nb as lf
    from langfx_nb.llms import Scripted

    ran = []

    @lf.tool
    async def send_email(to: str, body: str) -> str:
        "Send an email."
        ran.append(to)
        return "sent"

    @lf.tool
    async def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    async def main():
        state = lf.RunState.from_json(sys.stdin.read())
        lm = Scripted(["all done"])
        answer = await lf.Agent.resume(state, {"c1": lf.Approve(by="ops")},
                                       tools=[add, send_email], lm=lm)
        print(json.dumps({"answer": answer, "ran": ran,
                          "results": [m.to_json() for m in lm.requests[0].messages]}))

    asyncio.run(main())
    """
)


async def test_resume_in_another_process(tools: list[lf.Tool[Any, Any]], ledger: Ledger) -> None:
    lm = Scripted([TC("c1", "send_email", {"to": "bob", "body": "hi"})])
    state = await lf.Agent("go", tools=tools).invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState)
    out = subprocess.run(
        [sys.executable, "-c", RESUMER],
        input=state.to_json_str(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result = json.loads(out.stdout)
    assert result["answer"] == "all done" and result["ran"] == ["bob"]
    last = result["results"][-1]
    assert last["role"] == "tool" and last["parts"][0]["content"] == '"sent"'
    assert ledger.ran == []  # nothing ran here


async def test_a_typed_agent_resumes_with_its_output_type(tools: list[lf.Tool[Any, Any]]) -> None:
    from pydantic import BaseModel

    class Receipt(BaseModel):
        ok: bool

    lm = Scripted([TC("c1", "send_email", {"to": "a", "body": "b"}), '{"result": {"ok": true}}'])
    agent = lf.Agent("go", tools=tools, output=Receipt)
    state = await agent.invoke(lm=lm, on_approval="suspend")
    assert isinstance(state, lf.RunState) and state.agent.output == "Receipt"
    with pytest.raises(ValueError, match="resume needs output="):
        await lf.Agent.resume(state, {"c1": True}, tools=tools, lm=lm)
    answer = await lf.Agent.resume(state, {"c1": True}, tools=tools, lm=lm, output=Receipt)
    assert answer == Receipt(ok=True)
