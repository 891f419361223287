"""The index sidecar of a large saved trace: the first open writes ``<trace>.lfxidx``, a
later open of the unchanged file reads it back and answers exactly as an index built from
the records; a changed file or a damaged sidecar is indexed from its records again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langfx_nb.notebook import trace_file
from langfx_nb.notebook.trace_file import SIDECAR_SUFFIX, open_index
from langfx_nb.notebook.trace_index import TraceIndex

from .test_trace_index import make_trace

VIEWS = [
    {},
    {"expanded": {"b": False}},
    {"expanded": {"d0": True, "d1": True}, "start": 5, "count": 80},
    {"query": "boom", "selected": "n40"},
    {"query": "ünïcode ✓ 12", "start": 3},
]


def answers(index: TraceIndex) -> list[object]:
    out: list[object] = [index.counts(), index.span(), len(index), index.header]
    out += [index.window(**view) for view in VIEWS]
    out += [index.record(i) for i in index.ids[::211]]
    return out


def write(path: Path, n: int, seed: int) -> None:
    path.write_text(json.dumps(make_trace(n, seed=seed, deep=25), ensure_ascii=False), "utf-8")


def test_a_second_open_reads_the_sidecar_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    write(path, 4000, seed=5)
    built = open_index(path, sidecar=False)
    assert not (tmp_path / f"t.json{SIDECAR_SUFFIX}").exists()
    first = open_index(path)
    sidecar = tmp_path / f"t.json{SIDECAR_SUFFIX}"
    assert sidecar.exists()

    def no_parse(path: Path) -> None:
        raise AssertionError("the second open parsed the trace instead of reading its sidecar")

    monkeypatch.setattr(trace_file, "_build", no_parse)
    again = open_index(path)
    assert answers(again) == answers(built) == answers(first)
    for index in (built, first, again):
        index.close()


def test_a_changed_trace_or_a_damaged_sidecar_is_indexed_from_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.json"
    write(path, 3000, seed=1)
    open_index(path).close()
    write(path, 3500, seed=2)  # another trace at the same path: the sidecar is stale
    fresh = open_index(path, sidecar=False)
    reopened = open_index(path)
    assert len(reopened) == len(fresh) and answers(reopened) == answers(fresh)
    sidecar = tmp_path / f"t.json{SIDECAR_SUFFIX}"
    data = sidecar.read_bytes()
    sidecar.write_bytes(data[: len(data) // 2])  # cut short
    assert answers(open_index(path)) == answers(fresh)
    sidecar.write_bytes(b"not an index\n")
    assert answers(open_index(path)) == answers(fresh)
