"""A live batch shown by a TraceExplorer: widget messages a second, bytes sent, kernel CPU.

Runs ``lf.batch`` of ``--items`` items (each item one action) on a real event loop, with
every comm message the explorer sends counted (a stand-in comm: what the kernel would put on
the wire), in separate processes:

- ``none``: no explorer (the batch's own cost),
- ``explorer``: this checkout's explorer,
- ``explorer@BASE``: the explorer of another checkout (``--base /work/main``), same run.

Prints, per variant: kernel CPU seconds (``time.process_time``), messages, the most in any
one second, MB sent, whether the last window's counts by kind equal every node the session
made (``None``: no windows, as when every node is sent), and peak RSS.

    python benchmarks/trace_live.py --items 100000 --base /work/main
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _size(data: Any, buffers: Any) -> int:
    n = len(json.dumps(data, default=str))
    for b in buffers or ():
        n += len(bytes(b))
    return n


async def _run(items: int, explorer_on: bool) -> dict[str, Any]:
    import langfx_nb as lf
    from langfx_nb.agentic.session import Session

    session = Session()
    sent: list[tuple[float, int, str]] = []
    last: dict[str, Any] = {}
    explorer = None
    if explorer_on:
        from langfx_nb.notebook.trace_explorer import TraceExplorer

        explorer = TraceExplorer(session)

        class Comm:
            comm_id = "bench"
            kernel = object()

            def send(self, data: Any = None, buffers: Any = None, **_kw: Any) -> None:
                kind = data.get("content", {}).get("kind", "") if isinstance(data, dict) else ""
                if kind == "window":
                    last["window"] = data["content"]
                sent.append((time.monotonic(), _size(data, buffers), kind or "state"))

            def on_msg(self, *_a: Any, **_k: Any) -> None:
                pass

            def close(self, *_a: Any, **_k: Any) -> None:
                pass

        explorer.comm = Comm()

    async def work(item: int, view: Any) -> int:
        with view.track("action", "work"):
            pass
        return item

    cpu = time.process_time()
    wall = time.monotonic()
    await lf.batch(work, range(items), session=session, progress=False)
    if explorer is not None:
        explorer.flush()
    cpu = time.process_time() - cpu
    wall = time.monotonic() - wall
    await asyncio.sleep(1.5)  # the last pushes
    times = [t for t, _n, _k in sent]
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    exact = None
    if "window" in last:  # the last window's counts against every node the session made
        made: dict[str, int] = {}
        store = session.trace_store
        for kind, statuses in store.counts.items():
            made[kind] = made.get(kind, 0) + sum(statuses.values())
        for node in store.nodes.values():
            if node.status in ("running", "waiting"):
                made[node.kind] = made.get(node.kind, 0) + 1
        exact = last["window"]["counts"]["kind"] == made
    kinds: dict[str, int] = {}
    for _t, _n, k in sent:
        kinds[k] = kinds.get(k, 0) + 1
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "messages": len(sent),
        "max_per_s": most,
        "mb": sum(n for _t, n, _k in sent) / 1e6,
        "kinds": kinds,
        "counts_exact": exact,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _child(items: int, explorer_on: bool) -> None:
    print(json.dumps(asyncio.run(_run(items, explorer_on))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--base", default="", help="another checkout to compare with")
    parser.add_argument("--child", choices=["none", "explorer"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.items, args.child == "explorer")
        return
    variants = [("none", str(ROOT)), ("explorer", str(ROOT))]
    if args.base:
        variants.append((f"explorer@{args.base}", args.base))
    print(f"load {os.getloadavg()[0]:.1f}  items {args.items:,}")
    results = {}
    for name, path in variants:
        child = "none" if name == "none" else "explorer"
        out = subprocess.run(
            [sys.executable, __file__, "--items", str(args.items), "--child", child],
            env={**os.environ, "PYTHONPATH": path},
            capture_output=True,
            text=True,
            check=True,
        )
        r = results[name] = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"  {name:24} cpu {r['cpu_s']:6.1f} s  wall {r['wall_s']:6.1f} s  "
            f"messages {r['messages']:5}  max/s {r['max_per_s']:3}  sent {r['mb']:8.1f} MB  "
            f"rss {r['rss_mb']:5.0f} MB  "
            f"last window's counts = session's: {r['counts_exact']}  {r['kinds']}"
        )
    base = results["none"]["cpu_s"]
    for name, r in results.items():
        if name != "none":
            print(f"  {name}: kernel CPU ×{r['cpu_s'] / base:.2f} of the batch alone")
    print(f"  load after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
