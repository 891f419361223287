"""Widgets measured in a real JupyterLab + Debian chromium (headless).

1. Live throughput: a cell emits trace events through a real ``lf.Session`` (``session.log``,
   2,000 events/s for 10 s) while a ``TraceExplorer`` watches it; the page follows the newest
   rows (kept scrolled to the bottom, as a reader pressing End). The kernel notes each log
   node's emit time (``time.time()``, by node id); in the page, each frame and each draw of the
   explorer note the rows on screen (inside the tree's scroll box) and when (``Date.now()``,
   same host clock). Figures: event → its row on screen (rows that scrolled past between two
   frames are never on screen: counted, not timed), event → counted in the summary on screen
   (every event), and loss (the node count shown vs. emitted). What the kernel sent is counted
   at the widget's comm (every message and its bytes, buffers included): window pushes
   (live), state copies, the rest. Also checked: the cell finishes (no ``[*]``).
   Baseline in the same run: the same emission loop with no explorer attached (kernel-side
   cost of watching = ratio of the two loop durations).
2. Saved trace: a 10,000-node trace JSON is opened with ``TraceExplorer(path)``; we time from
   "run cell" to the first rows (and timeline bars) on screen (polled every animation frame),
   then a click on a caret is dispatched in the page and we time the frame that shows the
   collapsed row, then (timeline shown) a click on a bar and the frame that shows its node
   selected — the "interactive" point. Measured with the timeline column (the default view)
   and without it (tree only). Baseline: the same for a 10-node trace (the fixed cost of any
   cell that displays a widget).

3. Batch scale (``--big 100000,1000000``): a trace of that many nodes
   (``tests/trace_gen.py``: session → batch → items with a query, a tool call and a log, plus a
   60-deep chain) written as JSON, stored with ``lf.save_trace`` and opened with
   ``TraceExplorer(path)`` of the store, shown through windows. Measured: the kernel's open
   time and memory (RSS of the kernel process after opening), run cell → rows on screen, run
   cell → interactive (a caret click answered), then 20 steps each of expand (a caret of the
   deep chain), scroll (a jump to a random place: rows on screen again) and search (a filter
   typed: the exact match count shown), from the page's action to the frame that shows the
   result (p50/p95), and the page's JS heap (``performance.memory``) after. Before that, in
   processes of their own: ``TraceExplorer`` of the JSON file (converted), ``lf.save_trace``
   of it into a store, and ``TraceExplorer`` of the store.

Run: ``.venv/bin/python benchmarks/widgets_browser.py`` (takes ~1 minute; starts and stops its
own JupyterLab on 127.0.0.1). ``--rate`` / ``--seconds`` / ``--nodes`` change the load;
``--big 100000,1000000`` runs only part 3 (several minutes at 1,000,000 on 2 cores; with
``--nodelay`` its server's kernel websockets have Nagle's algorithm off, see
``langfx_nb/notebook/server.py``; a stock server adds ~44 ms to most round trips); with
``--kernel-only`` only its kernel side, each step in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.local import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.trace_gen import write_big_trace  # noqa: E402
from tests.ui.conftest import Lab, LabServer  # noqa: E402

# The page follows the newest rows and notes when each row is first on screen (the rows drawn
# inside the tree's scroll box), and each draw's node count (the summary's "N nodes").
HOOK = """() => {
  const b = window.__lfxBench = {seen: {}, draws: []};
  const onScreen = (now) => {
    const scroll = document.querySelector('.lfx-te-scroll');
    if (!scroll) return null;
    const top = scroll.scrollTop, bottom = top + scroll.clientHeight;
    for (const r of scroll.querySelectorAll('.lfx-te-row[data-id]')) {
      if (r.style.display === 'none' || r.offsetTop + r.offsetHeight <= top
          || r.offsetTop >= bottom || r.dataset.id in b.seen) continue;
      b.seen[r.dataset.id] = now;
    }
    return scroll;
  };
  window.__lfxTraceHook = ({renderedAt, nodes}) => {
    b.draws.push([renderedAt, nodes]);
    onScreen(renderedAt);
  };
  const follow = () => {
    const scroll = onScreen(Date.now());
    if (scroll && scroll.scrollTop < scroll.scrollHeight - scroll.clientHeight - 1) {
      scroll.scrollTop = scroll.scrollHeight;  // the view asks for the rows now at the bottom
    }
    requestAnimationFrame(follow);
  };
  requestAnimationFrame(follow);
}"""

LIVE_SETUP = """
import asyncio, json, time
import langfx_nb as lf
from langfx_nb.notebook.trace_explorer import TraceExplorer

async def emit(session, rate, seconds, times=None):
    total = int(rate * seconds)
    step = 0.01  # emit in 10 ms slices, yielding to the loop in between
    per = max(1, int(rate * step))
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        for _ in range(min(per, total - sent)):
            t = time.time() * 1000
            node = session.log("info", "tick", i=sent)
            if times is not None:
                times[node.id] = t
            sent += 1
        delay = t0 + sent / rate - time.monotonic()
        await asyncio.sleep(max(0.0, delay))
    return sent, time.monotonic() - t0

def count_sent(widget):
    # every message the widget's comm sends and its bytes (JSON and buffers), as window
    # pushes / state copies / other
    counts = {"window": [0, 0], "state": [0, 0], "other": [0, 0]}
    send = widget.comm.send
    def counted(data=None, metadata=None, buffers=None):
        content = (data or {}).get("content") or {}
        kind = ("state" if (data or {}).get("method") == "update"
                else "window" if isinstance(content, dict) and content.get("kind") == "window"
                else "other")
        counts[kind][0] += 1
        counts[kind][1] += len(json.dumps(data, default=str)) + sum(
            memoryview(b).nbytes for b in buffers or ())
        return send(data=data, metadata=metadata, buffers=buffers)
    widget.comm.send = counted
    return counts
"""


def notebook(cells: list[str]) -> str:
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {},
                    "outputs": [],
                    "source": textwrap.dedent(c).strip(),
                }
                for c in cells
            ],
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def run_cell_nowait(lab: Lab, index: int) -> None:
    lab.page.evaluate(
        """(i) => { const nb = window.jupyterapp.shell.currentWidget.content;
                    nb.activeCellIndex = i;
                    window.jupyterapp.commands.execute('notebook:run-cell'); return true; }""",
        index,
    )


def cell_done(lab: Lab, index: int, timeout_ms: int = 120_000) -> None:
    lab.page.wait_for_function(
        """(i) => { const c = window.jupyterapp.shell.currentWidget.content.widgets[i];
                    const p = c.node.querySelector('.jp-InputArea-prompt').textContent;
                    return /\\[\\d+\\]/.test(p); }""",
        arg=index,
        timeout=timeout_ms,
    )


def big_trace(n: int) -> dict[str, Any]:
    """A realistic nested trace: session → actions → queries/tool calls/logs."""
    nodes: list[dict[str, Any]] = [
        {
            "id": "0",
            "parent_id": None,
            "kind": "session",
            "name": "session",
            "status": "ok",
            "start": 0.0,
            "end": float(n),
        }
    ]
    kinds = ["query", "tool_call", "log", "query"]
    action = "0"
    for i in range(1, n):
        if i % 100 == 1:
            action = str(i)
            nodes.append(
                {
                    "id": action,
                    "parent_id": "0",
                    "kind": "action",
                    "name": f"Agent {i // 100}",
                    "status": "ok",
                    "start": float(i),
                    "end": float(i + 99),
                }
            )
            continue
        kind = kinds[i % 4]
        node = {
            "id": str(i),
            "parent_id": action,
            "kind": kind,
            "name": f"{kind} {i}",
            "status": "failed" if i % 97 == 0 else "ok",
            "start": float(i),
            "end": i + 0.25,
            "inputs": {"prompt": f"question number {i} " * 3},
            "outputs": {"text": f"answer {i}"},
        }
        if kind == "query":
            node["usage"] = {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
        if i % 97 == 0:
            node["error"] = {"type": "ToolExecutionError", "message": f"tool failed on {i}"}
        nodes.append(node)
    return {"format": "langfx_nb.trace", "version": 1, "session": {"id": "bench"}, "nodes": nodes}


def first_at(draws: list[list[float]], emitted: list[float]) -> list[float]:
    """Per event (emit times in order), the time of the first draw whose node count (the
    session root and the logs) included it, minus its emit time."""
    out: list[float] = []
    draws = sorted(draws)
    d = 0
    for k, t in enumerate(emitted):
        while d < len(draws) and draws[d][1] - 1 < k + 1:
            d += 1
        if d == len(draws):
            break
        out.append(draws[d][0] - t)
    return out


def live(lab: Lab, rate: int, seconds: float) -> dict[str, Any]:
    cells = [
        LIVE_SETUP,
        f"""
baseline_session = lf.Session()
sent0, took0 = await emit(baseline_session, {rate}, {seconds})
print(f"BASELINE {{sent0}} {{took0:.3f}}")
""",
        """
session = lf.Session(max_trace_nodes=1000)
explorer = TraceExplorer(session, title="benchmark")
explorer
""",
        f"""
counts = count_sent(explorer)
times = {{}}
sent, took = await emit(session, {rate}, {seconds}, times)
explorer.flush()
with open("bench_live_times.json", "w") as f:
    json.dump(times, f)
print(f"EMITTED {{sent}} {{took:.3f}}")
""",
        "print('SENT', json.dumps(counts))",
    ]
    (lab.server.root / "bench_live.ipynb").write_text(notebook(cells))
    lab.open("bench_live.ipynb")
    lab.page.evaluate(HOOK)
    for i in range(3):
        run_cell_nowait(lab, i)
        cell_done(lab, i)
    try:
        lab.page.wait_for_selector(".lfx-te-row", timeout=60_000)
    except Exception:
        lab.screenshot("bench-live-no-rows")
        print(
            "\n".join(lab.console[-20:]),
            lab.page.evaluate(
                "() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                ".map(e => e.innerText.slice(0, 500))"
            ),
        )
        raise
    run_cell_nowait(lab, 3)
    cell_done(lab, 3, timeout_ms=int(seconds * 1000) + 120_000)
    total = int(rate * seconds)
    shown = "() => Math.max(0, ...window.__lfxBench.draws.map(d => d[1] - 1))"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and lab.page.evaluate(shown) < total:
        time.sleep(0.2)
    lab.page.wait_for_timeout(500)  # the last rows' frame
    run_cell_nowait(lab, 4)
    cell_done(lab, 4)
    bench = lab.page.evaluate("() => window.__lfxBench")
    base_out = lab.output_text(1)
    out = lab.output_text(3)
    sent = json.loads(lab.output_text(4).split("SENT", 1)[1])
    stuck = "*" in lab.cell(3).locator(".jp-InputArea-prompt").inner_text()
    lab.screenshot("bench-live")
    times: dict[str, float] = json.loads((lab.server.root / "bench_live_times.json").read_text())
    rows = sorted(bench["seen"][i] - t for i, t in times.items() if i in bench["seen"])
    counted = sorted(first_at(bench["draws"], sorted(times.values())))
    return {
        "emitted": int(out.split("EMITTED")[1].split()[0]),
        "received": lab.page.evaluate(shown),
        "sent": sent,
        "frames": len(bench["draws"]),
        "rows": rows,
        "counted": counted,
        "took": float(out.split("EMITTED")[1].split()[1]),
        "base_took": float(base_out.split("BASELINE")[1].split()[1]),
        "cell_stuck": stuck,
    }


def open_trace(lab: Lab, name: str, nodes: int, *, timeline: bool = True) -> dict[str, Any]:
    """Open a saved trace; with ``timeline`` the waterfall column is drawn too (the default
    view), without it the plain tree (the reader switched the column off)."""
    path = lab.server.root / f"{name}.json"
    path.write_text(json.dumps(big_trace(nodes)))
    hide = "" if timeline else "explorer.view_state = {'view': {'timeline': False}}\n"
    cells = [
        "import time\nfrom IPython.display import display\n"
        "from langfx_nb.notebook.trace_explorer import TraceExplorer",
        "t_start = time.time() * 1000\n"
        f"explorer = TraceExplorer({path.name!r}, title={name!r})\n"
        f"{hide}"
        "t_built = time.time() * 1000\n"
        "display(explorer)\n"
        "print(f'KERNEL {t_start:.0f} {t_built:.0f} {time.time() * 1000:.0f}')",
    ]
    (lab.server.root / f"{name}.ipynb").write_text(notebook(cells))
    lab.open(f"{name}.ipynb")
    lab.page.evaluate("() => { window.__lfxTimings = []; }")
    run_cell_nowait(lab, 0)
    cell_done(lab, 0)
    lab.page.wait_for_timeout(300)
    t0 = lab.page.evaluate("() => Date.now()")
    run_cell_nowait(lab, 1)
    lab.page.wait_for_function(
        "([n, tl]) => { const s = document.querySelector('.lfx-te-summary');"
        " return document.querySelectorAll('.lfx-te-row').length > 0"
        " && (!tl || document.querySelectorAll('.lfx-te-bar-tl').length > 0)"
        " && s && s.textContent.startsWith(n + ' nodes'); }",
        arg=[nodes, timeline],
        timeout=60_000,
    )
    t_rows = lab.page.evaluate("() => Date.now()")
    # interactive: the first action's caret is clicked in the page (no harness round trip) and
    # we wait for the frame that shows it collapsed; with the timeline, a click on a node's
    # bar must then select it
    t_click = lab.page.evaluate(
        """async (tl) => {
            const row = (id) => document.querySelector(`.lfx-te-row[data-id="${id}"]`);
            const before = row("1").getAttribute('aria-expanded');
            row("1").querySelector('.lfx-te-caret').click();
            let done = false;
            for (let i = 0; i < 600 && !done; i++) {
                await new Promise(r => requestAnimationFrame(r));
                done = !!row("1") && row("1").getAttribute('aria-expanded') !== before;
            }
            if (!done) throw new Error('the click was not answered');
            if (!tl) return Date.now();
            row("0").querySelector('.lfx-te-bar-tl').click();
            for (let i = 0; i < 600; i++) {
                await new Promise(r => requestAnimationFrame(r));
                if (row("0") && row("0").classList.contains('lfx-sel')) return Date.now();
            }
            throw new Error('the click on a timeline bar did not select its node');
        }""",
        timeline,
    )
    timings = lab.page.evaluate("() => window.__lfxTimings")
    lab.screenshot(f"bench-{name}")
    first: dict[str, float] = {}
    for label, ms in timings:  # the first occurrence of each step = the initial render
        first.setdefault(label, ms - t0 if label.startswith("@") else ms)
    k_start, k_built, k_shown = (
        float(x) for x in lab.output_text(1).split("KERNEL")[1].split()[:3]
    )
    first = {
        "@kernel starts": k_start - t0,
        "@kernel built": k_built - t0,
        "@kernel displayed": k_shown - t0,
        **first,
    }
    return {"rows_ms": t_rows - t0, "interactive_ms": t_click - t0, "js": first}


STEPS = r"""async ([kind, n, k0]) => {
    const frame = () => new Promise(r => requestAnimationFrame(r));
    const until = async (ok) => {
        for (let i = 0; i < 3000; i++) { await frame(); if (ok()) return true; }
        return false;
    };
    const scroll = document.querySelector('.lfx-te-scroll');
    const filter = document.querySelector('.lfx-te-filter');
    const summary = () => document.querySelector('.lfx-te-summary').textContent;
    const row = (id) => document.querySelector(`.lfx-te-row[data-id="${id}"]`);
    const out = [];
    for (let k = k0 || 0; k < (k0 || 0) + n; k++) {
        const t0 = performance.now();
        if (kind === 'expand') {
            const id = `d${k}`;
            const before = row(id).getAttribute('aria-expanded');
            row(id).querySelector('.lfx-te-caret').click();
            if (!await until(() => row(id) && row(id).getAttribute('aria-expanded') !== before
                        && (before === 'true' || row(`d${k + 1}`)))) { out.push(-1); continue; }
        } else if (kind === 'scroll') {
            const max = scroll.scrollHeight - scroll.clientHeight;
            scroll.scrollTop = Math.floor(((k * 7919) % 1000) / 1000 * max);
            scroll.dispatchEvent(new Event('scroll'));
            const top = Math.floor(scroll.scrollTop / 22);
            if (!await until(() => [...document.querySelectorAll('.lfx-te-row')].some(
                r => r.dataset.id && r.style.display !== 'none'
                     && Math.abs(r.offsetTop / 22 - top) < 2))) {
                out.push(-1);
                continue;
            }
        } else {
            const q = k % 2 ? '' : `boom ${k}`;
            filter.value = q;
            filter.dispatchEvent(new Event('input'));
            // the view waits 120 ms for typing to pause: measured from that point
            await new Promise(r => setTimeout(r, 121));
            const t1 = performance.now();
            if (!await until(() => q ? /· \d+ match/.test(summary()) && summary().includes('shown')
                                : !summary().includes('shown'))) { out.push(-1); continue; }
            out.push(performance.now() - t1);
            continue;
        }
        out.push(performance.now() - t0);
    }
    return out;
}"""


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# A fresh process opens a trace file (a JSON one is converted into a temporary store); its
# time counts from the imports done, as in a kernel that has imported the explorer.
OPEN = """
import sys, time
from langfx_nb.notebook.trace_explorer import TraceExplorer
t = time.perf_counter()
TraceExplorer(sys.argv[1]).close()
rss = int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20
print(f"{(time.perf_counter() - t) * 1000:.0f} {rss:.0f}")
"""
# A fresh process stores the JSON trace with lf.save_trace (streamed).
SAVE = """
import sys, time
import langfx_nb as lf
t = time.perf_counter()
lf.save_trace(sys.argv[1], sys.argv[2])
print(f"{(time.perf_counter() - t) * 1000:.0f}")
"""


def _run(script: str, *args: Path) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    return [float(x) for x in done.stdout.split()]


def kernel_opens(path: Path) -> dict[str, float]:
    """The kernel side of opening ``path`` (JSON), each step in a process of its own, with
    the load average (1 minute) before and after: ``TraceExplorer`` of the JSON file
    (converted), ``lf.save_trace`` of it into ``<stem>.lfxtrace``, ``TraceExplorer`` of that."""
    out = {"load_before": os.getloadavg()[0]}
    out["kernel_json_open_ms"], out["json_rss_mb"] = _run(OPEN, path)
    stored = path.with_suffix(".lfxtrace")
    (out["save_trace_ms"],) = _run(SAVE, path, stored)
    out["kernel_saved_open_ms"], out["saved_rss_mb"] = _run(OPEN, stored)
    out["load_after"] = os.getloadavg()[0]
    return out


def report_opens(nodes: int, r: dict[str, float]) -> None:
    print(
        f"  {nodes:,} nodes, kernel (load {r['load_before']:.1f} → {r['load_after']:.1f}): "
        f"TraceExplorer of the JSON {r['kernel_json_open_ms'] / 1000:.2f} s (converted; RSS "
        f"{r['json_rss_mb']:.0f} MB; target ≤ {2 if nodes <= 200_000 else 15} s, 500 MB), "
        f"lf.save_trace {r['save_trace_ms'] / 1000:.1f} s, TraceExplorer of the store "
        f"{r['kernel_saved_open_ms'] / 1000:.2f} s (RSS {r['saved_rss_mb']:.0f} MB; "
        "target ≤ 0.5 s, 300 MB)"
    )


def open_cells(name: str, file: str) -> list[str]:
    """A notebook's cells that show ``TraceExplorer(file)``, the second printing
    ``KERNEL <start> <built> <shown> <RSS MB>`` (epoch ms)."""
    return [
        "import time\nfrom IPython.display import display\n"
        "from langfx_nb.notebook.trace_explorer import TraceExplorer",
        "t_start = time.time() * 1000\n"
        f"explorer = TraceExplorer({file!r}, title={name!r})\n"
        "t_built = time.time() * 1000\n"
        "display(explorer)\n"
        "rss = int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20\n"
        "print(f'KERNEL {t_start:.0f} {t_built:.0f} {time.time() * 1000:.0f} {rss:.0f}')",
    ]


# the first item's caret clicked in the page; when the click is answered (Date.now())
CLICK_FIRST_ITEM = """async () => {
    const row = (id) => document.querySelector(`.lfx-te-row[data-id="${id}"]`);
    const before = row("i0").getAttribute('aria-expanded');
    row("i0").querySelector('.lfx-te-caret').click();
    for (let i = 0; i < 3000; i++) {
        await new Promise(r => requestAnimationFrame(r));
        const r = row("i0");
        if (r && r.getAttribute('aria-expanded') !== before) return Date.now();
    }
    throw new Error('the click was not answered');
}"""


def open_target(nodes: int) -> float:
    """The issue's open target (ms): 1 s at 100,000 nodes, 2 s at 1,000,000."""
    return 1000 if nodes <= 100_000 else 2000


def open_big(lab: Lab, nodes: int) -> dict[str, Any]:
    """Open a windowed trace of ``nodes`` nodes and time what a reader does with it."""
    name = f"big_{nodes}"
    write_big_trace(lab.server.root / f"{name}.json", nodes, deep=60)
    # the first opens in processes of their own (this leaves the store for the kernel's
    # open below), so the kernel's RSS is the displayed explorer's
    opens = kernel_opens(lab.server.root / f"{name}.json")
    progress(f"{nodes:,} nodes: kernel opens {opens}")
    cells = open_cells(name, f"{name}.lfxtrace")
    (lab.server.root / f"{name}.ipynb").write_text(notebook(cells))
    lab.open(f"{name}.ipynb")
    run_cell_nowait(lab, 0)
    cell_done(lab, 0)
    lab.page.wait_for_timeout(300)
    t0 = lab.page.evaluate("() => Date.now()")
    run_cell_nowait(lab, 1)
    lab.page.wait_for_function(
        "(n) => { const s = document.querySelector('.lfx-te-summary');"
        " return document.querySelectorAll('.lfx-te-row[data-id]').length > 0"
        " && s && s.textContent.startsWith(n + ' nodes'); }",
        arg=nodes,
        timeout=1_200_000,
        polling="raf",
    )
    t_rows = lab.page.evaluate("() => Date.now()")
    progress(f"{nodes:,} nodes: rows shown")
    t_click = lab.page.evaluate(CLICK_FIRST_ITEM)
    k_start, k_built, k_shown, rss = (
        float(x) for x in lab.output_text(1).split("KERNEL")[1].split()[:4]
    )
    steps = {}
    for kind in ("expand", "scroll", "search"):
        steps[kind] = lab.page.evaluate(STEPS, [kind, 20])
        progress(f"{nodes:,} nodes: {kind} steps {[round(v) for v in steps[kind]]}")
    heap = lab.page.evaluate(
        "() => performance.memory ? performance.memory.usedJSHeapSize / 2**20 : -1"
    )
    lab.screenshot(f"bench-{name}")
    return {
        "nodes": nodes,
        "kernel_open_ms": k_built - k_start,
        **opens,
        "kernel_rss_mb": rss,
        "shown_after_kernel_ms": t_rows - k_shown,
        "rows_ms": t_rows - t0,
        "interactive_ms": t_click - t0,
        "page_interactive_ms": t_click - k_shown,
        "steps": steps,
        "heap_mb": heap,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def report_big(results: list[dict[str, Any]]) -> bool:
    ok = True
    print("\nBatch scale: saved traces shown through windows (TraceExplorer(path))")
    for r in results:
        target = 1000 if r["nodes"] <= 100_000 else 2000
        report_opens(r["nodes"], r)
        print(
            f"  {r['nodes']:,} nodes: kernel open of the store {r['kernel_open_ms'] / 1000:.2f} s, "
            f"kernel RSS {r['kernel_rss_mb']:.0f} MB (target ≤ 300 MB); "
            f"run cell → rows {r['rows_ms'] / 1000:.1f} s, → interactive "
            f"{r['interactive_ms'] / 1000:.1f} s; widget shown → interactive "
            f"{r['page_interactive_ms']:.0f} ms (target ≤ {target} ms)"
        )
        for kind, all_values in r["steps"].items():
            values = [v for v in all_values if v >= 0] or [float("inf")]
            lost = len(all_values) - len([v for v in all_values if v >= 0])
            if lost:
                ok = False
                print(f"    {kind}: {lost} steps not answered within 3,000 frames")
            p95 = pct(values, 0.95)
            ok = ok and p95 <= 100
            print(
                f"    {kind}: p50 {pct(values, 0.5):.0f} ms, p95 {p95:.0f} ms, "
                f"max {max(values):.0f} ms over {len(values)} steps (target p95 ≤ 100 ms)"
            )
        print(f"    page JS heap {r['heap_mb']:.0f} MB (target ≤ 300 MB)")
        ok = ok and r["heap_mb"] <= 300 and r["kernel_rss_mb"] <= 300
        ok = ok and r["page_interactive_ms"] <= target
        ok = ok and max(r["kernel_saved_open_ms"], r["kernel_open_ms"]) <= 500
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--big", default="", help="comma-separated sizes: run part 3 only")
    parser.add_argument(
        "--nodelay",
        action="store_true",
        help="with --big: kernel websockets with TCP_NODELAY "
        "(langfx_nb.notebook.server.NoDelayKernelConnection); default the stock server",
    )
    parser.add_argument(
        "--kernel-only", action="store_true", help="with --big: the kernel's opens, no browser"
    )
    args = parser.parse_args()
    if args.big and args.kernel_only:
        with tempfile.TemporaryDirectory() as tmp:
            for n in (int(x) for x in args.big.split(",") if x):
                write_big_trace(Path(tmp) / f"big_{n}.json", n, deep=60)
                report_opens(n, kernel_opens(Path(tmp) / f"big_{n}.json"))
        return
    if args.big:
        sizes = [int(x) for x in args.big.split(",") if x]
        results: list[dict[str, Any]] = []

        def run(lab: Lab) -> None:
            for n in sizes:
                results.append(open_big(lab, n))

        with_lab(run, nodelay=args.nodelay)
        ok = report_big(results)
        print(f"\nall targets met: {ok}")
        return
    from playwright.sync_api import sync_playwright

    from langfx_nb.notebook.trace_explorer import TraceExplorer

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        path.write_text(json.dumps(big_trace(args.nodes)))
        t0 = time.perf_counter()
        TraceExplorer(path).close()
        kernel_ms = (time.perf_counter() - t0) * 1000

    load_before = os.getloadavg()[0]
    home, root = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    server = LabServer(root, home)
    try:
        server.wait_ready()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                lab = Lab(ctx.new_page(), server, "bench")
                lab.page.set_default_timeout(60_000)
                r = live(lab, args.rate, args.seconds)
                small = open_trace(lab, "trace_small", 10)
                big = open_trace(lab, "trace_big", args.nodes)
                tree_only = open_trace(lab, "trace_big_tree", args.nodes, timeline=False)
            finally:
                browser.close()
    finally:
        server.stop()

    print(
        f"\nLive trace: {args.rate} events/s for {args.seconds:g} s "
        "through lf.Session.log → TraceExplorer (the page following the newest rows)"
    )
    sent = r["sent"]
    messages = sum(n for n, _ in sent.values())
    print(
        f"  emitted {r['emitted']}, counted on screen {r['received']} "
        f"(loss {r['emitted'] - r['received']}), {r['frames']} draws; kernel sent {messages} "
        f"comm messages ({r['emitted'] / max(1, messages):.0f} events/message), "
        f"{sum(b for _, b in sent.values()) / 1e6:.2f} MB: "
        + ", ".join(f"{k} {n} ({b / 1e6:.2f} MB)" for k, (n, b) in sent.items())
    )
    for label, key in (("its row on screen", "rows"), ("counted on screen", "counted")):
        values = r[key] or [float("nan")]
        print(
            f"  event → {label}: p50 {pct(values, 0.5):.0f} ms, p95 {pct(values, 0.95):.0f} ms, "
            f"max {max(values):.0f} ms over {len(r[key])} events  (target p95 ≤ 150 ms)"
        )
    print(
        f"  rows on screen: {len(r['rows'])} of {r['emitted']} events' rows "
        "(the rest scrolled past between two frames)"
    )
    print(
        f"  emit loop {r['took']:.2f} s with explorer vs {r['base_took']:.2f} s without "
        f"(ratio {r['took'] / r['base_took']:.2f}×); cell finished: {not r['cell_stuck']}"
    )
    print(
        f"\nSaved trace: {args.nodes} nodes vs 10 nodes "
        "(run cell → rows on screen → click answered)"
    )
    print(
        f"  10 nodes:    rows {small['rows_ms']:.0f} ms, "
        f"interactive {small['interactive_ms']:.0f} ms"
    )
    print(
        f"  {args.nodes} nodes, tree + timeline: rows and bars {big['rows_ms']:.0f} ms, "
        f"interactive (collapse, then a bar click selects) {big['interactive_ms']:.0f} ms"
        f"  (ratio {big['interactive_ms'] / max(1, small['interactive_ms']):.2f}×; "
        "target ≤ 1000 ms)"
    )
    print(
        f"  {args.nodes} nodes, tree only: rows {tree_only['rows_ms']:.0f} ms, "
        f"interactive {tree_only['interactive_ms']:.0f} ms  (target ≤ 1000 ms)"
    )
    print(
        "  timeline (ms after run-cell, @) and in-page step costs (ms): "
        + ", ".join(f"{k} {v:g}" for k, v in big["js"].items())
    )
    print(
        f"  kernel: TraceExplorer(path) {kernel_ms:.0f} ms for {args.nodes} nodes "
        "(read, normalize, encode)"
    )
    ok = (
        r["emitted"] == r["received"]
        and bool(r["rows"])
        and bool(r["counted"])
        and pct(r["rows"], 0.95) <= 150
        and pct(r["counted"], 0.95) <= 150
        and not r["cell_stuck"]
        and big["interactive_ms"] <= 1000
        and tree_only["interactive_ms"] <= 1000
    )
    print(
        f"  load average (1 min) {load_before:.1f} → {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPU"
    )
    print(f"\nall targets met: {ok}")


def with_lab(run: Any, *, nodelay: bool = False) -> None:
    from playwright.sync_api import sync_playwright

    home, root = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    server = LabServer(root, home, nodelay=nodelay)
    try:
        server.wait_ready()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=[*CHROMIUM_ARGS, "--enable-precise-memory-info"],
            )
            try:
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                lab = Lab(ctx.new_page(), server, "bench")
                lab.page.set_default_timeout(1_200_000)
                run(lab)
            finally:
                browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
