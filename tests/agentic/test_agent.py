from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic import FakeClock
from langfx_nb.errors import (
    BudgetExceededError,
    EmptyGenerationError,
    ExecutionTimeoutError,
    ToolDeniedError,
    ToolExecutionError,
)
from langfx_nb.llms import LMRequest, Scripted
from langfx_nb.messages import ToolResultPart

from .conftest import Gated, settle

TC = lf.ToolCall


class Calls:
    """Counts side effects, so tests can say exactly what ran."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []


@pytest.fixture
def ran() -> Calls:
    return Calls()


@pytest.fixture
def add(ran: Calls) -> lf.Tool[Any, Any]:
    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.log.append(("add", (a, b)))
        return a + b

    return add


def tool_results(request: LMRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


def nodes(session: lf.Session, kind: str) -> list[tuple[str, str]]:
    return [(n.name, n.status) for n in session.root.walk() if n.kind == kind]


# -- the happy path ------------------------------------------------------------------------
async def test_agent_calls_tools_and_returns_the_final_text(add: lf.Tool[Any, Any]) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "The sum is 3."])
    async with lf.Session(lm) as session:
        answer = await lf.Agent("1+2?", "Use tools.", tools=[add]).invoke(session)
        assert answer == "The sum is 3."
        (agent,) = session.all_actions
        assert [c.kind for c in agent.children] == ["query", "tool_call", "query"]
        call = session.all_tool_calls[0]
    assert call.inputs == {"call_id": "c1", "args": {"a": 1, "b": 2}}
    assert call.outputs == {"json": "3"} and call.status == "ok"
    assert call.decision is not None and call.decision.outcome == "approve"
    first, second = lm.requests
    assert first.system == "Use tools." and [t.name for t in first.tools] == ["add"]
    (result,) = tool_results(second)
    assert (result.call_id, result.name, result.content) == ("c1", "add", "3")
    assert agent.metadata == {"steps": 2, "tool_calls": 1}


async def test_agent_with_owned_session_and_no_tools() -> None:
    assert await lf.Agent("hi").invoke(lm=Scripted(["hello"])) == "hello"


def test_agent_configuration_errors(add: lf.Tool[Any, Any]) -> None:
    with pytest.raises(ValueError, match="unique"):
        lf.Agent("x", tools=[add, add])
    with pytest.raises(TypeError, match="not a Tool"):
        lf.Agent("x", tools=[object()])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        lf.AgentLimits(max_steps=0)
    with pytest.raises(ValueError):
        lf.AgentLimits(max_tool_calls=-1)


# -- bad input: nothing runs before the whole batch is checked --------------------------------
@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([TC("c1", "add", {"a": 1, "b": 2}), TC("c2", "nope", {})], "unknown tool 'nope'"),
        ([TC("c1", "add", {"a": 1, "b": 2}), TC("c1", "add", {"a": 3, "b": 4})], "duplicate"),
        ([TC("c1", "add", {"a": 1, "b": 2}), TC("c2", "add", {"a": "x", "b": 1})], "invalid"),
    ],
    ids=["unknown-tool", "duplicate-id", "invalid-args"],
)
async def test_bad_calls_stop_the_run_before_any_side_effect(
    add: lf.Tool[Any, Any], ran: Calls, batch: list[lf.ToolCall], message: str
) -> None:
    lm = Scripted([batch, "unreachable"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolExecutionError, match=message):
            await lf.Agent("go", tools=[add]).invoke(session)
        (agent,) = session.all_actions
        calls = session.all_tool_calls
    assert ran.log == [] and len(lm.requests) == 1
    assert agent.status == "failed" and agent.error is not None
    assert agent.error["type"] == "ToolExecutionError"
    (bad,) = calls  # only the offending call has a node, and it never executed
    assert bad.status == "failed" and bad.metadata["executed"] is False
    assert bad.inputs["call_id"] == batch[1].id


async def test_an_id_reused_in_a_later_step_is_a_new_call(
    add: lf.Tool[Any, Any], ran: Calls
) -> None:
    # Issue 28: ids are unique within one reply only (servers may number calls per reply);
    # this test asserted the opposite (the run died on the second step) before.
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 1}), TC("c1", "add", {"a": 2, "b": 2}), "x"])
    assert await lf.Agent("go", tools=[add]).invoke(lm=lm) == "x"
    assert ran.log == [("add", (1, 1)), ("add", (2, 2))]


@pytest.mark.parametrize(
    "output",
    [math.nan, {1, 2}, "cycle", "custom"],
    ids=["nan", "set", "cycle", "custom-class"],
)
async def test_non_json_tool_output(output: Any) -> None:
    class Thing:
        pass

    if output == "cycle":
        output = []
        output.append(output)
    elif output == "custom":
        output = {"thing": Thing()}

    @lf.tool
    async def leaky() -> Any:
        """Returns something odd."""
        return output

    lm = Scripted([TC("c1", "leaky", {}), "unreachable"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolExecutionError, match="not valid JSON"):
            await lf.Agent("go", tools=[leaky]).invoke(session)
        assert nodes(session, "tool_call") == [("leaky", "failed")]
        assert nodes(session, "action") == [("Agent", "failed")]
    assert len(lm.requests) == 1  # the bad output never reached the model


async def test_a_raising_tool_is_a_chained_tool_execution_error(ran: Calls) -> None:
    @lf.tool
    async def explode(x: int) -> int:
        """Always fails."""
        ran.log.append(("explode", x))
        raise KeyError("missing thing")

    lm = Scripted([[TC("c1", "explode", {"x": 1}), TC("c2", "explode", {"x": 2})], "x"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolExecutionError, match="explode") as info:
            await lf.Agent("go", tools=[explode]).invoke(session)
        first, second = session.all_tool_calls
    assert isinstance(info.value.__cause__, KeyError)
    assert ran.log == [("explode", 1)]  # the second call of the batch never ran
    assert first.status == "failed" and first.error is not None
    assert first.error["type"] == "ToolExecutionError" and "KeyError" in first.error["message"]
    assert second.status == "cancelled" and second.metadata["executed"] is False


async def test_a_raising_policy_fails_closed(add: lf.Tool[Any, Any], ran: Calls) -> None:
    def policy(call: lf.ToolCall, session: lf.Session) -> bool:
        raise RuntimeError("policy bug")

    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "x"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolDeniedError) as info:
            await lf.Agent("go", tools=[add], allow_tool=policy).invoke(session)
        (call,) = session.all_tool_calls
        (agent,) = session.all_actions
    assert isinstance(info.value.__cause__, RuntimeError)
    assert ran.log == []
    assert call.status == "denied" and call.decision is not None
    assert call.decision.outcome == "error"
    assert agent.status == "denied"


async def test_policy_returning_garbage_is_a_denial(add: lf.Tool[Any, Any], ran: Calls) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "x"])
    agent = lf.Agent("go", tools=[add], allow_tool=lambda c, s: "yes")  # type: ignore[arg-type,return-value]
    with pytest.raises(ToolDeniedError, match="must return"):
        await agent.invoke(lm=lm)
    assert ran.log == []


async def test_a_model_that_never_stops_calling_tools(add: lf.Tool[Any, Any], ran: Calls) -> None:
    lm = Scripted([lambda r: TC(f"c{len(lm.requests)}", "add", {"a": 1, "b": 1})], loop=True)
    async with lf.Session(lm) as session:
        with pytest.raises(BudgetExceededError, match="no model step left"):
            await lf.Agent("go", tools=[add]).invoke(session)
        assert len(session.all_queries) == 8
        assert nodes(session, "action") == [("Agent", "failed")]
    assert len(ran.log) == 7  # the 8th request's call was refused before running


async def test_tool_call_budget_is_checked_for_the_whole_batch(
    add: lf.Tool[Any, Any], ran: Calls
) -> None:
    batch = [TC(f"c{i}", "add", {"a": i, "b": 0}) for i in range(3)]
    lm = Scripted([batch[:2], [*batch[2:], TC("c9", "add", {"a": 9, "b": 0})], "x"])
    limits = lf.AgentLimits(max_tool_calls=3)
    with pytest.raises(BudgetExceededError, match="max_tool_calls=3"):
        await lf.Agent("go", tools=[add], limits=limits).invoke(lm=lm)
    assert ran.log == [("add", (0, 0)), ("add", (1, 0))]


async def test_empty_generation() -> None:
    lm = Scripted([lf.AIMessage("  ")])
    async with lf.Session(lm) as session:
        with pytest.raises(EmptyGenerationError):
            await lf.Agent("go").invoke(session)
        assert nodes(session, "action") == [("Agent", "failed")]


# -- policy decisions ----------------------------------------------------------------------------
async def test_plain_false_stops_with_tool_denied(add: lf.Tool[Any, Any], ran: Calls) -> None:
    asked: list[str] = []

    def policy(call: lf.ToolCall, session: lf.Session) -> bool:
        asked.append(call.id)
        return call.id != "c2"

    batch = [TC("c1", "add", {"a": 1, "b": 1}), TC("c2", "add", {"a": 2, "b": 2})]
    lm = Scripted([batch, "x"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolDeniedError, match="c2"):
            await lf.Agent("go", tools=[add], allow_tool=policy).invoke(session)
        first, second = session.all_tool_calls
        (agent,) = session.all_actions
    assert asked == ["c1", "c2"] and ran.log == []  # c1 was approved but never ran
    assert first.status == "cancelled" and first.metadata["executed"] is False
    assert second.status == "denied" and second.decision is not None
    assert second.decision.outcome == "stop" and second.decision.by == "allow_tool"
    assert agent.status == "denied"


async def test_deny_sends_the_message_back_and_the_loop_continues(
    add: lf.Tool[Any, Any], ran: Calls
) -> None:
    async def policy(call: lf.ToolCall, session: lf.Session) -> lf.Deny | bool:
        await asyncio.sleep(0)  # an async policy, like the notebook approval prompt
        return lf.Deny("Not allowed today.", by="user") if call.args["a"] > 5 else True

    batch = [TC("c1", "add", {"a": 9, "b": 1}), TC("c2", "add", {"a": 1, "b": 1})]
    lm = Scripted([batch, "Only 2 could be computed."])
    async with lf.Session(lm) as session:
        answer = await lf.Agent("go", tools=[add], allow_tool=policy).invoke(session)
        denied, ok = session.all_tool_calls
    assert answer == "Only 2 could be computed."
    assert ran.log == [("add", (1, 1))]
    denied_result, ok_result = tool_results(lm.requests[1])
    assert (denied_result.call_id, denied_result.content, denied_result.is_error) == (
        "c1",
        "Not allowed today.",
        True,
    )
    assert (ok_result.call_id, ok_result.content) == ("c2", "2")
    assert denied.status == "denied" and denied.decision is not None
    assert denied.decision.outcome == "deny" and denied.decision.by == "user"
    assert denied.decision.note == "Not allowed today."
    assert ok.status == "ok"


async def test_approve_with_edited_args_revalidates(add: lf.Tool[Any, Any], ran: Calls) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "done"])
    agent = lf.Agent("go", tools=[add], allow_tool=lambda c, s: lf.Approve({"a": 10, "b": 20}))
    async with lf.Session(lm) as session:
        assert await agent.invoke(session) == "done"
        (call,) = session.all_tool_calls
    assert ran.log == [("add", (10, 20))]
    assert call.inputs["args"] == {"a": 1, "b": 2}
    assert call.decision is not None and call.decision.args == {"a": 10, "b": 20}
    assert tool_results(lm.requests[1])[0].content == "30"

    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "done"])
    bad = lf.Agent("go", tools=[add], allow_tool=lambda c, s: lf.Approve({"a": "ten"}))
    with pytest.raises(ToolExecutionError, match="invalid arguments"):
        await bad.invoke(lm=lm)
    assert len(ran.log) == 1


async def test_policy_sees_the_pending_call_node(add: lf.Tool[Any, Any]) -> None:
    seen: list[tuple[str, str, str]] = []

    def policy(call: lf.ToolCall, session: lf.Session) -> bool:
        node = session.node
        seen.append((node.kind, node.status, node.inputs["call_id"]))
        return True

    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "done"])
    await lf.Agent("go", tools=[add], allow_tool=policy).invoke(lm=lm)
    assert seen == [("tool_call", "waiting", "c1")]  # the node waits while the policy is asked


# -- execution order, nesting, deadlines and cancellation ---------------------------------------
async def test_tools_run_sequentially_by_default_and_in_parallel_on_request() -> None:
    events: list[str] = []

    @lf.tool
    async def step(name: str) -> str:
        """Records when it starts and ends."""
        events.append(f"start {name}")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        events.append(f"end {name}")
        return name

    batch = [TC("c1", "step", {"name": "a"}), TC("c2", "step", {"name": "b"})]
    await lf.Agent("go", tools=[step]).invoke(lm=Scripted([batch, "ok"]))
    assert events == ["start a", "end a", "start b", "end b"]

    events.clear()
    lm = Scripted([batch, "ok"])
    await lf.Agent("go", tools=[step], parallel_tools=True).invoke(lm=lm)
    assert events[:2] == ["start a", "start b"]
    assert [r.call_id for r in tool_results(lm.requests[1])] == ["c1", "c2"]


async def test_parallel_failure_cancels_siblings() -> None:
    gate = asyncio.Event()

    @lf.tool
    async def wait() -> int:
        """Waits forever."""
        await gate.wait()
        return 1

    @lf.tool
    async def fail() -> int:
        """Fails."""
        await asyncio.sleep(0)
        raise ValueError("no")

    lm = Scripted([[TC("c1", "wait", {}), TC("c2", "fail", {})], "x"])
    async with lf.Session(lm) as session:
        with pytest.raises(ToolExecutionError):
            await lf.Agent("go", tools=[wait, fail], parallel_tools=True).invoke(session)
        assert nodes(session, "tool_call") == [("wait", "cancelled"), ("fail", "failed")]


async def test_tools_can_query_through_their_session_view() -> None:
    @lf.tool
    async def ask(question: str, session: lf.Session) -> str:
        """Asks a sub-question."""
        return str(await session.query(question, lm=lf.llms.Echo()))

    lm = Scripted([TC("c1", "ask", {"question": "inner?"}), "outer!"])
    async with lf.Session(lm) as session:
        assert await lf.Agent("go", tools=[ask]).invoke(session) == "outer!"
        (call,) = session.all_tool_calls
        (inner,) = call.children
    assert inner.kind == "query" and inner.outputs["text"] == "inner?"


async def test_deadline_hit_mid_tool(clock: FakeClock, ran: Calls) -> None:
    started = asyncio.Event()

    @lf.tool
    async def slow(x: int) -> int:
        """Takes forever."""
        ran.log.append(("slow", x))
        started.set()
        await asyncio.Event().wait()
        return x

    lm = Scripted([[TC("c1", "slow", {"x": 1}), TC("c2", "slow", {"x": 2})], "x"])
    limits = lf.AgentLimits(max_execution_time=30)
    async with lf.Session(lm, clock=clock) as session:
        task = asyncio.ensure_future(lf.Agent("go", tools=[slow], limits=limits).invoke(session))
        await started.wait()
        clock.advance(29)
        await settle()
        assert not task.done()
        clock.advance(1)
        with pytest.raises(ExecutionTimeoutError):
            await task
        assert nodes(session, "action") == [("Agent", "timed_out")]
        assert nodes(session, "tool_call") == [("slow", "timed_out"), ("slow", "cancelled")]
    assert ran.log == [("slow", 1)] and len(lm.requests) == 1


async def test_invoke_can_only_shorten_the_limits_deadline(clock: FakeClock) -> None:
    seen: list[float | None] = []

    @lf.tool
    async def peek(session: lf.Session) -> int:
        """Reports the deadline."""
        seen.append(session.remaining_time)
        return 0

    agent = lf.Agent("go", tools=[peek], limits=lf.AgentLimits(max_execution_time=60))
    for limit in (10, 600):
        lm = Scripted([TC("c1", "peek", {}), "x"])
        async with lf.Session(lm, clock=clock) as session:
            await agent.invoke(session, max_execution_time=limit)
    assert seen == [10, 60]


async def test_cancellation_mid_stream_closes_the_stream(add: lf.Tool[Any, Any]) -> None:
    lm = Gated()
    events: list[dict[str, Any]] = []
    async with lf.Session(lm) as session:
        session.subscribe(events.append)
        task = asyncio.ensure_future(lf.Agent("go", tools=[add], stream=True).invoke(session))
        await lm.reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert nodes(session, "query") == [("step 1", "cancelled")]
        assert nodes(session, "action") == [("Agent", "cancelled")]
        assert session.all_tool_calls == []
    assert lm.closed
    deltas = [e["changes"]["delta"] for e in events if e["type"] == "node_update"]
    assert deltas == ["Hel"]


async def test_streamed_agent_answer(add: lf.Tool[Any, Any]) -> None:
    lm = Gated()
    lm.gate.set()
    assert await lf.Agent("go", tools=[add], stream=True).invoke(lm=lm) == "Hello"


async def test_trace_of_an_agent_run_round_trips(add: lf.Tool[Any, Any]) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "3"])
    policy = lambda c, s: lf.Approve(by="tester")  # noqa: E731
    async with lf.Session(lm) as session:
        await lf.Agent("go", tools=[add], allow_tool=policy).invoke(session)
        data = session.trace_json()
    loaded = lf.Session.load_trace(data)
    (call,) = loaded.all_tool_calls
    assert call.decision is not None and call.decision.by == "tester"
    assert loaded.trace_json()["nodes"] == data["nodes"]


async def test_observers_see_a_pending_call_then_its_decision_then_its_end(
    add: lf.Tool[Any, Any],
) -> None:
    events: list[dict[str, Any]] = []
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "3"])
    policy = lambda c, s: lf.Approve(by="user")  # noqa: E731
    async with lf.Session(lm) as session:
        session.subscribe(events.append)
        await lf.Agent("go", tools=[add], allow_tool=policy).invoke(session)
        call_id = session.all_tool_calls[0].id
    mine = [
        e for e in events if e.get("node_id") == call_id or e.get("node", {}).get("id") == call_id
    ]
    assert [e["type"] for e in mine] == ["node_start", "node_update", "node_update", "node_end"]
    start, waiting, update, end = mine
    assert start["node"]["status"] == "running" and start["node"]["inputs"]["call_id"] == "c1"
    assert waiting["changes"]["status"] == "waiting"
    asked = waiting["changes"]["decision"]
    assert asked["outcome"] == "waiting" and asked["decided_at"] is None
    assert isinstance(asked["asked_at"], float)
    assert update["changes"]["status"] == "running"
    assert update["changes"]["decision"]["outcome"] == "approve"
    assert update["changes"]["decision"]["by"] == "user"
    assert update["changes"]["decision"]["asked_at"] == asked["asked_at"]
    assert update["changes"]["decision"]["decided_at"] >= asked["asked_at"]
    assert end["node"]["status"] == "ok" and end["node"]["outputs"] == {"json": "3"}
