"""Approval clicks in a real JupyterLab + Debian chromium (issue 36): click → tool start for
live mode on this venv's kernel (ipykernel 7.4) and background mode on the Colab-pinned and
ipykernel 6.29 kernels (``scripts/host_env colab|ipk629``), plus how soon the background
``%%lf agent`` cell returns and what the capability probe costs at ``%load_ext``.

"Click" is ``Date.now()`` in the page when the Approve button's click event is dispatched (a
capturing listener, before the widget's own handler); "tool start" is ``time.time()`` in the
tool function, in the kernel. Both are this machine's wall clock. The cell's return time is
measured here, from Shift+Enter until the page shows the cell done and the kernel idle, so it
includes Playwright's round trips (polling every animation frame).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/approval_click.py [main] [colab] [ipk629] \\
        [--rounds N]

Same harness as the browser tests (tests/ui/conftest.py); chromium from /usr/bin/chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright

from tests.hosts._kernel import host_python, kernel_specs
from tests.local import CHROMIUM, CHROMIUM_ARGS
from tests.ui.conftest import Lab, LabServer, notebook_json

ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 20
KERNELS = {"main": "python3", "colab": "host-colab", "ipk629": "host-ipk629"}
CHOSEN = [a for a in sys.argv[1:] if a in KERNELS] or list(KERNELS)

CELLS = [
    """import time, json, asyncio
_t = time.perf_counter()
%load_ext langfx_nb
load_ms = (time.perf_counter() - _t) * 1e3
import langfx_nb as lf
from langfx_nb.notebook import hosts
_t = time.perf_counter(); hosts.probe(get_ipython()); probe_ms = (time.perf_counter() - _t) * 1e3
started = []


@lf.tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    started.append(time.time())
    return a + b


lm = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "ok"], loop=True)
ans = "ok"
print(json.dumps({"mode": hosts.approval_mode(), "load_ms": load_ms, "probe_ms": probe_ms}))""",
    # the previous run has delivered its answer: runs never overlap on the looping script
    "while ans is None:\n    await asyncio.sleep(0.005)\nans = None",
    "%%lf agent --lm lm --tools add -o ans\nWhat is 2 + 3?",
    "print(json.dumps(started))",
]

RECORD_CLICKS = """() => {
    window.__lfClicks = [];
    document.addEventListener('click', (e) => {
        if (e.target instanceof Element && e.target.closest('.lfx-approve'))
            window.__lfClicks.push(Date.now());
    }, true);
}"""


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):.0f} / p95 {p95(values):.0f} ms"


def run(lab: Lab, index: int) -> None:
    """Run cell ``index`` (Run Selected Cell, no click into its outputs) and wait until it has
    finished with a new execution count and the kernel is idle."""
    cell = "window.jupyterapp.shell.currentWidget.content.widgets[i]"
    before = lab.page.evaluate(f"(i) => {cell}.model.executionCount", index)
    lab.select_cell(index)
    lab.command("notebook:run-cell")
    lab.page.wait_for_function(
        f"""([i, before]) => {{
            const c = {cell}, k = window.jupyterapp.shell.currentWidget.sessionContext
                .session.kernel, n = c.model.executionCount;
            return n !== null && n !== before && !c.promptNode.textContent.includes('*')
                && k.status === 'idle';
        }}""",
        arg=[index, before],
        timeout=120_000,
    )


def write(server: LabServer, name: str, kernel: str) -> str:
    (server.root / name).write_text(notebook_json(CELLS, kernel))
    return name


def bench(browser: Any, server: LabServer, which: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    lab = Lab(page, server, f"bench-{which}")
    try:
        lab.open(write(server, f"bench_{which}.ipynb", KERNELS[which]))
        page.evaluate(RECORD_CLICKS)
        run(lab, 0)
        setup = json.loads(lab.output_text(0))
        returned: list[float] = []
        for _ in range(ROUNDS):
            run(lab, 1)
            approve = lab.cell(2).locator(".lfx-ap .lfx-approve")
            t0 = time.perf_counter()
            if setup["mode"] == "live":  # the cell waits at the prompt until the click
                lab.select_cell(2)
                lab.command("notebook:run-cell")
                lab.page.wait_for_function(  # running: the last round's prompt is gone
                    "() => window.jupyterapp.shell.currentWidget.content.widgets[2]"
                    ".promptNode.textContent.includes('*')"
                )
                approve.wait_for(state="visible")
                approve.click()
                lab.wait_cells_done()
            else:
                run(lab, 2)
                returned.append((time.perf_counter() - t0) * 1e3)
                approve.wait_for(state="visible")
                approve.click()
                lab.cell(2).locator(".lfx-ap-hist", has_text="approved").wait_for()
        run(lab, 1)
        run(lab, 3)
        started = json.loads(lab.output_text(3))
        clicks = page.evaluate("() => window.__lfClicks")
        assert len(started) == len(clicks) == ROUNDS, (len(started), len(clicks))
        assert lab.errors() == [], lab.errors()
        gaps = [start * 1e3 - click for start, click in zip(started, clicks, strict=True)]
    except Exception:
        print(f"{which}: failed; see {lab.dump_state('failed')}", flush=True)
        raise
    finally:
        context.close()
        for kernel in server.api("/api/kernels"):
            server.api(f"/api/kernels/{kernel['id']}", method="DELETE")
    cell = f"; the cell returns {summary(returned)}" if returned else ""
    print(
        f"{which} ({KERNELS[which]}): approvals {setup['mode']}; click -> tool start "
        f"{summary(gaps)} (max {max(gaps):.0f}){cell}; %load_ext {setup['load_ms']:.0f} ms, "
        f"probe {setup['probe_ms']:.2f} ms ({ROUNDS} clicks)",
        flush=True,
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data, home, root = (Path(tmp) / d for d in ("data", "home", "root"))
        root.mkdir()
        for name in (n for n in CHOSEN if n != "main"):
            specs = kernel_specs(host_python(name), data / name)
            shutil.copytree(Path(specs.kernel_dirs[0]) / "host", data / "kernels" / f"host-{name}")
        with mock.patch.dict(os.environ, {"JUPYTER_PATH": str(data)}):
            server = LabServer(root, home, nodelay=True)  # as scripts/lab serves notebooks
        try:
            server.wait_ready()
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                )
                try:
                    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
                    for which in CHOSEN:
                        bench(browser, server, which)
                    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
                finally:
                    browser.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
