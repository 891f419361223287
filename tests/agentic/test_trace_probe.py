"""Traces a new user saves and opens with the core (issue #39's check): ``lf.save_trace``,
``Session.load_trace`` and the stored-trace reader on damaged or unusual input must give one
clear ``ValueError`` naming the file (or read the trace exactly), never a bare error from deep
inside sqlite, ``int()`` or ``json``, nor silently wrong counts."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from array import array
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.agentic.session import Session
from langfx_nb.agentic.trace_db import open_store
from tests.local import python_bounded


def _node(node_id: str, parent: str | None, kind: str = "action", **more: Any) -> dict[str, Any]:
    out = {"id": node_id, "parent_id": parent, "kind": kind, "name": f"n {node_id}"}
    return {**out, "status": "ok", "start": 0.0, "end": 1.0, **more}


def _trace(*nodes: dict[str, Any]) -> dict[str, Any]:
    head = {"format": "langfx_nb.trace", "version": 1, "session": {"id": "s"}}
    return {**head, "nodes": [_node("s", None, "session"), *nodes]}


def _trace_file(tmp_path: Path, *nodes: dict[str, Any]) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_trace(*nodes)))
    return path


def test_a_huge_token_count_is_one_value_error(tmp_path: Path) -> None:
    # sqlite3 cannot bind the int: "OverflowError: Python int too large to convert to SQLite
    # INTEGER" from deep inside StoreWriter (TraceExplorer(path) of the file too)
    source = _trace_file(tmp_path, _node("x", "s", usage={"total_tokens": 10**30}))
    with pytest.raises(ValueError, match=r"nodes\[1\]"):
        lf.save_trace(source, tmp_path / "t.sqlite")


def test_load_trace_refuses_parents_that_form_a_cycle(tmp_path: Path) -> None:
    # save_trace and the explorer refuse it ("some nodes' parents form a cycle"); the core's
    # strict reader returns a session whose tree silently leaves x and y out
    data = _trace(_node("x", "y"), _node("y", "x"))
    with pytest.raises(ValueError, match="cycle"):
        lf.save_trace(data, tmp_path / "never-written.sqlite")
    with pytest.raises(ValueError, match="cycle"):
        Session.load_trace(data)


def test_save_trace_into_a_missing_folder_is_an_os_error(tmp_path: Path) -> None:
    # "sqlite3.OperationalError: unable to open database file" (from connecting to the
    # temporary file beside it), where a user expects FileNotFoundError naming the path
    target = tmp_path / "no such folder" / "t.sqlite"
    with pytest.raises(FileNotFoundError, match="no such folder"):
        lf.save_trace(_trace(), target)


@pytest.mark.parametrize("evicted", ["5", True, 2.5])
def test_evicted_children_not_an_integer_is_refused_by_every_reader(
    tmp_path: Path, evicted: Any
) -> None:
    # save_trace refuses it; Session.load_trace took int("5"), int(True), int(2.5)
    source = _trace_file(tmp_path, _node("x", "s", evicted_children=evicted))
    with pytest.raises(ValueError, match="evicted_children"):
        lf.save_trace(source, tmp_path / "t.sqlite")
    with pytest.raises(ValueError, match="evicted_children"):
        Session.load_trace(source)


@pytest.mark.parametrize("start", ["5", True])
def test_a_non_numeric_start_is_refused_by_every_reader(tmp_path: Path, start: Any) -> None:
    # save_trace (and so the explorer on a file of 4 MB or more) says "'start' must be a
    # number or null"; Session.load_trace (and the explorer below 4 MB) takes float("5"):
    # the same trace opens or not depending on the file's size
    source = _trace_file(tmp_path, _node("x", "s", start=start))
    with pytest.raises(ValueError, match="start"):
        lf.save_trace(source, tmp_path / "t.sqlite")
    with pytest.raises(ValueError, match="start"):
        Session.load_trace(source)


def test_load_trace_of_deeply_nested_json_is_one_value_error() -> None:
    text = json.dumps(_trace()).replace('"id": "s"}', '"id": "s", "x": ' + "[" * 100_000, 1)
    text = text.replace('"x": ' + "[" * 100_000, '"x": ' + "[" * 100_000 + "]" * 100_000 + "}", 1)
    with pytest.raises(ValueError, match="not valid JSON"):
        Session.load_trace(text)


def test_load_trace_of_a_file_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    # save_trace: "<path>: not a langfx_nb trace: not valid UTF-8"; Session.load_trace lets
    # read_text's UnicodeDecodeError out ("'utf-8' codec can't decode byte 0xff ..."),
    # naming neither the file nor what it expected
    path = _trace_file(tmp_path, _node("x", "s", name="NAME"))
    path.write_bytes(path.read_bytes().replace(b"NAME", b"\xff\xfe"))
    with pytest.raises(ValueError, match="not valid UTF-8") as caught:
        Session.load_trace(path)
    assert not isinstance(caught.value, UnicodeDecodeError)


def _store(tmp_path: Path) -> Path:
    source = _trace(_node("a", "s"), _node("b", "a", name="needle"), _node("c", "s"))
    return lf.save_trace(source, tmp_path / "t.sqlite")


def _damage(path: Path, sql: str, *args: Any) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql, args)
    conn.commit()
    conn.close()


_DAMAGE = {
    # ValueError: invalid literal for int() with base 10: 'abc' (names nothing)
    "tokens are text": "UPDATE trace_rows SET tokens = 'abc'",
    "depth is text": "UPDATE trace_tree SET depth = 'x'",
    # UnicodeDecodeError from py_text (names nothing)
    "name is not UTF-8": "UPDATE trace_rows SET name = x'ff00'",
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_damaged_store_is_one_value_error_naming_the_file(tmp_path: Path, damage: str) -> None:
    path = _store(tmp_path)
    _damage(path, _DAMAGE[damage])
    try:
        with closing(open_store(path)) as store:
            window = store.window(expanded={"a": True})
            search = store.window(query="needle")
    except ValueError as exc:
        assert type(exc) is ValueError and str(path) in str(exc)
        return
    assert (window["nodes"], window["total"], search["matches"]) == (4, 4, 1)


def test_a_store_whose_parents_point_outside_is_refused(tmp_path: Path) -> None:
    # a parent rank of -5 for every node: the search answers 1 row (the match, no ancestors)
    # instead of refusing the damaged array as it does a too-large rank
    path = _store(tmp_path)
    _damage(path, "UPDATE trace_order SET ranks = ? WHERE name = 'parent'", array("i", [-5] * 4))
    with closing(open_store(path)) as store, pytest.raises(ValueError, match="damaged"):
        store.window(query="needle")


def _load_in_child(path: Path) -> subprocess.CompletedProcess[str]:
    """``Session.load_trace(Path(path))`` in a bounded child process (15 s, 1 GB)."""
    code = (
        "import sys; from pathlib import Path; from langfx_nb.agentic.session import Session\n"
        "try:\n    Session.load_trace(Path(sys.argv[1]))\n"
        "except ValueError as exc:\n    print('ValueError:', exc)\n"
    )
    return python_bounded(code, str(path), timeout=15)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_load_trace_of_a_special_file_is_refused(tmp_path: Path, kind: str) -> None:
    # save_trace and TraceExplorer check regular_file first ("not a regular file");
    # Session._trace_data reads a Path it does not take for a store with read_text: a FIFO
    # blocks for ever, a link to /dev/zero reads until MemoryError
    path = tmp_path / "trace.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(kind)
    try:
        done = _load_in_child(path)
    except subprocess.TimeoutExpired:
        pytest.fail("Session.load_trace hung")
    assert "ValueError:" in done.stdout and "not a regular file" in done.stdout, done.stderr[-500:]


def test_load_trace_of_a_missing_file_says_it_is_missing(tmp_path: Path) -> None:
    # a str path that is not a file is parsed as JSON text: a typo in a path reads "not a
    # langfx_nb trace: not valid JSON (Expecting value ...)" (Path(...) gives FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        Session.load_trace(str(tmp_path / "trace.json"))


def test_save_trace_of_json_text_does_not_quote_the_text_as_a_path(tmp_path: Path) -> None:
    # Session.load_trace and TraceExplorer take JSON text; save_trace takes it for a file
    # name and raises a ValueError whose message holds the whole text (megabytes)
    text = json.dumps(_trace(_node("x", "s", outputs="A" * 1_000_000)))
    try:
        lf.save_trace(text, tmp_path / "t.sqlite")
    except (ValueError, OSError) as exc:
        assert len(str(exc)) < 2_000
    else:
        with closing(open_store(tmp_path / "t.sqlite")) as store:
            assert len(store) == 2


def test_save_trace_progress_ends_at_the_files_size(tmp_path: Path) -> None:
    # the last call comes before the closing "]}" is read (done == size - 2), so the
    # explorer's progress line ("reading x.json: 99% of 12 MB") never prints its 100% and
    # its newline: the next output continues on the same line
    nodes = [_node(f"n{i}", "s", inputs={"message": "x" * 100}) for i in range(20_000)]
    source = _trace_file(tmp_path, *nodes)
    calls: list[tuple[int, int]] = []
    lf.save_trace(
        source, tmp_path / "t.sqlite", progress=lambda done, size: calls.append((done, size))
    )
    size = source.stat().st_size
    assert calls[-1] == (size, size)


def test_a_trace_file_whose_name_starts_with_a_brace_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a str starting with "{" is taken for JSON text before checking for a file of that name
    # (save_trace opens it; Session.load_trace and TraceExplorer say "not valid JSON")
    path = _trace_file(tmp_path, _node("x", "s"))
    path.rename(tmp_path / "{run}.json")
    monkeypatch.chdir(tmp_path)
    assert len(Session.load_trace("{run}.json").trace_json()["nodes"]) == 2


def test_save_trace_onto_its_own_source_file_is_refused_and_keeps_it(tmp_path: Path) -> None:
    path = _trace_file(tmp_path, _node("x", "s"))
    before = path.read_bytes()
    link = tmp_path / "link.json"
    link.symlink_to(path)
    for target in (path, link):
        with pytest.raises(ValueError, match="is the trace file to read"):
            lf.save_trace(path, target)
    assert path.read_bytes() == before  # still the JSON the user wrote
