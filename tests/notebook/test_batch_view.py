"""BatchView: coalesced progress messages, the final static copy, error groups opening their
items' traces, untrusted error text, and the default-reporter hook (kernel only)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.batch.progress import (
    BatchProgress,
    ErrorGroup,
    default_reporter,
    resolve_reporter,
)
from langfx_nb.messages import Usage
from langfx_nb.notebook.batch_view import BatchReducer, BatchView, batch_status
from langfx_nb.notebook.render import batch_html, batch_text

from ._fakes import FakeClock, record_sends

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '<img src=x onerror="window.__pwned=1">bad & worse'


def snapshot(done: int, failed: int = 0, total: int = 10_000, **kw: Any) -> BatchProgress:
    running = kw.pop("running", 0)
    groups = kw.pop("errors", ())
    return BatchProgress(
        total=total,
        done=done,
        failed=failed,
        running=running,
        left=max(0, total - done - failed - running),
        errors=groups,
        usage=kw.pop("usage", Usage(prompt_tokens=3 * done, completion_tokens=done)),
        **kw,
    )


def events(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in sent if m["kind"] == "events"]


def test_ten_thousand_completions_send_a_bounded_number_of_messages() -> None:
    clock = FakeClock()
    view = BatchView(clock=clock)  # interval 0.25 s
    sent = record_sends(view)
    for i in range(1, 10_001):  # one update per completed item, 1 ms apart: 10 s of work
        view.update(snapshot(i))
        clock.advance(0.001)
    view.close(snapshot(10_000, finished=True))
    batches = events(sent)
    # at most one message per 0.25 s window (+ the first and the final flush), never one per item
    assert 2 <= len(batches) <= 10 / 0.25 + 2
    # each message carries one current snapshot, not a backlog of stale ones
    assert all(len(m["events"]) == 1 for m in batches)
    assert batches[-1]["events"][0]["progress"]["done"] == 10_000
    assert view.state["done"] == 10_000 and view.state["finished"] is True
    assert view.status == "done"


def test_updates_in_one_loop_turn_share_one_message() -> None:
    clock = FakeClock()
    view = BatchView(clock=clock)
    sent = record_sends(view)
    for i in range(500):
        view.update(snapshot(i))
    clock.advance(0.0)
    assert len(events(sent)) == 1
    assert events(sent)[0]["events"][0]["progress"]["done"] == 499


def test_unknown_cost_and_usage_are_shown_as_unknown_never_zero() -> None:
    state = {
        **snapshot(5, total=5, finished=True, usage=Usage()).to_json(),
        "status": "done",
    }
    page = batch_html(state)
    assert "cost unknown" in page and "tokens unknown" in page and "$0" not in page
    priced = batch_html(
        {**state, "cost": 0.0123, "unpriced_models": ["fake:b"], "unpriced_requests": 3}
    )
    assert "≥ $0.01 (3 calls unpriced: fake:b)" in priced  # a partial sum, labelled so
    unknown = batch_html({**state, "requests": 2, "unpriced_requests": 2})
    assert "cost unknown (2 calls unpriced)" in unknown and "$0" not in unknown


def test_static_copy_and_text_show_the_final_counts_and_escape_error_text() -> None:
    group = ErrorGroup("ValueError", 2, HOSTILE, (3, 7), ("n3", "n7"))
    final = snapshot(8, failed=2, total=10, finished=True, errors=(group,), elapsed_s=1.234)
    view = BatchView(progress=snapshot(0, total=10), title="labels")
    view.close(final)
    text = view._fallback_text()
    assert text == "BatchView 'labels' [some failed]: 10 items · 8 done · 2 failed (ValueError 2)"
    page = view._static_bundle()["text/html"]
    assert "<img" not in page and "&lt;img src=x" in page and "&amp; worse" in page
    assert '<span data-count="done"><b>8</b> done</span>' in page
    assert '<span data-count="failed"><b>2</b> failed</span>' in page
    assert "(items 3, 7)" in page
    assert '<span class="lfx-dur">1.2 s</span>' in page  # timings sit where nbval can mask them


def test_text_repr_has_no_timings_or_rates() -> None:
    a = batch_text({**snapshot(4, total=9, running=2, elapsed_s=1.0, items_per_s=3.0).to_json()})
    b = batch_text({**snapshot(4, total=9, running=2, elapsed_s=9.0, items_per_s=0.5).to_json()})
    assert a == b == "BatchView 'batch' [running]: 9 items · 4 done · 2 running · 3 left"


def test_status_says_stopped_when_a_batch_ends_with_items_not_run() -> None:
    assert batch_status(snapshot(3, total=10).to_json()) == "running"
    assert batch_status(snapshot(3, total=10, finished=True).to_json()) == "stopped"
    assert batch_status(snapshot(10, total=10, finished=True).to_json()) == "done"


def test_status_says_when_items_failed_never_done() -> None:
    every = snapshot(0, failed=50, total=50, finished=True).to_json()
    assert batch_status(every) == "failed"
    assert 'class="lfx-st-failed" data-status="failed"' in batch_html({**every, "status": "failed"})
    some = snapshot(47, failed=3, total=50, finished=True).to_json()
    assert batch_status(some) == "some failed"


async def test_an_error_group_opens_the_traces_of_its_items() -> None:
    session = lf.Session(lf.llms.StaticResponse("ok"))
    ids: list[str] = []
    with session.track("batch", "labels") as batch:
        for i in range(3):
            try:
                with batch.session.track("item", f"item {i}", inputs={"i": i}) as item:
                    ids.append(item.node.id)
                    await item.session.query("label {{i}}", vars={"i": i})
                    if i != 1:
                        raise ValueError(HOSTILE)
            except ValueError:
                pass
    group = ErrorGroup("ValueError", 2, HOSTILE, (0, 2), (ids[0], ids[2]))
    view = BatchView(session=session)
    sent = record_sends(view)
    view.close(snapshot(1, failed=2, total=3, finished=True, errors=(group,)))
    # what the group's button sends
    view._on_view_message(view, {"kind": "open_group", "type": "ValueError"}, [])
    explorer = view.explorer
    assert explorer is not None
    nodes = explorer.nodes
    item_nodes = [n for n in nodes if n["kind"] == "item"]
    assert [n["id"] for n in item_nodes] == [ids[0], ids[2]]
    assert all(n["status"] == "failed" for n in item_nodes)
    assert {n["kind"] for n in nodes} >= {"item", "query"}  # what ran under each item
    assert explorer.title == "batch · ValueError items"
    assert view.state["opened"] == "ValueError"
    assert events(sent)[-1]["events"][-1] == {"op": "open", "type": "ValueError", "open_error": ""}
    view._on_view_message(view, {"kind": "open_group", "type": None}, [])
    assert view.explorer is None and view.state["opened"] is None


def test_a_group_whose_traces_are_gone_says_so() -> None:
    session = lf.Session()
    group = ErrorGroup("KeyError", 1, "'x'", (4,), ("evicted-node",))
    view = BatchView(session=session, progress=snapshot(0, failed=1, total=1, errors=(group,)))
    assert view.open_group("KeyError") is None
    assert view.state["open_error"] == "the traces of the KeyError items are no longer held"


def test_reducer_snapshot_is_the_last_progress_plus_the_open_group() -> None:
    r = BatchReducer("t")
    r.apply({"type": "progress", "progress": snapshot(1, total=2)})
    r.apply({"type": "progress", "progress": snapshot(2, total=2, finished=True)})
    snap = r.snapshot()
    assert snap["done"] == 2 and snap["status"] == "done" and snap["title"] == "t"
    assert snap["opened"] is None


def test_loading_the_notebook_layer_registers_the_default_reporter() -> None:
    import langfx_nb.notebook as nb

    assert default_reporter() is nb.batch_reporter


class _FakeKernelShell:
    kernel = object()


def test_in_a_kernel_the_default_reporter_is_a_displayed_batch_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import IPython

    import langfx_nb.notebook as nb

    shown: list[Any] = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: _FakeKernelShell())
    monkeypatch.setattr(BatchView, "_ipython_display_", lambda self: shown.append(self))
    session = lf.Session()
    reporter = resolve_reporter(None, session, snapshot(0, total=3))
    assert isinstance(reporter, BatchView) and shown == [reporter]
    assert reporter.session is session and reporter.state["total"] == 3
    assert nb.in_kernel()


def test_in_a_terminal_nothing_of_the_view_runs() -> None:
    # A fresh process: terminal IPython (no kernel) with the extension loaded. The default
    # reporter declines, so the core's text bar is chosen, and the view is never imported.
    code = """
import sys
from IPython.terminal.interactiveshell import TerminalInteractiveShell
import langfx_nb as lf
from langfx_nb.batch.progress import BatchProgress, resolve_reporter
ip = TerminalInteractiveShell.instance()
ip.run_line_magic("load_ext", "langfx_nb")
import langfx_nb.notebook as nb
reporter = nb.batch_reporter(lf.Session(), BatchProgress(total=3))
chosen = resolve_reporter(None, lf.Session(), BatchProgress(total=3))
print(reporter, type(chosen).__name__, "langfx_nb.notebook.batch_view" in sys.modules,
      "anywidget" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert out.returncode == 0, out.stderr
    # stderr is a pipe here, so the core picks no text bar either (None)
    assert out.stdout.split() == ["None", "NoneType", "False", "False"]


def test_the_view_snapshot_round_trips_as_json() -> None:
    view = BatchView(progress=snapshot(3, total=4))
    json.dumps(view.state)


PARITY = ROOT / "js" / "test" / "fixtures" / "batch_parity.json"


def parity_case() -> dict[str, Any]:
    """A batch's patches (as the page receives them) and the kernel's final snapshot."""
    r = BatchReducer("labels")
    first = ErrorGroup("ValueError", 1, HOSTILE, (2,), ("n2",))
    groups = (ErrorGroup("ValueError", 2, HOSTILE, (2, 5), ("n2", "n5")),)
    evs: list[dict[str, Any]] = [
        {"type": "progress", "progress": snapshot(0, total=6, running=3, session_id="s")},
        {"type": "progress", "progress": snapshot(2, 1, total=6, running=3, errors=(first,))},
        {"type": "open", "error": "ValueError", "open_error": ""},
        {
            "type": "progress",
            "progress": snapshot(
                4, 2, total=6, finished=True, errors=groups, cost=None, eta_s=None, requests=6
            ),
        },
    ]
    patches = [p for e in evs for p in r.apply(e)]
    return {"title": "labels", "patches": patches, "snapshot": r.snapshot()}


def test_the_page_reducer_fixture_matches_the_kernel() -> None:
    # js/test/batch.test.ts replays these patches through the page's applyBatchPatch and
    # compares with the kernel's snapshot (LANGFX_REGEN=1 rewrites the fixture).
    case = json.loads(json.dumps(parity_case()))
    if os.environ.get("LANGFX_REGEN") == "1":
        PARITY.write_text(json.dumps(case, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert json.loads(PARITY.read_text(encoding="utf-8")) == case


async def test_a_real_batch_of_ten_thousand_items_sends_a_few_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # lf.batch with no progress= argument, "in a kernel": the default reporter is a BatchView
    import IPython

    views: list[BatchView] = []
    sent: list[dict[str, Any]] = []

    def shown(self: BatchView) -> None:
        views.append(self)
        self.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]

    monkeypatch.setattr(IPython, "get_ipython", lambda: _FakeKernelShell())
    monkeypatch.setattr(BatchView, "_ipython_display_", shown)
    session = lf.Session(lf.llms.StaticResponse("ok"))

    async def fn(i: int, s: lf.Session) -> str:
        if i % 1000 == 7:
            raise ValueError(f"bad item {i} <b>")
        return str(await s.query("x {{i}}", vars={"i": i}))

    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await lf.batch(fn, range(10_000), session=session)
    elapsed = loop.time() - started
    assert len(views) == 1
    view = views[0]
    messages = events(sent)
    # ≤ one message per 0.25 s of the run plus the first and the final one: never per item
    assert 1 <= len(messages) <= elapsed / 0.25 + 2
    assert sum(len(m["events"]) for m in messages) == len(messages)  # one snapshot each
    final = messages[-1]["events"][-1]["progress"]
    assert (final["done"], final["failed"], final["finished"]) == (9_990, 10, True)
    assert view.status == "some failed" and result.totals.failed == 10
    assert view._fallback_text() == (
        "BatchView 'fn' [some failed]: 10,000 items · 9,990 done · 10 failed (ValueError 10)"
    )
    explorer = view.open_group("ValueError")
    assert explorer is not None
    failed_items = [n for n in explorer.nodes if n["kind"] == "item"]
    assert failed_items and all(n["status"] == "failed" for n in failed_items)
    assert all("ValueError" in str(n.get("error")) for n in failed_items)


async def test_a_saved_notebook_keeps_the_final_counts_in_the_static_copy() -> None:
    # A real kernel (nbclient, as nbconvert --execute): lf.batch shows the view by itself, and
    # the saved outputs hold the static copy as updated at the end of the run.
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "import langfx_nb as lf\n%load_ext langfx_nb",
        "async def fn(i):\n"
        "    if i % 4 == 1:\n"
        "        raise KeyError(f'<i>{i}</i>')\n"
        "    return i\n"
        "result = await lf.batch(fn, range(12), name='numbers')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    await NotebookClient(nb, timeout=120, kernel_name="python3").async_execute()
    outputs = nb.cells[1]["outputs"]
    live = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    static = [o for o in outputs if "lfx-static" in o.get("data", {}).get("text/html", "")]
    assert len(live) == 1 and len(static) == 1, outputs
    page = static[0]["data"]["text/html"]
    assert 'data-status="some failed"' in page
    assert '<span data-count="done"><b>9</b> done</span>' in page
    assert '<span data-count="failed"><b>3</b> failed</span>' in page
    assert "KeyError</b> × 3" in page and "&lt;i&gt;1&lt;/i&gt;" in page and "<i>1" not in page
