"""A child process of test_run: an evaluation that blocks on some cases until killed.

argv: manifest path, log path; LFX_EVAL_BLOCK=1 in the environment blocks. Every task call
appends its case id to the log (flushed), so the parent sees exactly which cases a process
ran.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import langfx_nb as lf

FAST = 12  # cases 0..FAST-1 answer at once; with "block" the others wait until killed


async def main() -> None:
    manifest, log_path = sys.argv[1:3]
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - lives until the kill
    ds = lf.eval.Dataset(
        [lf.eval.Case(i, expected=i * 2, id=f"c{i}", metadata={"odd": i % 2}) for i in range(30)]
    )

    async def double(x: int) -> int:
        log.write(f"c{x}\n")
        log.flush()
        # read at run time, not captured: a changed closure value would be another task
        if os.environ.get("LFX_EVAL_BLOCK") and x >= FAST:
            await asyncio.Event().wait()
        return x * 2 if x % 5 else x * 2 + 1

    report = await lf.eval.run(
        double, ds, [lf.eval.exact], run=manifest, max_concurrency=4, progress=False
    )
    print(
        json.dumps(
            {
                "resumed": sum(r.resumed for r in report),
                "exact": report.metrics["exact"].value,
                "n": report.metrics["exact"].n,
                "ids": [r.case.id for r in report],
            }
        )
    )


asyncio.run(main())
