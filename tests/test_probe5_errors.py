"""The error tree as a new maintainer reads it: the tree drawn in ``errors.py`` is the real
class hierarchy (each class under its actual parent), every class of ``errors.py`` is
``lf.X``, and a manifest that cannot be read keeps the ``sqlite3`` error as its cause and
says what is wrong with the file."""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path

import pytest

import langfx_nb as lf
import langfx_nb.errors as errors


def _drawn_tree() -> list[tuple[str, str | None]]:
    """(class, parent) for each line of the tree drawn in ``errors.py``'s docstring."""
    out: list[tuple[str, str | None]] = []
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^    ((?:[│ ]   )*)(?:[├└]── )?([A-Z]\w+)(?:\s|$)", line)
        if match is None or (not match[1] and match[2] != "LangFxError" and "──" not in line):
            continue
        depth = len(match[1]) // 4 + (1 if "──" in line else 0)
        del stack[depth:]
        out.append((match[2], stack[-1] if stack else None))
        stack.append(match[2])
    return out


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    drawn = _drawn_tree()
    assert drawn[0] == ("LangFxError", None) and len(drawn) > 20
    for name, parent in drawn[1:]:
        cls = getattr(lf, name)
        assert parent is not None
        assert parent in [base.__name__ for base in cls.__bases__], (name, parent)


def test_every_class_of_errors_py_is_exported_and_drawn() -> None:
    drawn = {name for name, _ in _drawn_tree()}
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
        if value.__module__ == errors.__name__
    }
    assert defined <= set(errors.__all__) and defined <= set(lf.__all__)
    assert all(getattr(lf, name) is getattr(errors, name) for name in defined)
    assert defined <= drawn


async def echo(x: int) -> int:
    return x


async def test_a_damaged_manifest_keeps_the_sqlite_error_as_its_cause(tmp_path: Path) -> None:
    run = tmp_path / "damaged.sqlite"
    await lf.batch(echo, list(range(50)), run=run, progress=False)
    data = bytearray(run.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # a page of the file overwritten
    run.write_bytes(bytes(data))
    with pytest.raises(lf.RunManifestError) as ran:
        await lf.batch(echo, [1], run=run, progress=False)
    assert isinstance(ran.value.__cause__, sqlite3.DatabaseError)
    with pytest.raises(lf.RunManifestError) as loaded:
        lf.BatchResult.load(run)
    assert isinstance(loaded.value.__cause__, sqlite3.DatabaseError)
    assert "malformed" in str(loaded.value)


async def test_a_locked_manifest_is_said_to_be_locked(tmp_path: Path) -> None:
    run = tmp_path / "locked.sqlite"
    await lf.batch(echo, [1, 2], run=run, progress=False)
    holder = sqlite3.connect(run, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # a DB browser or backup holding the file
    try:
        with pytest.raises(lf.RunManifestError) as info:
            await lf.batch(echo, [1, 2, 3], run=run, progress=False)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    cause = info.value.__cause__
    assert isinstance(cause, sqlite3.OperationalError) and "locked" in str(cause)
    assert "not a langfx_nb run manifest" not in str(info.value)
    assert "locked" in str(info.value)


async def test_a_fn_that_cannot_ship_names_its_pickling_error_before_ray_starts() -> None:
    pytest.importorskip("ray")
    import ray

    lock = threading.Lock()

    async def locked(x: int) -> int:  # a closure is shipped by value, its lock with it
        with lock:
            return x

    with pytest.raises(lf.ShippingError) as info:
        await lf.batch(locked, [1], engine=lf.engines.Ray(num_cpus=1), progress=False)
    assert isinstance(info.value, TypeError) and info.value.what == "fn"
    assert isinstance(info.value.__cause__, TypeError)
    assert "_thread.lock" in str(info.value.__cause__)
    assert not ray.is_initialized()  # refused before any cluster started
