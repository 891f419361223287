"""Kernel memory of a large saved trace's index, by the text of its prompts (issue #26).

A Python ``str`` takes 1, 2 or 4 bytes per character for the whole string, by its widest
character, so the index's row and search texts of 1,000,000 nodes may cost 1x, 2x or 4x
depending on one character somewhere. For each hint text below, a trace of that many nodes
(``tests/trace_gen.py``: session → batch → items with a query, a tool call and a log) is
opened the way ``TraceExplorer(path)`` opens it (``open_index``), each step in a fresh
process: the first open of the file as written (parses it, writes the sidecar), an open with
the sidecar, and ``lf.nb.save_trace`` of the same data then the first open of that copy.
Printed per step: the process's RSS after the open (``/proc/self/statm``; what the kernel
keeps) and its peak (``VmHWM``), against the 500 MB target, and the open time. After the
sidecar open, the search step (``TraceIndex.window(query=...)``, match cache cleared) is timed
for a few queries, 5 runs each: p95 of the selective ones (a few hundred matches or none, as
the browser benchmark's "boom k" filters) against the 100 ms target, and each query's p50
(``"question"`` and ``"東京"`` match 250,000 nodes: their time is mostly marking ancestors).

Hint texts: ``ascii`` (as before: "question number 17"), ``cjk`` (every prompt has Latin-1,
an em dash and CJK), ``emoji`` (ASCII, one emoji per 1,000 nodes), ``long`` (ASCII prompts
longer than a row shows: each hint at its cap, ``HINT_CHARS``), ``longcjk`` (CJK prompts at
the cap: the widest realistic text per node).

Run: ``.venv/bin/python benchmarks/trace_memory.py`` (several minutes at 1,000,000 nodes on
2 cores). ``--nodes``, ``--cases ascii,emoji``; ``--baseline DIR`` also runs every step with
the package from ``DIR`` (e.g. ``git archive main | tar -x -C DIR``), alternating with this
checkout, so before and after are measured in the same run under the same load. Times depend
on the machine's load (printed from ``uptime``); RSS does not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.trace_gen import write_big_trace  # noqa: E402

TARGET_MB = 500
SEARCH_P95_MS = 100
_LONG = " please summarise the report on the weather in the following cities and compare" * 4
CASES: dict[str, Callable[[int], str] | None] = {
    "ascii": None,
    "cjk": lambda i: f"café — 東京の天気は？ question {i}",
    "emoji": lambda i: f"question number {i}" + (" 🙂" if i % 1000 == 1 else ""),
    "long": lambda i: f"question number {i}:{_LONG}",
    "longcjk": lambda i: f"質問{i}：" + "東京の天気はどうですか、明日は雨が降りますか。" * 8,
}
QUERIES = ("question", "4241 ", "boom 9", "東京", "🙂", "no such text")
SELECTIVE = ("4241 ", "boom 9", "no such text")

# One open in a fresh process: open time, RSS after, peak RSS (MB), then search times (ms).
OPEN = """
import json, sys, time
from langfx_nb.notebook.trace_file import open_index
t = time.perf_counter()
index = open_index(sys.argv[1])
ms = (time.perf_counter() - t) * 1000
rss = int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
status = open('/proc/self/status').read()
peak = int(status.split('VmHWM:')[1].split()[0]) / 1024  # ru_maxrss outlives exec
out = {"open_ms": ms, "rss_mb": rss, "peak_mb": peak, "search_ms": {}}
for q in sys.argv[3:] if sys.argv[2] == "search" else ():
    times = out["search_ms"][q] = []
    for _ in range(5):
        index._match_cache = None
        t = time.perf_counter()
        window = index.window(query=q, count=200)
        times.append((time.perf_counter() - t) * 1000)
    out.setdefault("matches", {})[q] = window["matches"]
index.close()
print(json.dumps(out))
"""
# lf.nb.save_trace of the trace's data, to a copy (trace file and sidecar).
SAVE = """
import gc, json, sys, time
from pathlib import Path
from langfx_nb.notebook.trace_file import save_trace
gc.disable()
data = json.loads(Path(sys.argv[1]).read_bytes())
gc.enable()
t = time.perf_counter()
save_trace(data, sys.argv[2])
print(json.dumps({"save_ms": (time.perf_counter() - t) * 1000}))
"""


def run(code: Path, script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(code)},
        cwd=code,
    )
    return json.loads(done.stdout)


def opens(code: Path, trace: Path, work: Path) -> dict:
    """The three opens of ``trace`` (copied into ``work``) with the package in ``code``."""
    path = work / "t.json"
    shutil.copyfile(trace, path)
    out = {"first": run(code, OPEN, str(path), "-")}
    out["sidecar"] = run(code, OPEN, str(path), "search", *QUERIES)
    saved = work / "saved.json"
    out["save"] = run(code, SAVE, str(path), str(saved))
    out["saved"] = run(code, OPEN, str(saved), "-")
    for name in work.iterdir():
        name.unlink()
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(case: str, label: str, r: dict) -> bool:
    times = [t for q in SELECTIVE for t in r["sidecar"]["search_ms"][q]]
    p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1]
    worst = max(r[k]["rss_mb"] for k in ("first", "sidecar", "saved"))
    ok = worst <= TARGET_MB and p95 <= SEARCH_P95_MS
    print(
        f"  {case:8} {label:9} RSS first open {r['first']['rss_mb']:4.0f} MB "
        f"(peak {r['first']['peak_mb']:4.0f}, {r['first']['open_ms'] / 1000:5.1f} s), "
        f"sidecar open {r['sidecar']['rss_mb']:4.0f} MB "
        f"(peak {r['sidecar']['peak_mb']:4.0f}, {r['sidecar']['open_ms'] / 1000:4.1f} s), "
        f"save_trace {r['save']['save_ms'] / 1000:4.1f} s then open "
        f"{r['saved']['rss_mb']:4.0f} MB (peak {r['saved']['peak_mb']:4.0f}); "
        f"selective search p50 {p50:.0f} ms p95 {p95:.0f} ms; "
        f"{'OK' if ok else 'OVER'} (≤ {TARGET_MB} MB, p95 ≤ {SEARCH_P95_MS} ms)",
        flush=True,
    )
    per_query = ", ".join(
        f"{q!r} {r['sidecar']['matches'][q]:,} hits p50 {statistics.median(ts):.0f} ms"
        for q, ts in r["sidecar"]["search_ms"].items()
    )
    print(f"  {'':8} {'':9} {per_query}", flush=True)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with (before)")
    args = parser.parse_args()
    codes = [("this", ROOT)]
    if args.baseline:
        codes.insert(0, ("baseline", args.baseline.resolve()))
    print(f"{args.nodes:,} nodes; load average {load()}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        trace, work = Path(tmp) / "trace.json", Path(tmp) / "work"
        work.mkdir()
        for case in args.cases.split(","):
            write_big_trace(trace, args.nodes, deep=60, prompt=CASES[case])
            for label, code in codes:
                r = opens(code, trace, work)
                if report(case, label, r) is False and label == "this":
                    ok = False
            if len(codes) == 2:
                print(f"  {'':8} load average {load()}", flush=True)
    print(f"load average {load()}; all within target: {ok}")


if __name__ == "__main__":
    main()
