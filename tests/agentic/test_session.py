from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.agentic import FakeClock
from langfx_nb.errors import ExecutionTimeoutError, LMError
from langfx_nb.llms import Echo, Scripted, StaticResponse

from .conftest import settle


class Ask(lf.Action[str]):
    def __init__(self, text: str) -> None:
        self.text = text

    async def call(self, session: lf.Session) -> str:
        await asyncio.sleep(0)
        return await session.query("Say {{text}}", vars={"text": self.text})


class Point(BaseModel):
    x: int


# -- query nodes ---------------------------------------------------------------------------
async def test_query_records_rendered_prompt_response_model_usage_and_timing(
    clock: FakeClock,
) -> None:
    lm = Echo()
    async with lf.Session(lm, clock=clock) as session:
        assert await session.query("Say {{x}}", vars={"x": "hi"}) == "Say hi"
        (node,) = session.all_queries
    assert node.kind == "query" and node.status == "ok"
    assert node.parent_id == session.root.id
    assert node.inputs["prompt"] == "Say {{x}}"
    assert node.inputs["vars"] == {"x": "hi"}
    assert node.inputs["rendered_prompt"] == {"role": "user", "text": "Say hi"}
    assert node.outputs["text"] == "Say hi"
    assert node.metadata["model"] == "fake:echo"
    assert node.usage == lf.Usage(2, 2, 4)
    assert (node.start, node.end) == (0.0, 0.0)  # the fake clock never moved


async def test_query_with_schema_records_parsed_result() -> None:
    lm = Scripted(["```python\nPoint(x=3)\n```"])
    async with lf.Session(lm) as session:
        point = await session.query("a point", Point)
        assert point == Point(x=3)
        (node,) = session.all_queries
    assert node.name == "query:Point"
    assert node.outputs["result"] == {"x": 3}
    assert "Point(x=3)" in node.outputs["text"]


async def test_query_returns_message_and_failure_is_recorded() -> None:
    lm = Scripted(["fine", LMError("boom")])
    async with lf.Session(lm) as session:
        message = await session.query("q", returns_message=True)
        assert isinstance(message, lf.AIMessage) and message.text == "fine"
        with pytest.raises(LMError):
            await session.query("q")
        failed = session.all_queries[1]
    assert failed.status == "failed"
    assert failed.error == {"type": "LMError", "message": "boom"}


async def test_defaults_merge_under_explicit_options_without_mutation() -> None:
    lm = Scripted(["a", "b", "c"])

    class Probe(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            await session.query("x", max_tokens=5)

    async with lf.Session(lm, temperature=0.5, max_tokens=100) as session:
        await session.query("x", max_tokens=5)
        await Probe().invoke(session, temperature=0.1)
        await session.query("x")
        assert dict(session.defaults) == {"temperature": 0.5, "max_tokens": 100}
    first, second, third = (r.options for r in lm.requests)
    assert (first.temperature, first.max_tokens) == (0.5, 5)
    assert (second.temperature, second.max_tokens) == (0.1, 5)
    assert (third.temperature, third.max_tokens) == (0.5, 100)


async def test_query_stream_records_a_query_node() -> None:
    lm = Scripted(['{"result": {"x": 7}}'], chunk_size=3)
    async with lf.Session(lm) as session:
        seen: list[Any] = []
        session.subscribe(seen.append)
        events = [ev async for ev in session.query_stream("a point", Point, protocol="json")]
        (node,) = session.all_queries
    assert events[-1].type == "generation_complete" and events[-1].value == Point(x=7)
    assert any(ev.type == "field_end" and ev.path == ("x",) for ev in events)
    assert node.name == "query:Point" and node.status == "ok"
    assert node.metadata["stream"] is True
    assert node.inputs["prompt"] == "a point"
    assert node.outputs["result"] == {"x": 7}
    assert node.outputs["text"] == '{"result": {"x": 7}}'
    assert node.usage is not None and node.usage.total_tokens > 0
    ends = [e["node"] for e in seen if e["type"] == "node_end" and e["node"]["id"] == node.id]
    assert [e["status"] for e in ends] == ["ok"]


async def test_query_stream_outcomes_are_recorded() -> None:
    lm = Scripted(['{"result": {"x": "nan"}}', LMError("boom"), "streamed", '{"result": {}}'])
    async with lf.Session(lm) as session:
        bad = [ev async for ev in session.query_stream("q", Point, protocol="json")]
        failed = [ev async for ev in session.query_stream("q", Point, protocol="json")]
        text = [ev async for ev in session.query_stream("q")]
        stopped = session.query_stream("q", Point, protocol="json")
        with pytest.raises(ValueError):  # setup errors raise before iteration
            session.query_stream("q", Point, protocol="nope")
        async for _ in stopped:
            break
        await stopped.aclose()  # type: ignore[attr-defined]
        nodes = session.all_queries
    assert bad[-1].type == "parsing_failed" and failed[-1].type == "generation_failed"
    assert "".join(text) == "streamed"
    assert [n.status for n in nodes] == ["failed", "failed", "ok", "cancelled"]
    assert nodes[1].error == {"type": "LMError", "message": "boom"}


@pytest.mark.parametrize("schema", [None, Point])
async def test_query_and_query_stream_leave_the_same_query_node(schema: Any) -> None:
    """Both record through one path: rendered prompt, raw response, result, usage, status."""
    answer = '{"result": {"x": 7}}'
    lm = Scripted([answer, answer], chunk_size=4)
    async with lf.Session(lm) as session:
        await session.query("Say {{w}}", schema, vars={"w": "a point"}, protocol="json")
        stream = session.query_stream("Say {{w}}", schema, vars={"w": "a point"}, protocol="json")
        _ = [ev async for ev in stream]
        plain, streamed = session.all_queries
    for node in (plain, streamed):
        assert node.status == "ok"
        assert node.metadata["attempts"] == 1
        assert "a point" in node.inputs["rendered_prompt"]["text"]
        assert node.inputs["prompt"] == "Say {{w}}"
        assert node.outputs["text"] == answer
        assert node.outputs["finish_reason"] == "stop"
        assert node.usage is not None and node.usage.total_tokens
        if schema is not None:
            assert node.outputs["result"] == {"x": 7}
    assert streamed.metadata["stream"] is True
    assert plain.usage == streamed.usage


async def test_a_failed_query_stream_keeps_the_response_and_the_error() -> None:
    lm = Scripted(['{"result": {"x": "nan"}}'])
    async with lf.Session(lm) as session:
        events = [ev async for ev in session.query_stream("q", Point, protocol="json")]
        (node,) = session.all_queries
    assert events[-1].type == "parsing_failed"
    assert node.status == "failed" and node.error is not None
    assert node.outputs["text"] == '{"result": {"x": "nan"}}'
    assert node.usage is not None and node.inputs["rendered_prompt"]


async def test_query_without_model_is_a_clear_error() -> None:
    async with lf.Session() as session:
        with pytest.raises(TypeError, match="no model"):
            await session.query("hi")


# -- actions and views -------------------------------------------------------------------
async def test_nested_actions_attribute_work_to_the_right_parent() -> None:
    class Outer(lf.Action[list[str]]):
        async def call(self, session: lf.Session) -> list[str]:
            session.log("info", "starting", n=2)
            return [await Ask("a").invoke(session), await Ask("b").invoke(session)]

    async with lf.Session(Echo()) as session:
        assert await Outer().invoke(session) == ["Say a", "Say b"]
        outer, *inner = session.all_actions
    assert [c.kind for c in outer.children] == ["log", "action", "action"]
    assert all(a.parent_id == outer.id for a in inner)
    assert [q.parent_id for q in session.all_queries] == [a.id for a in inner]
    assert inner[0].inputs == {"text": "a"} and inner[0].outputs == "Say a"
    (log,) = session.all_logs
    assert log.name == "info" and log.inputs == {"message": "starting", "n": 2}


async def test_owned_session_when_none_is_given() -> None:
    assert await Ask("x").invoke(lm=Echo()) == "Say x"


async def test_view_carries_ancestry_and_refuses_work_after_its_invocation() -> None:
    seen: list[lf.Session] = []

    class Keep(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            seen.append(session)

    async with lf.Session(Echo()) as session:
        await Keep().invoke(session)
        (view,) = seen
        assert view.ancestry == (session.root.id, session.all_actions[0].id)
        assert not view.is_root
        with pytest.raises(RuntimeError, match="ended"):
            await view.query("late")
        with pytest.raises(RuntimeError, match="root"):
            await view.dispose()


async def test_one_action_instance_runs_concurrently() -> None:
    action = Ask("same")
    models = [StaticResponse(f"r{i}") for i in range(5)]
    async with lf.Session() as session:
        results = await asyncio.gather(*(action.invoke(session, lm=m) for m in models))
        nodes = session.all_actions
    assert results == [f"r{i}" for i in range(5)]
    assert sorted(n.outputs for n in nodes) == sorted(results)
    assert len({n.id for n in nodes}) == 5
    assert not hasattr(action, "result")


async def test_action_error_is_recorded_with_class_and_message() -> None:
    class Broken(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            raise ValueError("bad input")

    async with lf.Session() as session:
        with pytest.raises(ValueError):
            await Broken().invoke(session)
        (node,) = session.all_actions
    assert node.status == "failed"
    assert node.error == {"type": "ValueError", "message": "bad input"}


# -- deadlines and cancellation ----------------------------------------------------------
class Wait(lf.Action[str]):
    def __init__(self, gate: asyncio.Event, inner: lf.Action[Any] | None = None) -> None:
        self.gate = gate
        self.inner = inner
        self.views: list[lf.Session] = []

    def trace_inputs(self) -> Any:
        return None

    async def call(self, session: lf.Session) -> str:
        self.views.append(session)
        if self.inner is not None:
            return str(await self.inner.invoke(session, max_execution_time=1000))
        await self.gate.wait()
        return "done"


async def test_deadline_expiry_raises_and_records_timed_out(clock: FakeClock) -> None:
    gate = asyncio.Event()
    async with lf.Session(clock=clock) as session:
        task = asyncio.ensure_future(Wait(gate).invoke(session, max_execution_time=10))
        await settle()
        clock.advance(9.5)
        await settle()
        assert not task.done()
        clock.advance(0.5)
        with pytest.raises(ExecutionTimeoutError):
            await task
        (node,) = session.all_actions
    assert node.status == "timed_out"
    assert node.error is not None and node.error["type"] == "ExecutionTimeoutError"
    assert clock.pending_timers == 0


async def test_children_cannot_extend_the_parent_deadline(clock: FakeClock) -> None:
    gate = asyncio.Event()
    inner = Wait(gate)
    outer = Wait(gate, inner)
    async with lf.Session(clock=clock) as session:
        task = asyncio.ensure_future(outer.invoke(session, max_execution_time=10))
        await settle()
        assert inner.views[0].deadline == outer.views[0].deadline == 110.0
        assert inner.views[0].remaining_time == 10.0
        clock.advance(10)
        with pytest.raises(ExecutionTimeoutError):
            await task
        statuses = [n.status for n in session.all_actions]
    assert statuses == ["timed_out", "timed_out"]


async def test_a_child_timeout_can_be_caught_by_its_parent(clock: FakeClock) -> None:
    gate = asyncio.Event()

    class Recover(lf.Action[str]):
        async def call(self, session: lf.Session) -> str:
            try:
                await Wait(gate).invoke(session, max_execution_time=1)
            except ExecutionTimeoutError:
                return "recovered"
            return "not reached"

    async with lf.Session(clock=clock) as session:
        task = asyncio.ensure_future(Recover().invoke(session, max_execution_time=60))
        await settle()
        clock.advance(1)
        assert await task == "recovered"
        outer, inner = session.all_actions
    assert (outer.status, inner.status) == ("ok", "timed_out")


async def test_already_expired_deadline_fails_before_running(clock: FakeClock) -> None:
    async with lf.Session(Echo(), clock=clock) as session:
        with pytest.raises(ExecutionTimeoutError):
            await Ask("x").invoke(session, max_execution_time=0)
        (node,) = session.all_actions
    assert node.status == "timed_out" and not node.children


async def test_cancellation_propagates_and_is_recorded(clock: FakeClock) -> None:
    gate = asyncio.Event()
    async with lf.Session(clock=clock) as session:
        task = asyncio.ensure_future(Wait(gate, Wait(gate)).invoke(session))
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [n.status for n in session.all_actions] == ["cancelled", "cancelled"]


# -- concurrent_map ----------------------------------------------------------------------
async def test_concurrent_map_keeps_order_and_bounds_concurrency() -> None:
    running = 0
    peak = 0

    async def fn(item: int, branch: lf.Session) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        running -= 1
        return str(await branch.query("{{i}}", vars={"i": item}))

    async with lf.Session(Echo()) as session:
        out = await session.concurrent_map(range(20), fn, max_concurrency=3)
        assert out == [str(i) for i in range(20)]
        assert peak == 3
        assert session.root.progress == {"done": 20, "total": 20, "failed": 0}
        assert len(session.all_queries) == 20


async def test_concurrent_map_fail_fast_cancels_and_settles_siblings() -> None:
    gate = asyncio.Event()
    started: list[int] = []

    class Item(lf.Action[int]):
        def __init__(self, i: int) -> None:
            self.i = i

        async def call(self, session: lf.Session) -> int:
            started.append(self.i)
            if self.i == 3:
                await asyncio.sleep(0)
                raise ValueError("item 3")
            await gate.wait()
            return self.i

    async with lf.Session() as session:
        with pytest.raises(ValueError, match="item 3"):
            await session.concurrent_map(
                range(10), lambda i, b: Item(i).invoke(b), max_concurrency=5
            )
        statuses = {n.inputs["i"]: n.status for n in session.all_actions}
    assert statuses[3] == "failed"
    assert all(statuses[i] == "cancelled" for i in (0, 1, 2, 4))
    assert started == [0, 1, 2, 3, 4]  # nothing new started after the failure


async def test_concurrent_map_collect_returns_errors_in_place() -> None:
    async def fn(i: int, branch: lf.Session) -> int:
        if i % 2:
            raise ValueError(f"odd {i}")
        return i

    async with lf.Session() as session:
        out = await session.concurrent_map(range(4), fn, on_error="collect")
    assert out[0] == 0 and out[2] == 2
    assert isinstance(out[1], ValueError) and str(out[3]) == "odd 3"
    assert session.root.progress == {"done": 4, "total": 4, "failed": 2}


async def test_concurrent_map_under_a_deadline_times_out_every_branch(clock: FakeClock) -> None:
    gate = asyncio.Event()

    class Fan(lf.Action[list[str]]):
        async def call(self, session: lf.Session) -> list[str]:
            return await session.concurrent_map(range(3), lambda i, b: Wait(gate).invoke(b))

    async with lf.Session(clock=clock) as session:
        task = asyncio.ensure_future(Fan().invoke(session, max_execution_time=5))
        await settle()
        clock.advance(5)
        with pytest.raises(ExecutionTimeoutError):
            await task
        statuses = [n.status for n in session.all_actions]
    assert statuses == ["timed_out"] * 4


# -- observers -------------------------------------------------------------------------------
async def test_observers_get_start_update_end_and_log_events_as_plain_json() -> None:
    events: list[dict[str, Any]] = []
    async with lf.Session(Echo()) as session:
        unsubscribe = session.subscribe(events.append)
        await Ask("x").invoke(session)
        session.log("warning", "careful")
        session.set_progress(1, 2, "half")
        unsubscribe()
        await Ask("y").invoke(session)
    types = [e["type"] for e in events]
    assert types == ["node_start", "node_start", "node_end", "node_end", "log", "node_update"]
    assert [e["seq"] for e in events] == list(range(1, 7))
    assert events[0]["node"]["status"] == "running" and events[0]["node"]["kind"] == "action"
    assert events[3]["node"]["status"] == "ok"
    assert events[5]["changes"] == {"progress": {"done": 1, "total": 2, "message": "half"}}
    json.dumps(events)  # plain JSON data


async def test_a_raising_observer_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    def bad(event: dict[str, Any]) -> None:
        raise RuntimeError("observer bug")

    seen: list[str] = []
    async with lf.Session(Echo()) as session:
        session.subscribe(bad)
        session.subscribe(lambda e: seen.append(e["type"]))
        assert await Ask("x").invoke(session) == "Say x"
        assert session.observer_errors == 4
    assert len(seen) == 5  # the four of the action, then the root's end on dispose
    assert "observer" in caplog.text


async def test_a_slow_async_observer_never_stalls_the_run() -> None:
    never = asyncio.Event()
    received: list[dict[str, Any]] = []

    async def slow(event: dict[str, Any]) -> None:
        received.append(event)
        await never.wait()

    session = lf.Session(Echo(), observer_queue_size=2)
    session.subscribe(slow)
    for i in range(5):
        assert await Ask(str(i)).invoke(session) == f"Say {i}"
    assert len(received) == 1  # stuck on the first event the whole time
    assert session.dropped_events > 0
    await session.dispose()  # cancels the drainer; no pending-task warnings


async def test_a_raising_async_observer_is_counted() -> None:
    async def bad(event: dict[str, Any]) -> None:
        raise ValueError("nope")

    session = lf.Session(Echo())
    session.subscribe(bad)
    await Ask("x").invoke(session)
    await settle()
    assert session.observer_errors == 4
    await session.dispose()


# -- bounded store -------------------------------------------------------------------------
async def test_eviction_keeps_counters_and_totals_exact() -> None:
    async with lf.Session(Echo(), max_trace_nodes=5) as session:
        for i in range(20):
            await Ask(str(i)).invoke(session)
        summary = session.usage_summary
        held = list(session.root.walk())
    assert len(held) <= 5
    assert summary.requests == 20
    assert summary.usage == lf.Usage(40, 40, 80)
    assert summary.counts["action"] == {"ok": 20} and summary.counts["query"] == {"ok": 20}
    assert summary.evicted_nodes == 40 - (len(held) - 1)
    assert session.root.evicted_children + len(session.root.children) == 20


async def test_running_nodes_are_never_evicted(clock: FakeClock) -> None:
    gate = asyncio.Event()
    async with lf.Session(Echo(), max_trace_nodes=2, clock=clock) as session:
        waiting = Wait(gate)
        task = asyncio.ensure_future(waiting.invoke(session))
        await settle()
        for i in range(5):
            await Ask(str(i)).invoke(session)
        assert session.all_actions[0].status == "running"
        gate.set()
        assert await task == "done"


# -- usage and cost ------------------------------------------------------------------------
async def test_usage_summary_with_prices() -> None:
    prices = {"fake:echo": lf.Price(prompt=1.0, completion=2.0)}
    async with lf.Session(Echo(), prices=prices) as session:
        await session.query("one two three")
        await session.query("x", lm=StaticResponse("y"))
        summary = session.usage_summary
    echo = summary.by_model["fake:echo"]
    assert echo.requests == 1 and echo.cost == pytest.approx((3 * 1.0 + 3 * 2.0) / 1e6)
    assert summary.cost == echo.cost
    assert summary.unpriced_models == ("fake:staticresponse",)
    assert summary.usage.total_tokens == 6 + 2


def test_price_counts_cached_tokens_at_their_own_rate() -> None:
    price = lf.Price(prompt=10.0, completion=20.0, cached_prompt=1.0)
    usage = lf.Usage(prompt_tokens=1000, completion_tokens=10, cached_tokens=400)
    assert price.cost(usage) == pytest.approx((600 * 10 + 400 * 1 + 10 * 20) / 1e6)


# -- JSON ------------------------------------------------------------------------------------
async def test_trace_json_round_trip_without_secrets() -> None:
    class Secretive(lf.Action[str]):
        def __init__(self) -> None:
            self.api_key = "sk-SECRET"
            self.model = Echo()

        async def call(self, session: lf.Session) -> str:
            session.log("info", "token", auth_token="sk-SECRET2")
            return await session.query("hi")

    async with lf.Session(Echo(), metadata={"api_key": "sk-SECRET3", "run": 7}) as session:
        await Secretive().invoke(session)
        await session.concurrent_map([1, 2], lambda i, b: Ask(str(i)).invoke(b))
        text = session.trace_json_str()
        original = session.trace_json()
        summary = session.usage_summary
    assert "SECRET" not in text
    data = json.loads(text)
    assert data["format"] == "langfx_nb.trace" and data["version"] == 1
    loaded = lf.Session.load_trace(text)
    assert loaded.trace_json()["nodes"] == original["nodes"]
    assert loaded.usage_summary == summary
    assert loaded.metadata == {"api_key": "<redacted>", "run": 7}
    assert [n.id for n in loaded.root.walk()] == [n.id for n in session.root.walk()]
    assert loaded.all_actions[0].inputs == {
        "api_key": "<redacted>",
        "model": {"model": "fake:echo"},
    }
    with pytest.raises(RuntimeError, match="read-only"):
        await loaded.query("x")


def test_load_trace_rejects_other_formats_and_versions() -> None:
    with pytest.raises(ValueError, match="not a langfx_nb trace"):
        lf.Session.load_trace({"format": "x"})
    with pytest.raises(ValueError, match="version"):
        lf.Session.load_trace({"format": "langfx_nb.trace", "version": 99, "nodes": []})


async def test_dispose_ends_root_and_refuses_new_work() -> None:
    events: list[dict[str, Any]] = []
    session = lf.Session(Echo())
    session.subscribe(events.append)
    await session.dispose()
    await session.dispose()
    assert session.root.status == "ok"
    assert events[-1]["type"] == "node_end" and events[-1]["node"]["kind"] == "session"
    with pytest.raises(RuntimeError, match="disposed"):
        await session.query("x")


async def test_unsubscribing_an_async_observer_stops_its_events() -> None:
    received: list[str] = []

    async def observer(event: dict[str, Any]) -> None:
        received.append(event["type"])

    session = lf.Session(Echo())
    unsubscribe = session.subscribe(observer)
    await Ask("x").invoke(session)
    await settle()
    assert received == ["node_start", "node_start", "node_end", "node_end"]
    unsubscribe()
    await Ask("y").invoke(session)
    await settle()
    assert len(received) == 4
    await session.dispose()


async def test_rename_names_the_running_node_for_observers_and_refuses_after_it_ended() -> None:
    events: list[dict[str, Any]] = []
    async with lf.Session() as session:
        session.subscribe(events.append)
        with session.track("item", "item 3", inputs=3) as item:
            item.session.rename("egypt#0", inputs={"country": "Egypt"})
        assert item.node.name == "egypt#0" and item.node.inputs == {"country": "Egypt"}
        with pytest.raises(RuntimeError):
            item.session.rename("too late")
    await settle()
    update = next(e for e in events if e["type"] == "node_update")
    assert update["changes"] == {"name": "egypt#0", "inputs": {"country": "Egypt"}}
    end = next(e for e in events if e["type"] == "node_end" and e["node"]["kind"] == "item")
    assert end["node"]["name"] == "egypt#0"
