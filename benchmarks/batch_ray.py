"""``benchmarks/batch.py --engine ray``: lf.batch on a local Ray cluster vs the asyncio engine.

    PYTHONPATH=$PWD python benchmarks/batch.py --engine ray [--items 10000] [--cpus 2]
        [--lean-env]

Typed queries on a fake model (no manifest), the same items run in the same process with
``engine=None`` first (the baseline), then with ``engine=lf.engines.Ray(num_cpus=...)``,
which starts its own local cluster and stops it after: the wall time of that call includes
the cluster's start. Per-item overhead = (Ray wall time without the cluster start - asyncio
wall time) / items; the cluster start is timed as the wait until the first result arrives
less the asyncio engine's time per item. CPU seconds are this process's plus those of every
process of the cluster (sampled every 0.1 s while it runs: on a shared machine wall time
measures the neighbours). ``--lean-env`` starts the cluster's processes without
``rfc3987_syntax`` (``tests/batch/ray_env`` first on their ``PYTHONPATH``: an environment of
the user's own, docs/batch.md "Start-up"), which every Ray process otherwise builds a
grammar of at import.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import langfx_nb as lf  # noqa: E402
from benchmarks.batch import label  # noqa: E402
from langfx_nb.llms import StaticResponse  # noqa: E402


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--lean-env", action="store_true")
    args = parser.parse_args(argv)
    if args.lean_env:
        old = os.environ.get("PYTHONPATH")
        lean = str(ROOT / "tests" / "batch" / "ray_env")
        os.environ["PYTHONPATH"] = os.pathsep.join([lean, *([old] if old else [])])
    lm = StaticResponse('{"item": 1, "label": "x"}')
    rows = [{"id": i} for i in range(args.items)]

    async def run(engine: object) -> tuple[float, float, lf.BatchResult]:
        first: list[float] = []
        t = time.perf_counter()

        def progress(p: lf.BatchProgress) -> None:
            if p.done and not first:
                first.append(time.perf_counter() - t)

        result = await lf.batch(
            label, rows, session=lf.Session(lm), engine=engine, progress=progress
        )
        return time.perf_counter() - t, (first or [0.0])[0], result

    local_cpu = time.process_time()
    local_s, _, local = asyncio.run(run(None))
    local_cpu = time.process_time() - local_cpu
    sampler = ClusterCpu()
    driver_cpu = time.process_time()
    ray_s, first_s, spread = asyncio.run(run(lf.engines.Ray(num_cpus=args.cpus)))
    driver_cpu = time.process_time() - driver_cpu
    cluster_cpu = sampler.stop()
    assert spread.results == local.results and spread.ok
    n = args.items
    start_s = first_s  # the cluster's start, its actors, the first chunk
    print(
        f"{n} fake typed queries: asyncio engine {local_s:.2f} s "
        f"({local_s / n * 1e3:.3f} ms/item); Ray engine {ray_s:.2f} s including the cluster "
        f"start on {args.cpus} CPUs (target <= 15 s); first result after {start_s:.2f} s; "
        f"per-item overhead vs asyncio after it {(ray_s - start_s - local_s) / n * 1e3:.3f} "
        "ms (target <= 1 ms)"
    )
    print(
        f"CPU: asyncio engine {local_cpu:.2f} s; Ray engine driver {driver_cpu:.2f} s + cluster "
        f"processes {cluster_cpu:.2f} s (lean environment: {args.lean_env})"
    )


class ClusterCpu:
    """CPU seconds of this process's descendants (the cluster), sampled in a thread."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.done.wait(0.1):
            for child in me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    t = child.cpu_times()
                    self.seen[child.pid] = max(self.seen.get(child.pid, 0.0), t.user + t.system)

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return sum(self.seen.values())


if __name__ == "__main__":
    main(sys.argv[1:])
