"""lf.batch in one process: order, per-item status, tracing through the item session,
totals, progress reporting, cancellation, on_error and bad arguments."""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.batch.progress import (
    BatchProgress,
    default_reporter,
    resolve_reporter,
    set_default_reporter,
)
from langfx_nb.llms import Echo, StaticResponse


class Label(pydantic.BaseModel):
    item: int
    label: str


class Recorder:
    def __init__(self) -> None:
        self.updates: list[BatchProgress] = []
        self.closed: list[BatchProgress] = []

    def update(self, progress: BatchProgress) -> None:
        self.updates.append(progress)

    def close(self, progress: BatchProgress) -> None:
        self.closed.append(progress)


async def test_results_keep_input_order_and_errors_are_collected() -> None:
    async def fn(x: int) -> int:
        await asyncio.sleep(0.001 * (x % 3))
        if x % 5 == 0:
            raise ValueError(f"bad {x}")
        return x * 10

    result = await lf.batch(fn, range(12), max_concurrency=4, progress=False)
    assert isinstance(result, lf.BatchResult)
    assert result.results == [None if x % 5 == 0 else x * 10 for x in range(12)]
    assert result.statuses == ["failed" if x % 5 == 0 else "ok" for x in range(12)]
    assert result.errors[5] is not None and result.errors[5].type == "ValueError"
    assert result.errors[5].message == "bad 5"
    assert result.failed == [0, 5, 10] and not result.ok
    assert result.totals.ok == 9 and result.totals.failed == 3
    records = result.to_records()
    assert records[5]["error_type"] == "ValueError" and records[1]["result"] == 10


async def test_each_item_is_a_traced_child_of_one_batch_node_and_counted() -> None:
    session = lf.Session(Echo(), prices={"fake:echo": lf.Price(1.0, 2.0)})

    async def fn(row: dict[str, Any], s: lf.Session) -> str:
        return await s.query("say {{word}}", vars=row)

    rows = [{"word": f"w{i}"} for i in range(5)]
    result = await lf.batch(fn, rows, session=session, progress=False)
    assert result.results == [f"say w{i}" for i in range(5)]
    batch_node = session.find(result.batch_node_id or "")
    assert batch_node is not None and batch_node.kind == "batch" and batch_node.status == "ok"
    items = batch_node.children
    assert [n.kind for n in items] == ["item"] * 5
    assert {n.id for n in items} == set(result.node_ids)
    for node in items:
        assert [c.kind for c in node.children] == ["query"]
    assert result.totals.requests == 5
    assert result.totals.usage.prompt_tokens == session.usage_summary.usage.prompt_tokens
    assert result.totals.cost is not None and result.totals.cost > 0


async def test_unpriced_cost_is_none_not_zero() -> None:
    async def fn(x: int, s: lf.Session) -> str:
        return await s.query(f"x {x}", lm=Echo())

    result = await lf.batch(fn, range(3), progress=False)
    assert result.totals.requests == 3
    assert result.totals.cost is None and result.totals.unpriced_models == ("fake:echo",)


async def test_a_bounded_window_of_item_traces_with_exact_counts() -> None:
    session = lf.Session(StaticResponse("ok"), max_trace_nodes=50)

    async def fn(x: int, s: lf.Session) -> str:
        return await s.query("q")

    result = await lf.batch(fn, range(400), session=session, progress=False)
    assert result.totals.requests == 400 and result.ok
    summary = session.usage_summary
    assert summary.counts["item"]["ok"] == 400 and summary.requests == 400
    assert sum(1 for _ in session.root.walk()) <= 50
    assert session.find(result.node_ids[0] or "") is None  # evicted; the result is kept
    assert result.results[0] == "ok"


async def test_progress_reporter_gets_updates_and_one_final_close() -> None:
    recorder = Recorder()

    async def fn(x: int) -> int:
        await asyncio.sleep(0.02)
        if x == 3:
            raise KeyError("missing")
        return x

    await lf.batch(fn, range(40), max_concurrency=4, progress=recorder)
    assert len(recorder.closed) == 1
    final = recorder.closed[0]
    assert final.finished and final.total == 40 and final.done == 39 and final.failed == 1
    assert final.running == 0 and final.left == 0
    assert [(g.type, g.count, g.items) for g in final.errors] == [("KeyError", 1, (3,))]
    assert final.errors[0].node_ids[0] is not None
    # never one update per item: the ticker sends about four a second (the run is ~0.2 s)
    assert 1 <= len(recorder.updates) < 40
    assert all(not p.finished for p in recorder.updates)
    assert recorder.updates[0].done == 0 and recorder.updates[0].left == 40
    assert final.to_json()["errors"][0]["type"] == "KeyError"


async def test_a_plain_callable_gets_every_snapshot() -> None:
    seen: list[BatchProgress] = []
    await lf.batch(lambda x: asyncio.sleep(0, x), [1, 2], progress=seen.append)
    assert seen[-1].finished and seen[-1].done == 2


async def test_default_reporter_factory_is_used_when_progress_is_none() -> None:
    recorder = Recorder()
    made: list[Any] = []

    def factory(session: lf.Session, first: BatchProgress) -> Recorder:
        made.append((session, first.total))
        return recorder

    previous = set_default_reporter(factory)
    try:
        assert default_reporter() is factory
        result = await lf.batch(lambda x: asyncio.sleep(0, x), [1, 2, 3])
    finally:
        set_default_reporter(previous)
    assert made and made[0][1] == 3 and made[0][0] is result.session
    assert recorder.closed[0].done == 3
    assert resolve_reporter(False, lf.Session(), BatchProgress(total=1)) is None
    with pytest.raises(TypeError, match="progress must be"):
        resolve_reporter(42, lf.Session(), BatchProgress(total=1))


async def test_a_broken_reporter_never_stops_the_batch() -> None:
    class Broken:
        def update(self, progress: BatchProgress) -> None:
            raise RuntimeError("view broke")

        def close(self, progress: BatchProgress) -> None:
            raise RuntimeError("view broke")

    result = await lf.batch(lambda x: asyncio.sleep(0, x), [1, 2], progress=Broken())
    assert result.results == [1, 2]


async def test_on_error_raise_stops_at_the_first_error() -> None:
    started: list[int] = []

    async def fn(x: int) -> int:
        started.append(x)
        if x == 2:
            raise ZeroDivisionError("two")
        await asyncio.sleep(0.05)
        return x

    with pytest.raises(ZeroDivisionError, match="two"):
        await lf.batch(fn, range(50), max_concurrency=3, on_error="raise", progress=False)
    assert len(started) < 50


async def test_cancelling_stops_the_batch_at_once_and_closes_in_flight_items() -> None:
    closed: list[int] = []
    recorder = Recorder()

    async def fn(x: int) -> int:
        try:
            await asyncio.sleep(30)
        finally:
            closed.append(x)
        return x

    task = asyncio.ensure_future(lf.batch(fn, range(100), max_concurrency=5, progress=recorder))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(closed) == [0, 1, 2, 3, 4]
    final = recorder.closed[0]
    assert final.finished and final.running == 0 and final.done == 0


async def test_fn_taking_a_session_is_detected_from_its_signature() -> None:
    from langfx_nb.batch.runner import takes_session

    async def one(item: int) -> int:
        return item

    async def two(item: int, session: lf.Session) -> int:
        return item

    async def star(*args: Any) -> int:
        return 0

    assert not takes_session(one) and takes_session(two) and takes_session(star)
    assert not takes_session(lambda row: row)


async def test_bad_arguments_are_refused_before_anything_runs() -> None:
    calls: list[int] = []

    async def fn(x: int) -> int:
        calls.append(x)
        return x

    with pytest.raises(ValueError, match="max_concurrency"):
        await lf.batch(fn, [1], max_concurrency=0)
    with pytest.raises(ValueError, match="on_error"):
        await lf.batch(fn, [1], on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="single string"):
        await lf.batch(fn, "abc")
    with pytest.raises(ValueError, match="engine"):
        await lf.batch(fn, [1], engine="ray")
    assert calls == []


async def test_to_pandas_or_a_clear_import_error() -> None:
    result = await lf.batch(
        lambda x: asyncio.sleep(0, Label(item=x, label="a")), [1, 2], progress=False
    )
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            result.to_pandas()
        return
    frame = result.to_pandas()
    assert list(frame["status"]) == ["ok", "ok"]
    assert frame["result"][0] == {"item": 1, "label": "a"}


async def test_empty_items() -> None:
    result = await lf.batch(lambda x: asyncio.sleep(0, x), [], progress=False)
    assert len(result) == 0 and result.ok


def test_text_bar_and_automatic_choice_outside_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from langfx_nb.batch.progress import TextReporter

    out = io.StringIO()
    bar = TextReporter(out)
    bar.update(BatchProgress(total=10, done=4, failed=1, running=2, left=3, items_per_s=2.5))
    bar.close(BatchProgress(total=10, done=9, failed=1, finished=True, elapsed_s=4.0))
    text = out.getvalue()
    assert text.startswith("\rbatch: 5/10 · 1 failed · 2 running") and text.endswith("\n")
    assert "in 4.0s" in text
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal: no bar
    previous = set_default_reporter(None)  # as outside a notebook
    try:
        assert resolve_reporter(None, lf.Session(), BatchProgress(total=1)) is None
    finally:
        set_default_reporter(previous)


def test_trace_records_are_the_text_json_dumps_writes() -> None:
    import json

    from langfx_nb.batch.runner import _encode_record

    class Odd:
        def __str__(self) -> str:
            return "odd ✓"

    record = {
        "id": "7",
        "parent_id": None,
        "name": 'é ✓ \u2028 "q"\n\t',
        "start": 0.1813857520000397,
        "end": 1e-05,
        "inputs": {"x": [1, 2.5, None, True, {"n": float("nan")}]},
        "metadata": {"obj": Odd(), 3: "int key"},
    }
    plain = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    assert _encode_record(record) == plain
    assert _encode_record(record) == plain  # the encoder keeps no state between records
