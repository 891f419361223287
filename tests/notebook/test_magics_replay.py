"""A ``%%lf query --stream`` cell re-run against a SQLite cache filled by an earlier run
gives the same value without a single model request."""

from __future__ import annotations

from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import SQLiteCache

from ._ipython import lf_shell, run


class City(BaseModel):
    name: str
    landmarks: list[str]


ANSWER = "```python\nCity(name='Paris', landmarks=['Louvre'])\n```"


def _rerun(ip: InteractiveShell, path: Path, cell: str) -> tuple[object, object, int]:
    """Run ``cell`` (which stores its answer with ``-o ans``) with a fresh cache, then again
    with a new model of the same identity on the same cache file."""
    first = lf.llms.StaticResponse(ANSWER, chunk_size=4, cache=SQLiteCache(path))
    ip.user_ns.update(lm=first, City=City)
    run(ip, cell)
    value = ip.user_ns.pop("ans")
    again = lf.llms.StaticResponse(ANSWER, chunk_size=4, cache=SQLiteCache(path))
    ip.user_ns["lm"] = again
    run(ip, cell)
    return value, ip.user_ns.pop("ans"), again.num_requests


def test_streamed_query_cell_replays_from_the_cache(tmp_path: Path) -> None:
    ip = lf_shell()
    try:
        cell = "%%lf query --lm lm --stream --schema City -o ans\nParis?\n"
        value, replayed, requests = _rerun(ip, tmp_path / "c.sqlite", cell)
        assert value == City(name="Paris", landmarks=["Louvre"])
        assert replayed == value and requests == 0
        text_cell = "%%lf query --lm lm --stream -o ans\nParis?\n"
        value, replayed, requests = _rerun(ip, tmp_path / "t.sqlite", text_cell)
        assert replayed == value == ANSWER and requests == 0
    finally:
        for name in ("lm", "City", "ans"):
            ip.user_ns.pop(name, None)
