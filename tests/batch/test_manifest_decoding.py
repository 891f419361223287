"""A run manifest is data: the class names in its rows never make the process import a
module, and a stored value is returned only as a class the run declares (real SQLite
files, changed as an attacker would; a real process where an import would run code)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pydantic
import pytest

import langfx_nb as lf

ROOT = Path(__file__).resolve().parents[2]


class Label(pydantic.BaseModel):
    item: int
    label: str


class Lookalike(pydantic.BaseModel):  # accepts Label's JSON: a file could name it
    item: int
    label: str


async def label(x: int) -> Label:
    return Label(item=x, label=f"l{x}")


def _retag(path: Path, tag: str, *, types_row: bool = True) -> None:
    # Closed here, not when collected: the last close moves the change out of the WAL file,
    # so the bytes read next are the whole manifest.
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE items SET tag = ? WHERE idx = 1", (tag,))
        if types_row:
            conn.execute("INSERT INTO types VALUES (?, 'x')", (tag,))


async def test_a_value_stored_under_another_class_is_refused_not_returned(
    tmp_path: Path,
) -> None:
    run = tmp_path / "r.sqlite"
    first = await lf.batch(label, range(3), run=run, progress=False)
    assert first.ok
    _retag(run, f"{Lookalike.__module__}:{Lookalike.__qualname__}", types_row=False)
    before = run.read_bytes()
    refused = r"item 1 .* not of a class this run declares"
    with pytest.raises(lf.RunManifestError, match=refused) as caught:
        await lf.batch(label, range(3), run=run, progress=False)
    assert "Lookalike" in str(caught.value) and caught.value.path == str(run)
    assert run.read_bytes() == before  # left untouched


async def test_a_plain_value_where_the_run_returns_a_class_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "p.sqlite"
    await lf.batch(label, range(3), run=run, progress=False)
    with sqlite3.connect(run) as conn:
        conn.execute("UPDATE items SET tag = 'json' WHERE idx = 2")
    with pytest.raises(lf.RunManifestError, match=r"item 2 .* is a plain JSON value"):
        await lf.batch(label, range(3), run=run, progress=False)

    async def maybe(x: int) -> Label | None:  # None is stored as plain JSON
        return None if x == 1 else Label(item=x, label="m")

    other = tmp_path / "m.sqlite"
    await lf.batch(maybe, range(3), run=other, progress=False)
    again = await lf.batch(maybe, range(3), run=other, progress=False)
    assert again.totals.resumed == 3 and again.results[1] is None


async def test_classes_the_function_names_are_read_back_without_an_annotation(
    tmp_path: Path,
) -> None:
    async def unannotated(x: int):  # type: ignore[no-untyped-def]
        return Label(item=x, label="u")

    run = tmp_path / "u.sqlite"
    await lf.batch(unannotated, range(3), run=run, progress=False)
    again = await lf.batch(unannotated, range(3), run=run, progress=False)
    assert again.totals.resumed == 3
    assert again.results == [Label(item=i, label="u") for i in range(3)]


TAMPERED = """
import asyncio, sys
import pydantic
import langfx_nb as lf

class Label(pydantic.BaseModel):
    item: int
    label: str

async def label(x: int) -> Label:
    return Label(item=x, label="l")

async def main():
    try:
        r = await lf.batch(label, range(3), run=sys.argv[1], progress=False)
        print("OK", r.totals.resumed, [type(v).__name__ for v in r.results])
    except lf.RunManifestError as exc:
        print("REFUSED", exc)

asyncio.run(main())
"""


@pytest.mark.parametrize("module", ["planted", "unittest.__main__"])
def test_a_manifest_never_makes_the_process_import_a_module(tmp_path: Path, module: str) -> None:
    (tmp_path / "planted.py").write_text(
        "import pathlib\npathlib.Path('IMPORTED').write_text('ran')\nclass Thing: pass\n"
    )
    script = tmp_path / "resume.py"
    script.write_text(TAMPERED)
    run = tmp_path / "t.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, str(script), str(run)]
    made = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert made.stdout.startswith("OK 0"), made.stderr[-2000:]
    _retag(run, f"{module}:Thing")
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert not (tmp_path / "IMPORTED").exists()
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("REFUSED run manifest"), again.stdout + again.stderr[-2000:]
    assert f"class 'Thing' of module '{module}'" in again.stdout
    assert "item 1" in again.stdout
