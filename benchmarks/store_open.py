"""Opening a batch's trace from its run manifest (``TraceExplorer(run_path)``'s index): the
first open (every record parsed, the index sidecar written), an open with the sidecar, and
an index of the first records only (``limit=``), each in a fresh process, against the
issue's targets (1,000,000 nodes interactive in ≤ 2 s, kernel memory ≤ 500 MB).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/store_open.py [--items 250000]
        [--manifest PATH] [--limit 20000]

The manifest is ``lf.batch`` of ``--items`` typed queries on a fake model (two trace nodes an
item: the item and its query; 250,000 items ≈ 500,000 nodes, 534 MB, ~45 s to make on 2
cores); with ``--manifest`` an existing one is used (made at that path if missing, and
kept). Reported per open: wall and CPU seconds of the open alone (imports excluded), RSS after
it and its peak, and the 1-minute load average before and after (wall time on a shared
machine measures the neighbours too: read CPU time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_S = 2.0
TARGET_MB = 500

OPEN = """
import resource, sys, time
from langfx_nb.notebook.trace_store import open_store_index
limit = int(sys.argv[2]) if sys.argv[2] != "-" else None
t, c = time.perf_counter(), time.process_time()
index = open_store_index(sys.argv[1], **({} if limit is None else {'limit': limit}))
wall, cpu = time.perf_counter() - t, time.process_time() - c
rss = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
index.record(index.ids[len(index) // 2])  # a detail read back through the rowid table
detail = time.perf_counter() - t
print(len(index), wall, cpu, rss, peak, detail)
"""


def make_manifest(path: Path, items: int) -> None:
    import langfx_nb as lf
    from benchmarks.batch import label
    from langfx_nb.llms import StaticResponse

    lm = StaticResponse('{"item": 1, "label": "x"}')
    rows = [{"id": i} for i in range(items)]
    t = time.perf_counter()
    run = lf.batch(
        label, rows, session=lf.Session(lm), run=path, progress=False, max_concurrency=16
    )
    asyncio.run(run)
    size = path.stat().st_size / 2**20
    print(f"made {path} ({items:,} items, {size:.0f} MB) in {time.perf_counter() - t:.0f} s")


def open_once(path: Path, limit: int | None) -> dict[str, float]:
    load = os.getloadavg()[0]
    done = subprocess.run(
        [sys.executable, "-c", OPEN, str(path), "-" if limit is None else str(limit)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    nodes, wall, cpu, rss, peak, detail = map(float, done.stdout.split())
    return {
        "nodes": nodes,
        "wall": wall,
        "cpu": cpu,
        "rss": rss,
        "peak": peak,
        "detail_ms": detail * 1000,
        "load": load,
        "load_after": os.getloadavg()[0],
    }


def report(what: str, r: dict[str, float], *, targets: bool = True) -> None:
    line = (
        f"  {what:<34} {r['nodes']:>9,.0f} nodes  {r['wall']:6.2f} s wall  {r['cpu']:6.2f} s CPU"
        f"  RSS {r['rss']:4.0f} MB (peak {r['peak']:4.0f})  detail {r['detail_ms']:5.1f} ms"
        f"  load {r['load']:.1f}→{r['load_after']:.1f}"
    )
    if targets:
        met = r["wall"] <= TARGET_S and r["peak"] <= TARGET_MB
        line += f"  {'meets' if met else 'MISSES'} ≤ {TARGET_S:.0f} s / ≤ {TARGET_MB} MB"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=250_000)
    parser.add_argument("--manifest", type=Path, help="use (or make and keep) this manifest")
    parser.add_argument("--limit", type=int, default=20_000, help="records of the prefix open")
    args = parser.parse_args()
    from langfx_nb.notebook.trace_file import SIDECAR_SUFFIX

    with tempfile.TemporaryDirectory() as tmp:
        path = args.manifest or Path(tmp) / "run.sqlite"
        if not path.exists():
            make_manifest(path, args.items)
        sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
        sidecar.unlink(missing_ok=True)
        size = path.stat().st_size / 2**20
        print(f"{path} ({size:.0f} MB), each open in a fresh process:")
        report("first open (parses, writes sidecar)", open_once(path, None))
        side = sidecar.stat().st_size / 2**20 if sidecar.exists() else 0.0
        report(f"with its sidecar ({side:.0f} MB)", open_once(path, None))
        report(f"first {args.limit:,} records (limit=)", open_once(path, args.limit))


if __name__ == "__main__":
    main()
