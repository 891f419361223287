"""marimo, as a person uses it: a real ``marimo edit`` server on 127.0.0.1 (from the marimo host
venv made by ``scripts/host_env marimo``: marimo and this checkout's ``notebook`` extra, no
Jupyter) and a small notebook, driven by Debian's chromium.

marimo draws anywidget models only, each in a shadow root of its own. The notebook runs a
query on the fake model with its trace explorer, an evaluation report, a batch with failures,
a stream view and an approval; the test clicks Run all, then checks that no cell's output is
blank, that the report and the batch draw a trace explorer inside themselves when clicked,
and that Approve reaches the run (approval mode ``background``: marimo hands a click to
Python only between cells) and its answer arrives. Another test checks the venv: the
``notebook`` extra upgraded nothing of marimo's and brought no Jupyter.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts._kernel import host_python
from tests.local import free_port

from .conftest import ARTIFACTS, HostServer

pytestmark = [pytest.mark.browser, pytest.mark.hosts]

START_TIMEOUT = 90.0

NOTEBOOK = '''
import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo

    import langfx_nb as lf
    from langfx_nb.notebook import hosts

    mo.plain_text(hosts.doctor_text())
    return lf, mo


@app.cell
async def _(lf):
    lm = lf.llms.Scripted(["Paris is the capital of France."], loop=True)
    session = lf.Session(lm)
    answer = await session.query("What is the capital of France?")
    lf.nb.TraceExplorer(session, title="query")
    return (lm,)


@app.cell
async def _(lf, lm):
    dataset = lf.eval.Dataset(
        [lf.eval.Case("France", "Paris is the capital of France."), lf.eval.Case("Peru", "Lima")]
    )

    async def capital(country, session):
        return await session.query("Capital of {{c}}?", lm=lm, vars={"c": country})

    report = await lf.eval.run(capital, dataset, [lf.eval.exact], progress=False, live=False)
    report.widget()
    return


@app.cell
async def _(lf):
    async def item(x):
        if x % 2:
            raise ValueError(f"odd {x}")
        return x

    result = await lf.batch(item, [1, 2, 3, 4])  # its progress view is this cell's output
    return


@app.cell
async def _(lf, lm):
    stream_view = lf.nb.StreamView()
    streamed = await stream_view.consume(lf.query_stream("Say something", lm=lm))
    return


@app.cell
def _(lf):
    import time

    started = []

    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        started.append(time.time())
        return a + b

    policy = lf.nb.ApprovalPolicy(tools=[add])
    agent_lm = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])
    agent = lf.Agent("What is 2 + 3?", tools=[add], allow_tool=policy)
    agent_session = lf.Session(agent_lm)
    run = lf.nb.background(
        agent.invoke(agent_session),
        label="agent",
        widgets=[policy.widget, lf.nb.TraceExplorer(agent_session, title="agent")],
    )
    run
    return run, started


@app.cell
async def _(mo, run, started):
    agent_answer = await run
    mo.plain_text(f"ANSWER: {agent_answer} STARTED: {started[0]}")
    return


if __name__ == "__main__":
    app.run()
'''

# Text of an element, its descendants and the open shadow roots below it (marimo draws each
# widget in a shadow root), so an output drawn by a widget counts as text.
DEEP_TEXT = """(el) => {
  const parts = [];
  const walk = (n) => {
    if (n.nodeType === 3) parts.push(n.textContent);
    if (n.shadowRoot) walk(n.shadowRoot);
    for (const c of n.childNodes) walk(c);
  };
  walk(el);
  return parts.join(" ").replace(/\\s+/g, " ").trim();
}"""


class MarimoServer(HostServer):
    """``marimo edit`` serving one notebook from the marimo host venv, with its own HOME."""

    def __init__(self, notebook: Path, home: Path) -> None:
        marimo = Path(host_python("marimo")).with_name("marimo")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_CACHE_HOME": str(home / "cache"),
            "XDG_STATE_HOME": str(home / "state"),
        }
        for name in ("LANGFX_NB_APPROVE", "LANGFX_NB_APPROVAL", "PYTHONPATH"):
            env.pop(name, None)  # `ask` asks, the probe decides, the venv's own checkout runs
        argv = [
            str(marimo),
            "edit",
            str(notebook),
            "--headless",
            "--host=127.0.0.1",
            f"--port={self.port}",
            "--no-token",
            "--skip-update-check",
        ]
        super().__init__("marimo", argv, cwd=notebook.parent, home=home, env=env)

    def wait_ready(self) -> None:
        self.wait_until(
            lambda: urllib.request.urlopen(f"{self.base}/health", timeout=5).close(),
            START_TIMEOUT,
        )


@pytest.fixture
def marimo_page(tmp_path: Path, browser: Any) -> Iterator[Any]:
    notebook = tmp_path / "work" / "langfx_marimo.py"
    notebook.parent.mkdir()
    notebook.write_text(NOTEBOOK)
    server = MarimoServer(notebook, tmp_path)
    context = None
    try:
        server.wait_ready()
        context = browser.new_context(viewport={"width": 1300, "height": 1400})
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(server.base)
        yield page
    finally:
        if context is not None:
            with contextlib.suppress(Exception):
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                context.pages[0].screenshot(path=str(ARTIFACTS / "marimo.png"), full_page=True)
            context.close()
        server.stop()


def cell_outputs(page: Any) -> list[str]:
    """The text each code cell's output shows, in notebook order."""
    cells = page.locator("[data-cell-id]")
    texts = []
    for i in range(cells.count()):
        area = cells.nth(i).locator(".output-area")
        texts.append(area.first.evaluate(DEEP_TEXT) if area.count() else "")
    return texts


def test_every_view_renders_and_an_approval_click_reaches_the_run(marimo_page: Any) -> None:
    page = marimo_page
    page.locator("[data-testid=cell-editor]").first.wait_for()
    page.locator("[data-testid=chrome-controls-bottom-right] [data-testid=run-button]").click()

    # the approval prompt, drawn in the run's output (not in a panel claiming it is not)
    approve = page.locator(".lfx-ap-pending .lfx-approve")
    approve.wait_for(state="visible")
    assert "add" in page.locator(".lfx-ap-pending").inner_text()
    assert page.locator(".lfx-ap-orphan").count() == 0
    # the awaiting cell stops at once with what to do (the click cannot arrive while it runs)
    waiting = page.locator("[data-cell-id]").last.locator(".output-area")
    page.wait_for_function(
        f"(el) => ({DEEP_TEXT})(el).includes('waiting for your decision')",
        arg=waiting.element_handle(),
    )

    outputs = cell_outputs(page)
    assert len(outputs) == 7, outputs
    assert [i for i, text in enumerate(outputs) if not text] == []  # 0 blank outputs
    doctor, query, report, batch, stream, agent, _await = outputs
    assert "marimo" in doctor and "approvals: background" in doctor
    assert "query" in query and "session" in query  # the explorer's title and its root row
    assert "Evaluation" in report or "exact" in report
    assert "some failed" in batch and "ValueError" in batch
    assert "Paris" in stream
    assert "approval mode background" in agent and "marimo" in agent
    for root in (".lfx-te", ".lfx-er", ".lfx-bv", ".lfx-sv", ".lfx-ap"):
        assert page.locator(root).first.bounding_box()["height"] > 20, root

    # a composite view draws its explorer inside itself: the report's clicked trial ...
    page.locator(".lfx-er-row", has_text="1#0").click()
    page.locator(".lfx-er-traces .lfx-te").wait_for(state="visible")
    assert "trace of 1#0" in page.locator(".lfx-er-traces .lfx-te").inner_text()
    # ... and the batch's error group
    page.locator(".lfx-bv-open-btn").click()
    page.locator(".lfx-bv-traces .lfx-te").wait_for(state="visible")
    assert "ValueError items" in page.locator(".lfx-bv-traces .lfx-te").inner_text()

    # Approve, between cells: the run takes it and finishes
    clicked = time.time()
    approve.click()
    page.locator(".lfx-ap-hist", has_text="approved").wait_for()
    page.locator("[data-cell-id]").last.locator("[data-testid=cell-editor]").click()
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        f"(el) => ({DEEP_TEXT})(el).includes('ANSWER: The sum is 5.')",
        arg=waiting.element_handle(),
    )
    started = float(waiting.evaluate(DEEP_TEXT).split("STARTED:")[1].split()[0])
    print(f"marimo: click -> tool start {(started - clicked) * 1e3:.0f} ms")


def test_the_notebook_extra_brings_no_jupyter_into_the_marimo_host() -> None:
    """``scripts/host_env marimo`` installs this checkout's ``notebook`` extra with every package
    marimo brought as a constraint: nothing of marimo's is upgraded, and no Jupyter kernel,
    server or JupyterLab comes with the widgets."""
    code = (
        "import importlib.metadata as m\n"
        "for d in m.distributions(): print(d.metadata['Name'].lower() + '==' + d.version)"
    )
    listing = subprocess.run(
        [host_python("marimo"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    installed = dict(line.split("==", 1) for line in listing)
    assert installed["marimo"] == "0.25.2"
    assert {"anywidget", "ipywidgets", "langfx_nb"} <= set(installed)
    jupyter = {"ipykernel", "jupyterlab", "notebook", "jupyter-server", "jupyter-client"}
    assert jupyter.isdisjoint(installed), sorted(jupyter & set(installed))
