"""A batch's run manifest opened in a kernel without its index sidecar: its first trace
records at once, labelled as the first part, while a real child process indexes the whole
trace and writes the sidecar; then the whole index replaces the first part, with exact
counts; the next open reads the sidecar. Without a running loop it is indexed whole."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.notebook import trace_open
from langfx_nb.notebook.trace_explorer import TraceExplorer
from langfx_nb.notebook.trace_store import load_store_index, open_store_index

ITEMS = 400  # 2 + 2 per item trace records


async def work(item: int, view: Any) -> int:
    with view.track("action", "step", inputs={"item": item}):
        pass
    if item % 50 == 7:
        raise ValueError(f"boom {item}")
    return item


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run manifest of ``ITEMS`` items, and first parts of 100 records (a manifest of more
    than 300 is opened progressively)."""
    path = tmp_path / "run.sqlite"
    asyncio.run(lf.batch(work, range(ITEMS), run=path, progress=False))
    monkeypatch.setattr(trace_open, "PREFIX_RECORDS", 100)
    monkeypatch.setattr(trace_open, "PROGRESSIVE_RECORDS", 300)
    return path


def status_counts(explorer: TraceExplorer) -> dict[str, int]:
    counts: dict[str, int] = explorer.snapshot["windowed"]["counts"]["status"]
    return counts


async def test_the_first_records_then_the_whole_trace_from_a_child(manifest: Path) -> None:
    whole = open_store_index(manifest, sidecar=False)
    explorer = TraceExplorer(manifest, title="run")
    reading = explorer.reading
    assert reading is not None and reading.store
    assert reading.status.nodes == 100 == explorer.snapshot["windowed"]["nodes"]
    assert "reading" in explorer.snapshot
    assert "read so far" in explorer._fallback_text()

    await reading.wait()
    assert reading.status.error is None and explorer.reading is None
    assert explorer.snapshot["windowed"]["nodes"] == len(whole) == 2 + 2 * ITEMS
    assert "reading" not in explorer.snapshot
    assert status_counts(explorer) == whole.counts()["status"]
    # the child wrote the sidecar: the next open reads it, with nothing in the background
    assert load_store_index(manifest) is not None
    again = TraceExplorer(manifest)
    assert again.reading is None and status_counts(again) == whole.counts()["status"]
    for widget in (explorer, again):
        widget.close()
    whole.close()


async def test_show_opens_a_manifest_progressively_too(manifest: Path) -> None:
    explorer = TraceExplorer()
    explorer.show(manifest, title="run")
    reading = explorer.reading
    assert reading is not None and reading.status.nodes == 100
    await reading.wait()
    assert explorer.snapshot["windowed"]["nodes"] == 2 + 2 * ITEMS
    explorer.close()


def test_without_a_running_loop_the_manifest_is_indexed_whole(manifest: Path) -> None:
    explorer = TraceExplorer(manifest)
    assert explorer.reading is None
    assert explorer.snapshot["windowed"]["nodes"] == 2 + 2 * ITEMS
    explorer.close()
