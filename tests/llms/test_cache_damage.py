"""A damaged response cache never breaks a call and never loses a paid answer.

Every case uses a real SQLite file on disk, damaged the way a disk, a crash, another tool
or a careless copy damages it. The call then goes to the model with exactly one
``CacheWarning`` naming the cache and what is wrong; an answer already paid for is
returned even when it cannot be written.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import SQLiteCache, StaticResponse
from langfx_nb.llms.cache import CacheWarning

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_permissions = pytest.mark.skipif(ROOT, reason="root ignores file permissions")


def _model(path: Path) -> StaticResponse:
    return StaticResponse("the answer", cache=SQLiteCache(path))


async def _call_expecting_one_warning(
    lm: StaticResponse, match: str, prompt: str = "q"
) -> lf.AIMessage:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = lm.num_requests
        response = await lm.call(prompt)
    cache_warnings = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert len(cache_warnings) == 1, [str(w.message) for w in caught]
    assert [w for w in caught if w not in cache_warnings] == []
    text = str(cache_warnings[0].message)
    assert match in text and "cache" in text
    assert response.text == "the answer"
    assert lm.num_requests == before + 1  # the call went to the model
    return response


async def _fill(path: Path) -> None:
    lm = _model(path)
    await lm.call("q")
    await lm.call("other")
    assert lm.num_requests == 2 and len(SQLiteCache(path)) == 2
    assert isinstance(lm.cache, SQLiteCache)
    lm.cache.close()  # the write-ahead log folded into the file, which the tests damage


async def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database\n" * 400)
    await _call_expecting_one_warning(_model(path), str(path))
    assert path.read_bytes().startswith(b"this is not")  # never overwritten


async def test_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    data = path.read_bytes()
    assert len(data) > 4096
    path.write_bytes(data[: len(data) // 2 + 100])
    await _call_expecting_one_warning(_model(path), str(path))


async def test_zero_length_file_is_a_fresh_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"")
    lm = _model(path)
    await lm.call("q")
    await lm.call("q")
    assert lm.num_requests == 1


async def test_file_where_a_directory_is_expected(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_text("x")
    path = tmp_path / "notadir" / "c.sqlite"
    await _call_expecting_one_warning(_model(path), str(path))


async def test_directory_where_the_file_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.mkdir()
    await _call_expecting_one_warning(_model(path), str(path))


@needs_permissions
async def test_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    path.chmod(0o444)
    lm = _model(path)
    with warnings.catch_warnings(record=True):  # reading may or may not work: never raises
        warnings.simplefilter("always")
        assert (await lm.call("q")).text == "the answer"
    await _call_expecting_one_warning(lm, str(path), "a new question")  # cannot be written


@needs_permissions
async def test_read_only_directory(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "c.sqlite"
    folder.chmod(0o555)
    try:
        await _call_expecting_one_warning(_model(path), str(path))
    finally:
        folder.chmod(0o755)


async def test_table_of_the_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE responses (id INTEGER PRIMARY KEY, payload BLOB)")
    await _call_expecting_one_warning(_model(path), str(path))


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        "[]",
        '{"version": 1, "role": "user", "parts": [{"kind": "text", "text": "hi"}]}',
        '{"version": 99, "role": "ai", "parts": []}',
        '{"version": 1, "role": "ai", "parts": [{"kind": "nope"}]}',
        '{"version": 1, "role": "ai", "parts": "text"}',
        5,
        b"\xff\xfe binary",
    ],
)
async def test_poisoned_row_is_replaced_by_a_fresh_answer(tmp_path: Path, value: object) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE responses SET value=?", (value,))
    lm = _model(path)
    await _call_expecting_one_warning(lm, str(path))
    await lm.call("q")  # the fresh answer replaced the poisoned row
    assert lm.num_requests == 1


async def test_failed_write_after_a_paid_call_still_returns_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    await _fill(path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER full BEFORE INSERT ON responses "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    lm = _model(path)
    response = await _call_expecting_one_warning(lm, "disk full", "a new question")
    assert response.text == "the answer"


class Answer(BaseModel):
    name: str


async def test_bad_answer_with_a_broken_cache_is_still_a_mapping_error(tmp_path: Path) -> None:
    """Forgetting a bad answer must not turn the MappingError into a cache error."""
    path = tmp_path / "c.sqlite"
    lm = StaticResponse("not an answer(", cache=SQLiteCache(path))
    await lm.call("warm up")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER nodelete BEFORE DELETE ON responses "
            "BEGIN SELECT RAISE(ABORT, 'locked by another tool'); END"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(lf.MappingError):
            await lf.query("q", Answer, lm=lm)
    assert [w.category for w in caught] == [CacheWarning]


async def test_query_stream_with_a_corrupt_cache_still_streams(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"garbage" * 1000)
    lm = StaticResponse("Answer(name='x')", cache=SQLiteCache(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = [e async for e in lf.query_stream("q", Answer, lm=lm)]
    assert isinstance(events[-1], lf.GenerationComplete)
    assert [w.category for w in caught] == [CacheWarning]
