"""Approval modes ``background`` and ``suspend`` (its buttons) in a real JupyterLab + Debian
chromium. Background: the ``%%lf agent`` cell finishes before anyone clicks, the prompt
appears in its output, the click arrives between cells, and the answer lands in the ``-o``
variable. Suspend: the saved run's prompt resumes it when clicked.

The kernel here (ipykernel 7.4) could take the click live; ``LANGFX_NB_APPROVAL=background``
makes it behave as the kernels that cannot (6.x, 7.0-7.3: those run in tests/hosts).
"""

from __future__ import annotations

import pytest

from .conftest import Lab
from .test_widgets_browser import write_notebook

pytestmark = pytest.mark.browser

CELLS = [
    """
import os
os.environ["LANGFX_NB_APPROVAL"] = "background"
%load_ext langfx_nb
import langfx_nb as lf


@lf.tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


lm = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])
""",
    "%%lf agent --lm lm --tools add -o ans\nWhat is 2 + 3?",
    'print("ANSWER:", ans)',
]


def test_background_run_is_approved_between_cells(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_background.ipynb", CELLS))
    lab.run_cell(0)
    lab.wait_cells_done()
    lab.run_cell(1)
    lab.wait_cells_done()  # the cell has finished: nobody has clicked yet
    assert "runs in the background" in lab.output_text(1)
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    approve.wait_for(state="visible", timeout=60_000)
    assert "add" in lab.page.locator(".lfx-ap-pending").inner_text()
    lab.screenshot("background-prompt")
    approve.click()
    lab.page.locator(".lfx-ap-hist", has_text="approved").wait_for(timeout=30_000)
    lab.run_cell(2)
    lab.wait_cells_done()
    assert "ANSWER: The sum is 5." in lab.output_text(2)
    assert lab.errors() == []


SUSPEND_CELLS = [
    CELLS[0].replace('os.environ["LANGFX_NB_APPROVAL"] = "background"', ""),
    "%%lf agent --lm lm --tools add --suspend -o ans\nWhat is 2 + 3?",
    # ans is the RunState until the resumed run's answer replaces it
    """
import asyncio
while not isinstance(ans, str):
    await asyncio.sleep(0.05)
print("ANSWER:", ans)
""",
]


def test_suspended_run_resumes_from_its_buttons(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_suspend_buttons.ipynb", SUSPEND_CELLS))
    lab.run_cell(0)
    lab.wait_cells_done()
    lab.run_cell(1)
    lab.wait_cells_done()  # suspended and saved: the cell is done
    text = lab.output_text(1)
    assert "Suspended: 1 tool call(s)" in text and "resumes here" in text, text
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    approve.wait_for(state="visible", timeout=60_000)
    lab.screenshot("suspended-buttons")
    approve.click()
    lab.page.locator(".lfx-ap-hist", has_text="approve").wait_for(timeout=30_000)
    lab.run_cell(2)
    lab.wait_cells_done()
    assert "ANSWER: The sum is 5." in lab.output_text(2)
    assert lab.errors() == []
