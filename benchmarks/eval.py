"""``lf.eval.run`` at scale, against ``lf.batch`` of the same task measured in the same run.

    .venv/bin/python benchmarks/eval.py            # 10,000 cases (the target: <= 20 s)
    .venv/bin/python benchmarks/eval.py --quick    # 1,000 cases, a smoke run

The task is a traced query on a fake model (``session.query`` through the trial's view, so
each trial has a real query node with usage); the evaluators are three deterministic ones
(``exact``, ``contains`` and a plain function returning a float). Both runs use a manifest
(``run=``) in a temporary directory, as a resumable evaluation would. Printed: wall time,
per-trial cost of each, their ratio (what the evaluation adds to the batch: the task and
evaluate nodes, three evaluators, per-trial metering and the report), and the time to
aggregate the report once more (metrics and a metadata breakdown).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import langfx_nb as lf
from langfx_nb.llms import Echo

QUICK = "--quick" in sys.argv
N = 1_000 if QUICK else 10_000
LM = Echo()


async def task(text: str, session: lf.Session) -> str:
    return await session.query("{{t}}", lm=LM, vars={"t": text})


def length_ratio(ctx: lf.eval.EvalContext) -> float:
    return min(1.0, len(str(ctx.output)) / max(1, len(str(ctx.expected))))


async def main() -> None:
    cases = [
        lf.eval.Case(
            f"case {i}",
            expected=f"case {i}" if i % 7 else "other",
            id=f"c{i}",
            metadata={"group": f"g{i % 10}"},
        )
        for i in range(N)
    ]
    dataset = lf.eval.Dataset(cases)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = await lf.batch(
            lambda c, s: task(c.inputs, s),
            cases,
            run=Path(tmp) / "batch.sqlite",
            key=lambda c: c.id,
            progress=False,
        )
        batch_s = time.perf_counter() - t0
        assert result.ok
        t0 = time.perf_counter()
        report = await lf.eval.run(
            task,
            dataset,
            [lf.eval.exact, lf.eval.contains, length_ratio],
            run=Path(tmp) / "eval.sqlite",
            progress=False,
        )
        eval_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report.by("group")
        lf.eval.report.aggregate(report.results)
        agg_s = time.perf_counter() - t0
    assert len(report) == N and not report.failed
    exact = report.metrics["exact"]
    print(f"{N} cases, 1 fake query each, 3 deterministic evaluators")
    print(f"lf.batch (same task, baseline): {batch_s:6.2f} s  {batch_s / N * 1e3:6.3f} ms/case")
    print(
        f"lf.eval.run:                    {eval_s:6.2f} s  {eval_s / N * 1e3:6.3f} ms/case "
        f"({eval_s / batch_s:.2f}x the batch; target <= 20 s for 10,000)"
    )
    print(f"aggregates + breakdown by 10 groups: {agg_s * 1e3:.1f} ms")
    print(f"exact: {exact}")


if __name__ == "__main__":
    asyncio.run(main())
