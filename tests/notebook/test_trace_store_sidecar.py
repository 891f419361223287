"""The index sidecar of a run manifest: the first ``open_store_index`` writes
``<manifest>.lfxidx`` (the index and each node's rowid), a later open of the unchanged
manifest reads it back — no record parsed — and answers, detail records included, exactly as
an index built from the records. Another run into the manifest, a write still in its
write-ahead log, a damaged sidecar or one that cannot be written: the records are indexed
again. ``limit`` indexes the first records only, and never touches the sidecar."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.notebook import trace_store
from langfx_nb.notebook.trace_file import SIDECAR_SUFFIX, sidecar_places
from langfx_nb.notebook.trace_index import TraceIndex
from langfx_nb.notebook.trace_store import open_store_index

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
FAIL_EVERY = 31


async def work(item: int, view: Any) -> int:
    with view.track("action", "step", inputs={"item": item}) as step:
        step.session.log("info", f"working on {item}")
    if item % FAIL_EVERY == 0:
        raise ValueError(f"boom {item}")
    return item


def run(path: Path, n: int) -> Any:
    return asyncio.run(lf.batch(work, range(n), run=path, progress=False))


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def answers(index: TraceIndex) -> list[object]:
    views: list[dict[str, Any]] = [
        {},
        {"expanded": {index.ids[1]: False}},
        {"query": "boom 3", "start": 2},
        {"query": "working on 12", "selected": index.ids[-7]},
        {"start": 40, "count": 90},
    ]
    out: list[object] = [index.counts(), index.span(), len(index), index.ids]
    out += [index.window(**view) for view in views]
    out += [index.record(i) for i in index.ids[::37]]  # read back through the rowid table
    return out


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every index built from the manifest's records (not read from a sidecar)."""
    built: list[Path] = []
    build = trace_store._build

    def counted(path: Path, *args: Any) -> Any:
        built.append(path)
        return build(path, *args)

    monkeypatch.setattr(trace_store, "_build", counted)
    return built


def test_a_second_open_reads_the_sidecar_and_answers_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 400)
    assert not Path(f"{path}-wal").exists()  # the batch's last connection removed it
    first = open_store_index(path)  # which leaves an empty one behind: still the same file
    assert sidecar_of(path).exists() and not list(tmp_path.glob("*.tmp"))
    built = open_store_index(path, sidecar=False)

    def no_records(*args: object, **kwargs: object) -> None:
        raise AssertionError("the second open read the records instead of the sidecar")

    monkeypatch.setattr(trace_store, "_build", no_records)
    monkeypatch.setattr(trace_store, "trace_records", no_records)
    again = open_store_index(path)
    assert answers(again) == answers(built) == answers(first)
    # each detail record is the one stored for that node (the rowid table read back)
    with sqlite3.connect(path) as conn:
        stored = {i: json.loads(r) for i, r in conn.execute("SELECT id, record FROM trace_nodes")}
    step = next(i for i, r in stored.items() if r["kind"] == "action")
    assert again.record(step)["inputs"] == stored[step]["inputs"]
    assert [again.record(i)["name"] for i in again.ids] == [stored[i]["name"] for i in again.ids]
    for index in (built, first, again):
        index.close()


def test_another_run_into_the_manifest_makes_the_sidecar_stale(
    tmp_path: Path, builds: list[Path]
) -> None:
    path = tmp_path / "again.sqlite"
    n = 200
    run(path, n)
    open_store_index(path).close()
    assert len(builds) == 1
    failed = len(range(0, n, FAIL_EVERY))
    assert run(path, n).totals.failed == failed  # only the failed items run again
    index = open_store_index(path)
    assert len(builds) == 2
    kinds = index.counts()["kind"]
    assert kinds["session"] == 2 and kinds["item"] == n + failed
    assert answers(index) == answers(open_store_index(path, sidecar=False))
    again = open_store_index(path)  # the sidecar rewritten for the manifest as it is now
    assert len(builds) == 3  # (the sidecar=False build above), and no other
    assert answers(again) == answers(index)
    for each in (index, again):
        each.close()


def test_a_write_still_in_the_write_ahead_log_makes_the_sidecar_stale(
    tmp_path: Path, builds: list[Path]
) -> None:
    """A batch still running writes into the ``-wal`` file; the manifest file itself changes
    only at a checkpoint. The sidecar is matched to both."""
    path = tmp_path / "live.sqlite"
    run(path, 100)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # what is written stays in the log

    def log(k: int) -> None:
        record = {"id": f"late{k}", "parent_id": "0", "kind": "log", "name": "log"}
        record |= {"status": "ok", "start": 1.0, "end": 1.0, "inputs": {"message": f"late {k}"}}
        writer.execute(
            "INSERT INTO trace_nodes VALUES (1, ?, ?)", (record["id"], json.dumps(record))
        )

    try:
        log(1)
        before = path.stat()
        first = open_store_index(path)
        assert first.counts()["kind"]["log"] == 101 and len(builds) == 1
        log(2)
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (
            before.st_size,
            before.st_mtime_ns,
        )  # only the log changed
        second = open_store_index(path)
        assert len(builds) == 2
        assert second.counts()["kind"]["log"] == 102
        assert second.record("late2")["inputs"] == {"message": "late 2"}
        third = open_store_index(path)  # nothing written since: the sidecar
        assert len(builds) == 2 and answers(third) == answers(second)
    finally:
        writer.close()
    for index in (first, second, third):
        index.close()


def test_a_damaged_or_foreign_sidecar_is_ignored(tmp_path: Path, builds: list[Path]) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 150)
    fresh = open_store_index(path, sidecar=False)
    open_store_index(path).close()
    sidecar = sidecar_of(path)
    data = sidecar.read_bytes()
    other = tmp_path / "other.sqlite"
    run(other, 120)
    open_store_index(other).close()
    damaged = [
        data[: len(data) // 2],  # cut short
        b"not an index\n",
        data[:-4],  # the last part short by a few bytes
        sidecar_of(other).read_bytes(),  # another manifest's
        data.replace(b'"magic": "langfx_nb.store_index"', b'"magic": "langfx_nb.trace_index"'),
    ]
    for bad in damaged:
        sidecar.write_bytes(bad)
        before = len(builds)
        index = open_store_index(path)
        assert len(builds) == before + 1
        assert answers(index) == answers(fresh)
        index.close()
    fresh.close()


def test_a_sidecar_that_cannot_go_beside_the_manifest_goes_to_the_cache(
    tmp_path: Path, builds: list[Path]
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 100)
    sidecar_of(path).mkdir()  # in the way of the rename
    index = open_store_index(path)
    assert len(index) == 2 + 3 * 100 and sidecar_of(path).is_dir()
    assert not list(tmp_path.glob("*.tmp"))
    assert sidecar_places(path)[1].is_file()  # the per-user cache
    assert answers(open_store_index(path)) == answers(index)
    assert len(builds) == 1  # the second open read the cached sidecar
    index.close()


def test_a_sidecar_that_cannot_be_written_anywhere_is_no_error(
    tmp_path: Path, builds: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 100)
    sidecar_of(path).mkdir()  # in the way of the rename
    (tmp_path / "not-a-dir").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-dir"))  # no cache either
    index = open_store_index(path)
    assert len(index) == 2 + 3 * 100
    assert not list(tmp_path.glob("*.tmp"))
    assert answers(open_store_index(path)) == answers(index)
    assert len(builds) == 2
    index.close()


@pytest.mark.skipif(ROOT, reason="root ignores file permissions")
def test_a_read_only_directory_is_indexed_from_its_records(
    tmp_path: Path, builds: list[Path]
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "run.sqlite"
    run(path, 100)
    fresh = open_store_index(path, sidecar=False)  # leaves the -wal and -shm files SQLite needs
    folder.chmod(0o555)
    try:
        index = open_store_index(path)
        assert not sidecar_of(path).exists()
        assert answers(index) == answers(fresh)
    finally:
        folder.chmod(0o755)
    assert len(builds) == 2
    index.close()
    fresh.close()


def test_limit_indexes_the_first_records_and_never_the_sidecar(
    tmp_path: Path, builds: list[Path]
) -> None:
    path = tmp_path / "run.sqlite"
    run(path, 300)
    with sqlite3.connect(path) as conn:
        first_ids = [i for (i,) in conn.execute("SELECT id FROM trace_nodes ORDER BY rowid")]
    part = open_store_index(path, limit=250)
    assert part.ids == first_ids[:250] and not sidecar_of(path).exists()
    assert part.record(first_ids[249])["id"] == first_ids[249]
    # a node whose parent comes later is a root of the part (the session comes first)
    assert part.kinds[part.kind[part.roots[0]]] == "session"
    whole = open_store_index(path)  # the whole manifest, and its sidecar
    assert len(whole) == len(first_ids) == 2 + 3 * 300 and sidecar_of(path).exists()
    again = open_store_index(path, limit=250)  # a part is built, not cut from the sidecar
    assert again.ids == part.ids and len(builds) == 3
    assert open_store_index(path, limit=10_000).ids == whole.ids
    for index in (part, whole, again):
        index.close()
