"""A working day around the widgets, in a real JupyterLab + Debian chromium: saving and
reopening without the kernel, reloading the page, cancelling, restarting and Run All while a
tool call waits for approval.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ARTIFACTS, Lab
from .test_widgets_browser import explorer_rows, run_all_nowait, wait_row, write_notebook

pytestmark = pytest.mark.browser

SETUP = """
import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.approval import ApprovalPolicy
from langfx_nb.notebook.trace_explorer import TraceExplorer

RAN = []

@lf.tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    RAN.append((a, b))
    return a + b


def final(request):
    return f"The answer is {request.messages[-1].text}."
"""

EXPLORER = """
session = lf.Session(Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), final]))
explorer = TraceExplorer(session, title="agent run")
explorer
"""

RUN = """
policy = ApprovalPolicy(tools=[add], render_timeout=60)
answer = await lf.Agent("add 2 and 3", tools=[add], allow_tool=policy).invoke(session)
print("ANSWER:", answer)
"""

CELLS = [SETUP, EXPLORER, RUN]


def save(lab: Lab) -> None:
    lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    lab.page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
    )


def shutdown_kernels(lab: Lab) -> None:
    for kernel in lab.server.api("/api/kernels"):
        lab.server.api(f"/api/kernels/{kernel['id']}", method="DELETE")


def wait_prompt(lab: Lab) -> None:
    lab.page.locator(".lfx-ap .lfx-approve").wait_for(state="visible", timeout=60_000)


def test_saved_run_shows_its_trace_and_details_after_shutdown_and_reopen(lab: Lab) -> None:
    name = write_notebook(lab, "d_saved.ipynb", CELLS)
    lab.open(name)
    run_all_nowait(lab)
    wait_prompt(lab)
    lab.page.locator(".lfx-ap .lfx-approve").click()
    lab.wait_cells_done()
    wait_row(lab, "tool_call", "ok")
    # live: the interactive views are shown and the static copies are not
    assert lab.page.locator(".lfx-static").first.is_hidden()
    save(lab)
    shutdown_kernels(lab)
    lab.open(name)  # a fresh page; JupyterLab starts a new kernel that has none of the models
    static = lab.cell(1).locator(".lfx-static")
    static.wait_for(state="visible", timeout=30_000)
    text = static.inner_text()
    assert "agent run" in text and "tool_call" in text and "add" in text, text
    assert "running" not in text, text  # a saved trace never looks live
    tool = static.locator('li[data-kind="tool_call"]').first
    tool.locator(":scope > details > summary").click()
    details = tool.locator(":scope > details").inner_text()
    assert "Arguments" in details and '"a"' not in details and "Output" in details, details
    assert "Policy decision" in details, details
    # the approval's decision is kept, and no widget error is shown anywhere
    assert "approved" in lab.cell(2).locator(".lfx-static").inner_text()
    lab.page.wait_for_timeout(2000)  # the widget manager has given up on the old models
    for cell in (1, 2):
        for text in ("Loading widget", "Error displaying widget"):
            found = lab.cell(cell).get_by_text(text)
            assert not any(found.nth(i).is_visible() for i in range(found.count())), text
    lab.screenshot("reopened-without-kernel", cell=1)

    # nbconvert HTML (what a static viewer shows) carries the same static copy
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / "d_saved.html"
    subprocess.run(
        [
            str(Path(sys.executable).with_name("jupyter")),
            "nbconvert",
            "--to",
            "html",
            "--output",
            str(out),
            str(lab.server.root / name),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    lab.page.goto(out.as_uri())
    converted = lab.page.locator(".lfx-static").first
    converted.wait_for(state="visible", timeout=10_000)
    assert "tool_call" in converted.inner_text()
    assert "Policy decision" in lab.page.content()
    lab.page.screenshot(path=str(ARTIFACTS / "d_saved-nbconvert.png"), full_page=True)


def test_reload_while_approval_waits_brings_back_working_buttons(lab: Lab) -> None:
    name = write_notebook(lab, "d_reload.ipynb", [*CELLS, 'print("LATER:", answer, RAN)'])
    lab.open(name)
    lab.run_cell(0)
    lab.wait_cells_done()
    lab.run_cell(1)
    lab.wait_cells_done()
    lab.run_cell(2)
    wait_prompt(lab)
    save(lab)  # what autosave does; the reloaded page reads the notebook from disk
    lab.page.reload(wait_until="domcontentloaded")
    lab.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
    prompt = lab.page.locator(".lfx-ap-pending")
    prompt.wait_for(state="visible", timeout=60_000)  # not "Loading widget..." forever
    assert prompt.get_attribute("data-call-id") == "c1"  # the same call
    lab.screenshot("reloaded-prompt")
    prompt.locator(".lfx-approve").click()
    wait_row(lab, "tool_call", "ok", timeout_s=60)
    lab.page.wait_for_function(
        "() => document.querySelector('.lfx-ap-hist')?.textContent.includes('approved')"
    )
    lab.wait_kernel_idle()
    lab.run_cell(3)
    lab.wait_cells_done()
    assert "LATER: The answer is 5. [(2, 3)]" in lab.output_text(3)


def test_reload_before_the_first_save_keeps_the_waiting_run_and_its_prompt(lab: Lab) -> None:
    # The default policy (render_timeout 15 s), and no save before the reload: the file on
    # disk holds no outputs, so no output of the reloaded page draws the prompt.
    run = RUN.replace("render_timeout=60", "")
    later = 'print("LATER:", answer, RAN)'
    name = write_notebook(lab, "d_reload_unsaved.ipynb", [SETUP, EXPLORER, run, later])
    lab.open(name)
    for index in (0, 1):
        lab.run_cell(index)
        lab.wait_cells_done()
    lab.run_cell(2)
    wait_prompt(lab)
    lab.page.reload(wait_until="domcontentloaded")
    lab.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
    lab.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    assert lab.page.locator(".jp-OutputArea-output").count() == 0  # nothing saved
    # the kernel still holds the prompt and the run waits: the page shows it by itself
    prompt = lab.page.locator(".lfx-ap-orphan .lfx-ap-pending")
    prompt.wait_for(state="visible", timeout=60_000)
    assert prompt.get_attribute("data-call-id") == "c1"
    assert "approval waiting" in lab.page.title()
    lab.page.wait_for_timeout(16_000)  # past the render timeout: still waiting
    assert prompt.is_visible()
    lab.screenshot("reloaded-unsaved-prompt")
    prompt.locator(".lfx-approve").click()
    lab.page.wait_for_function(
        "() => document.querySelector('.lfx-ap-orphan .lfx-ap-hist')?.textContent"
        ".includes('approved')",
        timeout=60_000,
    )
    lab.wait_kernel_idle()
    lab.run_cell(3)
    lab.wait_cells_done()
    assert "LATER: The answer is 5. [(2, 3)]" in lab.output_text(3)


@pytest.mark.parametrize("button", [".lfx-ap .lfx-cancel", ".lfx-te .lfx-te-cancel"])
def test_cancel_while_approval_waits_ends_the_cell_in_one_line(lab: Lab, button: str) -> None:
    name = write_notebook(lab, f"d_cancel{len(button)}.ipynb", [*CELLS, 'print("RAN:", RAN)'])
    lab.open(name)
    run_all_nowait(lab)
    wait_prompt(lab)
    wait_row(lab, "tool_call", "waiting for approval")
    assert "1 approval waiting" in lab.page.locator(".lfx-te-badge").inner_text()
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    lab.page.locator(button).click()
    lab.wait_cells_done()
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("CancelledError:"), errors
    where = "approval prompt" if "lfx-ap" in button else "trace explorer"
    assert where in errors[0] and "add (c1) did not run" in errors[0], errors
    out = lab.output_text(2)
    assert "Traceback" not in out and "__import__" not in out and len(out.splitlines()) <= 3, out
    wait_row(lab, "tool_call", "cancelled")
    assert approve.count() == 0  # the prompt is closed: no later click can run the tool
    assert "cancelled" in lab.page.locator(".lfx-ap-hist").inner_text()
    lab.run_cell(3)
    lab.wait_cells_done()
    assert "RAN: []" in lab.output_text(3)
    lab.screenshot(f"cancelled-from-{where.split()[-1]}", cell=2)


def test_interrupt_while_approval_waits_stops_at_once(lab: Lab) -> None:
    name = write_notebook(lab, "d_interrupt.ipynb", CELLS)
    lab.open(name)
    run_all_nowait(lab)
    wait_prompt(lab)
    started = time.monotonic()
    lab.command("kernelmenu:interrupt")
    lab.wait_cells_done(timeout_ms=30_000)
    assert time.monotonic() - started < 20  # not at the run's deadline
    errors = lab.errors()
    assert len(errors) == 1 and "interrupted" in errors[0], errors
    assert "Traceback" not in lab.output_text(2)
    wait_row(lab, "tool_call", "cancelled")


def test_restart_while_approval_waits_closes_the_prompt(lab: Lab) -> None:
    name = write_notebook(lab, "d_restart.ipynb", CELLS)
    lab.open(name)
    run_all_nowait(lab)
    wait_prompt(lab)
    kernel = lab.server.api("/api/kernels")[0]
    lab.server.api(f"/api/kernels/{kernel['id']}/restart", method="POST")
    closed = lab.page.locator(".lfx-ap-closed")
    closed.wait_for(state="visible", timeout=60_000)
    assert "kernel restarted" in closed.inner_text()
    assert lab.page.locator(".lfx-ap .lfx-approve").count() == 0
    lab.page.locator(".lfx-te-closed").wait_for(state="visible", timeout=30_000)
    # the kernel cancels the run as it goes down (the server interrupts it first), or the
    # page marks what was still running as unfinished: never "running"
    rows = explorer_rows(lab)
    assert rows and all(r["status"] not in ("running", "waiting for approval") for r in rows), rows
    tool = next(r for r in rows if r["kind"] == "tool_call")
    assert tool["status"] in ("cancelled", "unfinished"), rows
    lab.screenshot("restarted", cell=2)


def test_run_all_brings_an_offscreen_prompt_into_view(lab: Lab) -> None:
    filler = [f'print("filler {i}")\n' + "\n" * 12 for i in range(25)]
    name = write_notebook(lab, "d_scroll.ipynb", [*CELLS, *filler])
    lab.open(name)
    run_all_nowait(lab)
    prompt = lab.page.locator(".lfx-ap-pending")
    prompt.wait_for(state="visible", timeout=60_000)
    lab.page.wait_for_function(
        """() => { const r = document.querySelector('.lfx-ap-pending').getBoundingClientRect();
                   return r.top >= 0 && r.bottom <= window.innerHeight; }""",
        timeout=15_000,
    )
    # JupyterLab retitles the page on its own; the widget puts its cue back within a second
    lab.page.wait_for_function("() => document.title.includes('approval waiting')", timeout=5_000)
    lab.screenshot("prompt-in-view")
    prompt.locator(".lfx-approve").click()
    lab.wait_cells_done()
    lab.page.wait_for_function("() => !document.title.includes('approval waiting')")


TWO_CALLS = """
session = lf.Session(Scripted([
    lf.ToolCall("c1", "add", {"a": 1, "b": 2}),
    lf.ToolCall("c2", "add", {"a": 3, "b": 4}),
    "done",
]))
explorer = TraceExplorer(session, title="agent run")
explorer
"""


def test_always_ticked_then_deny_with_note_still_asks_for_the_next_call(lab: Lab) -> None:
    # "always allow" belongs to Approve: ticking it and then denying must never allow the tool
    name = write_notebook(lab, "d_always.ipynb", [SETUP, TWO_CALLS, RUN, 'print("RAN:", RAN)'])
    lab.open(name)
    run_all_nowait(lab)
    prompt = lab.page.locator(".lfx-ap-pending")
    prompt.locator(".lfx-deny-note-open").wait_for(state="visible", timeout=60_000)
    assert prompt.get_attribute("data-call-id") == "c1"
    prompt.locator(".lfx-ap-always").check()
    prompt.locator(".lfx-deny-note-open").click()
    prompt.locator(".lfx-note").fill("not this one")
    prompt.locator(".lfx-deny-note").click()
    lab.page.locator('.lfx-ap-pending[data-call-id="c2"]').wait_for(timeout=60_000)  # asked again
    lab.page.locator(".lfx-ap-pending .lfx-deny").click()
    lab.wait_cells_done()
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("ToolDeniedError:"), errors
    lab.run_cell(3)  # Run All stopped at the error
    lab.wait_cells_done()
    assert "RAN: []" in lab.output_text(3)
