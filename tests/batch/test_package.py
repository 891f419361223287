"""``lf.batch`` is the function to call and the package to import parts from."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import langfx_nb as lf


def test_submodules_import_by_their_dotted_name() -> None:
    code = (
        "import langfx_nb.batch.progress\n"
        "import langfx_nb.batch.result as r\n"
        "import langfx_nb as lf\n"
        "assert langfx_nb.batch.progress.BatchProgress is lf.batch.progress.BatchProgress\n"
        "assert r.BatchResult is lf.BatchResult\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


async def test_lf_batch_is_still_the_call() -> None:
    async def double(x: int) -> int:
        return 2 * x

    result = await lf.batch(double, [1, 2], progress=False)
    assert result.results == [2, 4]
    assert lf.batch is importlib.import_module("langfx_nb.batch")
    assert list(inspect.signature(lf.batch).parameters)[:2] == ["fn", "items"]
