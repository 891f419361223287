"""The stored trace a run manifest writes as its items finish: its rows go in chunks of
records (``ROWS_CHUNK``) during the batch and the rest at its end, and every table is the
one the whole records give when converted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic import trace_db
from langfx_nb.batch import manifest
from tests.stored_tables import stored_and_converted


async def steps(item: int, view: Any) -> int:
    with view.track("query", "q", inputs={"prompt": "p {x}", "vars": {"x": item}}) as t:
        t.outputs = {"text": "x" * 50}
    with view.track("tool_call", "lookup", inputs={"args": {"key": item}}):
        pass
    view.log("info", f"done {item}")
    if item % 7 == 3:
        raise ValueError(f"boom {item}")
    return item


DEFAULT_CHUNK = manifest.ROWS_CHUNK


@pytest.mark.parametrize("chunk", [5, 64, DEFAULT_CHUNK])
async def test_the_rows_written_in_chunks_are_those_the_records_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(manifest, "ROWS_CHUNK", chunk)
    writes: list[int] = []  # the number of records each write of rows took
    add_rows = trace_db.StoreWriter.add_rows

    def counted(self: trace_db.StoreWriter, nodes: Any) -> int:
        writes.append(len(nodes))
        return add_rows(self, nodes)

    monkeypatch.setattr(trace_db.StoreWriter, "add_rows", counted)
    path = tmp_path / "run.sqlite"
    first = await lf.batch(steps, range(40), run=path, progress=False, max_concurrency=4)
    second = await lf.batch(steps, range(60), run=path, progress=False, max_concurrency=4)
    assert (len(first.failed), len(second.failed)) == (6, 9)  # 6 run again, 3 new
    # rows written a chunk at a time: the first run's, read again at the second's start,
    # then this run's (a stored trace converted at the end from the records writes them a
    # block of records at a time: fewer writes)
    assert len([n for n in writes if n]) >= {5: 6, 64: 3, DEFAULT_CHUNK: 2}[chunk]
    stored, converted = stored_and_converted(path)
    assert stored == converted
    # both runs' session and batch nodes, and per item run its node and three below it
    assert len(stored["trace_rows"]) == 2 + 40 * 4 + 2 + (60 - 40 + 6) * 4
