"""The index sidecar of a large saved trace: the first open writes ``<trace>.lfxidx``, a
later open of the unchanged file reads it back and answers exactly as an index built from
the records; a changed file or a damaged sidecar is indexed from its records again. A trace
written with ``save_trace`` has its sidecar from the start: its first open parses nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import langfx_nb as lf
from langfx_nb.notebook import trace_file
from langfx_nb.notebook.trace_data import read_trace
from langfx_nb.notebook.trace_file import SIDECAR_SUFFIX, open_index, save_trace
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


@pytest.fixture
def small_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """save_trace writes the sidecar of these small traces as of a 4 MB one."""
    monkeypatch.setattr(trace_file, "INDEX_FILE_BYTES", 1)


def test_a_small_saved_trace_gets_no_sidecar(tmp_path: Path) -> None:
    path = save_trace(make_trace(300), tmp_path / "small.json")
    assert [p.name for p in tmp_path.iterdir()] == ["small.json"]
    assert read_trace(path)["nodes"] == make_trace(300)["nodes"]


@pytest.mark.usefixtures("small_is_large")
def test_a_trace_saved_by_the_library_opens_from_its_sidecar_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_trace(4000, seed=7, deep=25)
    path = save_trace(data, tmp_path / "saved.json")
    # the same file as the documented json.dumps of the data (Session.trace_json_str)
    assert path.read_bytes() == json.dumps(data, ensure_ascii=False).encode("utf-8")
    assert (tmp_path / f"saved.json{SIDECAR_SUFFIX}").exists()
    assert not list(tmp_path.glob("*.tmp"))
    built = open_index(path, sidecar=False)

    def no_parse(path: Path) -> None:
        raise AssertionError("a trace saved with save_trace was parsed at its first open")

    monkeypatch.setattr(trace_file, "_build", no_parse)
    first = open_index(path)
    assert answers(first) == answers(built)
    for index in (built, first):
        index.close()


async def test_a_session_saved_with_save_trace_is_its_trace_json_str(tmp_path: Path) -> None:
    async with lf.Session() as session:
        for i in range(30):
            session.log("info", f"step {i}", i=i)
    path = tmp_path / "session.json"
    assert lf.nb.save_trace(session, path) == path
    assert path.read_text("utf-8") == session.trace_json_str()
    index = open_index(path)
    assert len(index) == 31 and index.counts()["kind"] == {"session": 1, "log": 30}
    index.close()


@pytest.mark.usefixtures("small_is_large")
def test_a_file_changed_after_it_was_saved_never_uses_the_stale_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_trace(3000, seed=3)
    path = save_trace(data, tmp_path / "t.json")
    assert (tmp_path / f"t.json{SIDECAR_SUFFIX}").exists()
    text = path.read_text("utf-8")
    stat = path.stat()
    # the same size, and the modification time put back as it was: only the change time differs
    changed = text.replace('"name": "batch"', '"name": "BATCH"', 1)
    assert len(changed) == len(text) and changed != text
    path.write_text(changed, "utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    parsed: list[Path] = []
    build = trace_file._build

    def counted(path: Path) -> object:
        parsed.append(path)
        return build(path)

    monkeypatch.setattr(trace_file, "_build", counted)
    index = open_index(path)
    assert parsed == [path]
    assert index.window(count=2)["rows"][1]["node"]["name"] == "BATCH"
    index.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "other", "nodes": []}, "not a langfx_nb trace"),
        ({"format": "langfx_nb.trace", "version": 9, "nodes": []}, "unsupported trace version"),
        ({"format": "langfx_nb.trace", "version": 1, "nodes": {}}, "'nodes' must be a list"),
    ],
)
def test_save_trace_refuses_what_is_not_a_trace(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        save_trace(data, tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


def test_save_trace_names_a_node_a_row_cannot_show_and_leaves_no_file(tmp_path: Path) -> None:
    data = make_trace(3000)
    del data["nodes"][2500]["kind"]
    with pytest.raises(ValueError, match=re.escape("nodes[2500]: 'kind' is missing")):
        save_trace(data, tmp_path / "t.json")
    assert not list(tmp_path.iterdir())


@pytest.mark.usefixtures("small_is_large")
def test_a_damaged_trace_file_is_a_clear_error_even_with_a_sidecar(tmp_path: Path) -> None:
    path = save_trace(make_trace(3000), tmp_path / "t.json")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut short: its sidecar no longer matches
    with pytest.raises(ValueError, match="not a langfx_nb trace: not valid JSON"):
        open_index(path)
    path.write_bytes(b"[1, 2, 3]")
    with pytest.raises(ValueError, match="not a langfx_nb trace"):
        open_index(path)


def test_a_prefix_holds_the_first_records_and_a_whole_file_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    write(path, 4000, seed=3)
    whole = open_index(path, sidecar=False)
    part = trace_file.open_prefix(path, 1)  # stops after the first chunk of records
    assert not part.complete and 0 < len(part.index) < len(whole)
    assert part.index.ids == whole.ids[: len(part.index)]
    assert part.read_to < part.size == path.stat().st_size
    first = part.index.ids[len(part.index) // 2]
    assert part.index.record(first) == whole.record(first)  # read back from the file
    assert not (tmp_path / f"t.json{SIDECAR_SUFFIX}").exists()  # only a whole index is saved
    full = trace_file.open_prefix(path, path.stat().st_size)
    assert full.complete and answers(full.index) == answers(whole)
    assert (tmp_path / f"t.json{SIDECAR_SUFFIX}").exists()
    for index in (whole, part.index, full.index):
        index.close()


def test_a_sidecar_that_cannot_go_beside_its_trace_goes_to_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "t.json"
    write(path, 3000, seed=4)
    (tmp_path / f"t.json{SIDECAR_SUFFIX}").mkdir()  # the name beside it is taken
    where = trace_file.index_file(path)
    assert where is not None and where.parent == trace_file.sidecar_cache_dir()
    assert trace_file.sidecar_cache_dir() == tmp_path / "cache" / "langfx_nb" / "trace_index"
    fresh = open_index(path, sidecar=False)
    cached = trace_file.load_index(path)
    assert cached is not None and answers(cached) == answers(fresh)
    write(path, 3100, seed=5)  # changed: the cached index no longer matches
    assert trace_file.load_index(path) is None
    for index in (fresh, cached):
        index.close()
