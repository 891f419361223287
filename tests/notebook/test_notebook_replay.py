"""A notebook re-run with the network blocked gives the same outputs, from a SQLite cache
filled by an earlier run: real kernels (nbclient), a real OpenAI-compatible server on
127.0.0.1 for the first run, and nothing listening for the second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from tests.llms.local_server import Reply, local_server
from tests.llms.wire import CITY_SSE


def _notebook(url: str, cache: Path, *, blocked: bool) -> Any:
    cells = [
        "import langfx_nb as lf\n"
        "from pydantic import BaseModel\n"
        f"lf.llms.allow_model_requests({not blocked})\n"
        "class City(BaseModel):\n    name: str\n    landmarks: list[str]\n"
        f"lm = lf.llms.OpenAI('m', api_key='k', base_url={url!r},\n"
        f"                    cache=lf.llms.SQLiteCache({str(cache)!r}))\n"
        "%load_ext langfx_nb",
        "%%lf query --lm lm --stream --schema City -o city\nWhich city?\n",
        "print(repr(city))",
        "%%lf query --lm lm --stream -o text\nSay it plainly.\n",
        "print(repr(text))",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def _printed(nb: Any) -> list[str]:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o["text"])
            elif o.get("output_type") == "error":
                out.append(f"{o['ename']}: {o['evalue']}")
    return out


async def _run(nb: Any) -> Any:
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True)
    await client.async_execute()
    return nb


async def test_notebook_rerun_with_the_network_blocked_gives_the_same_outputs(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache.sqlite"
    async with local_server(Reply.sse(CITY_SSE)) as server:
        url = server.url
        first = await _run(_notebook(url, cache, blocked=False))
        assert len(server.requests) == 2
    printed = _printed(first)
    assert printed == [
        "City(name='Paris', landmarks=['Louvre'])\n",
        "\"City(name='Paris', landmarks=['Louvre'])\"\n",
    ]

    again = await _run(_notebook(url, cache, blocked=True))  # server gone, requests blocked
    assert _printed(again) == printed
