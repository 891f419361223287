"""Interrupting a cell that awaits ``lf.batch``: the cell shows one line saying what finished
and what is lost, not a traceback through asyncio; the cancellation still propagates."""

from __future__ import annotations

import pytest

from ._ipython import lf_shell, run

CELL = """
cell = asyncio.current_task()

async def fn(x):
    if x == 3:
        cell.cancel()  # what Kernel › Interrupt does to the running cell
        await asyncio.Event().wait()
    return x

await lf.batch(fn, range(10), max_concurrency=1, progress=BatchView())
after = "not reached"
"""


def test_an_interrupted_batch_cell_says_in_one_line_what_was_lost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ip = lf_shell()
    run(ip, "import asyncio\nimport langfx_nb as lf\nfrom langfx_nb.notebook import BatchView")
    capsys.readouterr()
    result = ip.run_cell(CELL)
    assert type(result.error_in_exec).__name__ == "CancelledError"
    assert "after" not in ip.user_ns  # cancellation propagated: the cell stopped there
    shown = capsys.readouterr()
    lines = [line for line in (shown.out + shown.err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "CancelledError" in lines[0]
    assert lines[0].endswith(
        "lf.batch stopped with 3 of 10 items finished (7 not run);"
        " without run= their results are lost (pass run='name' to keep them)"
    )
