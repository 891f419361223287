"""A large trace file opened without its index sidecar while a loop runs (a kernel): its first
part is shown at once, labelled as such, while a real child process indexes the whole file;
then the whole index replaces it with exact counts and the reader's choices kept. A file
malformed past its first part ends in the error state; closing the explorer (or showing
something else) kills the child; without a running loop the file is indexed whole at once."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from langfx_nb.notebook import trace_open
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_file import SIDECAR_SUFFIX, index_file, load_index
from tests.trace_gen import BigTrace, write_big_trace

from ._fakes import saved_trace

NODES = 40_000  # about 6.7 MB: indexed in place (4 MB or more)


@pytest.fixture(autouse=True)
def small_first_part(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A first part of ~0.5 MB (a file of 1 MB or more is opened progressively), and a
    per-user cache of this test's own."""
    monkeypatch.setattr(trace_open, "PREFIX_BYTES", 256 << 10)
    monkeypatch.setattr(trace_open, "PROGRESSIVE_BYTES", 1 << 20)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def big(tmp_path: Path, name: str = "big.json") -> tuple[Path, BigTrace]:
    path = tmp_path / name
    return path, write_big_trace(path, NODES, deep=40)


def record(explorer: TraceExplorer) -> tuple[list[dict[str, Any]], list[Any]]:
    """What the explorer sends its views, and the state each ``show`` message carries."""
    sent: list[dict[str, Any]] = []
    shown: list[Any] = []

    def send(content: dict[str, Any], buffers: Any = None) -> None:
        sent.append(content)
        if content.get("kind") == "show":
            shown.append(json.loads(buffers[0]))

    explorer.send = send  # type: ignore[method-assign]
    return sent, shown


def window(explorer: TraceExplorer, sent: list[dict[str, Any]], **ask: Any) -> dict[str, Any]:
    request = {"kind": "window_request", "req": 1, "start": 0, "count": 50, "expanded": [], **ask}
    explorer._on_view_message(explorer, request, [])
    reply = sent.pop()
    assert reply["kind"] == "window"
    return reply


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def started(explorer: TraceExplorer) -> int:
    """The child's pid, once the loop has started it."""
    reading = explorer.reading
    assert reading is not None
    for _ in range(1000):
        if reading.pid is not None:
            return reading.pid
        await asyncio.sleep(0.01)
    raise AssertionError("the child never started")


async def test_the_first_part_is_shown_labelled_then_the_whole_with_the_view_kept(
    tmp_path: Path,
) -> None:
    path, info = big(tmp_path)
    explorer = TraceExplorer(path, title="big")
    sent, buffers = record(explorer)
    reading = explorer.reading
    assert reading is not None
    first = reading.status.nodes
    assert 0 < first < info.nodes
    state = explorer.snapshot
    assert state["reading"] == {"read": 0, "size": path.stat().st_size, "nodes": first}
    assert state["windowed"]["nodes"] == first
    assert sum(state["windowed"]["counts"]["status"].values()) == first
    text = explorer._fallback_text()
    assert f"{first} nodes read so far" in text and "Reading the trace file" in text
    assert "read so far" in explorer._fallback_html()
    # the reader works meanwhile: windows are answered from the first part
    assert window(explorer, sent, expanded=[["d0", True]])["nodes"] == first
    view = {"selected": "d5", "expanded": [["d0", True]], "query": "boom"}
    explorer.view_state = view
    pid = await started(explorer)

    await reading.wait()
    assert reading.status.error is None and explorer.reading is None
    assert gone(pid)
    progress = [m["reading"] for m in sent if m["kind"] == "reading"]
    assert progress and progress[-1]["read"] == path.stat().st_size
    assert all(p["nodes"] == first for p in progress)
    (show,) = [m for m in sent if m["kind"] == "show"]
    assert show["keep_view"] is True and show["title"] == "big"
    (swapped,) = buffers
    assert "reading" not in swapped and swapped["windowed"]["nodes"] == info.nodes
    # exact counts of the whole file; the reader's choices kept
    counts = explorer.snapshot["windowed"]["counts"]["status"]
    assert counts == {"ok": info.nodes - info.failed, "failed": info.failed}
    assert explorer.view_state == view and explorer.title == "big"
    reply = window(explorer, sent, query="boom")
    assert (reply["nodes"], reply["matches"]) == (info.nodes, info.failed)
    assert explorer._fallback_text().endswith(
        f"{info.nodes} nodes (failed {info.failed}, ok {counts['ok']})"
    )
    explorer.close()
    # the child wrote the sidecar: the next open reads it, no child
    assert (tmp_path / f"big.json{SIDECAR_SUFFIX}").exists()
    again = TraceExplorer(path)
    assert again.reading is None and again.snapshot["windowed"]["nodes"] == info.nodes
    again.close()


async def test_a_file_malformed_past_its_first_part_ends_in_the_error_state(
    tmp_path: Path,
) -> None:
    path, info = big(tmp_path, "bad <b>x.json")
    raw = path.read_bytes()
    at = raw.rindex(b'"kind":"log"')
    path.write_bytes(raw[:at] + b'"kind":"lag"' + raw[at + len(b'"kind":"log"') :])
    explorer = TraceExplorer(path)
    sent, _buffers = record(explorer)
    reading = explorer.reading
    assert reading is not None
    first = reading.status.nodes
    await reading.wait()
    # the first part stays, and everything says the rest was not read, and why
    assert explorer.reading is reading
    error = reading.status.error
    assert error is not None and "unknown kind" in error and "'lag'" in error
    where = re.search(r"nodes\[(\d+)\]", error)
    assert where is not None and first < int(where.group(1)) < info.nodes  # past the first part
    assert not [m for m in sent if m["kind"] == "show"]
    assert sent[-1] == {"kind": "reading", "reading": reading.status.to_json()}
    state = explorer.snapshot  # what a reloaded page shows
    assert state["reading"]["error"] == error and state["windowed"]["nodes"] == first
    assert f"{first} nodes read so far" in explorer._fallback_text()
    assert "stopped" in explorer._fallback_text()
    page = explorer._fallback_html()
    assert "&lt;b&gt;x.json" in page and "<b>x" not in page  # text, never markup
    assert not (tmp_path / f"{path.name}{SIDECAR_SUFFIX}").exists()
    explorer.close()


async def test_a_malformed_first_part_raises_from_the_constructor(tmp_path: Path) -> None:
    path, _info = big(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"kind":"query"', b'"kind":"qvery"', 1))
    with pytest.raises(ValueError, match=r"big\.json: malformed trace: nodes\[\d+\]: unknown"):
        TraceExplorer(path)


async def test_closing_the_explorer_kills_the_child(tmp_path: Path) -> None:
    path, _info = big(tmp_path)
    explorer = TraceExplorer(path)
    sent, _buffers = record(explorer)
    reading = explorer.reading
    assert reading is not None
    pid = await started(explorer)
    explorer.close()
    await reading.wait()
    assert gone(pid) and not reading.running
    assert not [m for m in sent if m["kind"] == "show"]  # nothing swapped in after closing
    assert not (tmp_path / f"big.json{SIDECAR_SUFFIX}").exists()


async def test_showing_something_else_kills_the_child(tmp_path: Path) -> None:
    path, _info = big(tmp_path)
    explorer = TraceExplorer(path)
    sent, _buffers = record(explorer)
    reading = explorer.reading
    assert reading is not None
    pid = await started(explorer)
    explorer.show(saved_trace([{"id": "a", "kind": "session", "name": "other"}]))
    assert explorer.reading is None
    await reading.wait()
    assert gone(pid)
    assert [n["id"] for n in explorer.nodes] == ["a"]
    assert [m["kind"] for m in sent] == ["show"]  # the read's end never reached the views
    assert "reading" not in explorer.snapshot
    explorer.close()


async def test_show_of_a_large_file_reads_it_progressively_too(tmp_path: Path) -> None:
    path, info = big(tmp_path)
    explorer = TraceExplorer(saved_trace([{"id": "a", "kind": "session", "name": "small"}]))
    sent, _buffers = record(explorer)
    explorer.show(path, view_state={"selected": "d1"})
    reading = explorer.reading
    assert reading is not None and explorer.snapshot["reading"]["nodes"] < info.nodes
    assert [m for m in sent if m["kind"] == "show"][-1]["view_state"] == {"selected": "d1"}
    await reading.wait()
    assert explorer.reading is None and explorer.snapshot["windowed"]["nodes"] == info.nodes
    assert explorer.view_state == {"selected": "d1"}
    explorer.close()


def test_without_a_running_loop_the_file_is_indexed_whole(tmp_path: Path) -> None:
    path, info = big(tmp_path)
    explorer = TraceExplorer(path)
    assert explorer.reading is None
    state = explorer.snapshot
    assert "reading" not in state and state["windowed"]["nodes"] == info.nodes
    assert (tmp_path / f"big.json{SIDECAR_SUFFIX}").exists()
    explorer.close()


async def test_a_sidecar_that_cannot_go_beside_the_trace_goes_to_the_cache(
    tmp_path: Path,
) -> None:
    path, info = big(tmp_path)
    (tmp_path / f"big.json{SIDECAR_SUFFIX}").mkdir()  # its name is taken: nothing goes there
    explorer = TraceExplorer(path)
    reading = explorer.reading
    assert reading is not None
    await reading.wait()
    assert reading.status.error is None and explorer.reading is None
    assert explorer.snapshot["windowed"]["nodes"] == info.nodes
    explorer.close()
    cached = list((tmp_path / "cache" / "langfx_nb" / "trace_index").iterdir())
    assert [p.suffix for p in cached] == [SIDECAR_SUFFIX]
    index = load_index(path)  # read back from the cache
    assert index is not None and len(index) == info.nodes
    index.close()
    assert index_file(path) == cached[0]


def test_the_child_exits_when_its_parent_is_gone(tmp_path: Path) -> None:
    """Its stdin, a pipe from the parent, closes when the parent dies however it dies."""
    path, _info = big(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-m", "langfx_nb.notebook.trace_open", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    out, _err = child.communicate(timeout=120)  # closes its stdin at once
    assert child.returncode == 3 and b'"done"' not in out
    assert not (tmp_path / f"big.json{SIDECAR_SUFFIX}").exists()


def test_the_child_reports_progress_then_where_the_sidecar_is(tmp_path: Path) -> None:
    path, _info = big(tmp_path)
    with subprocess.Popen(  # stdin left open while it runs: the parent is there
        [sys.executable, "-m", "langfx_nb.notebook.trace_open", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        lines = [json.loads(line) for line in proc.stdout]
    assert proc.returncode == 0
    assert lines[-2] == {"read": path.stat().st_size}
    assert lines[-1] == {"done": str(tmp_path / f"big.json{SIDECAR_SUFFIX}")}
    assert all(set(m) == {"read"} for m in lines[:-1])
