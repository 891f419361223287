"""lf.batch in a real JupyterLab + Debian chromium: the progress view appears in the running
cell, ends with the final counts, groups the failures by class with the first message as inert
text, and a group's button opens its items' traces below. Screenshot: artifacts/ui/ (a copy is
docs/images/batch_progress.png)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from .conftest import ARTIFACTS, Lab

pytestmark = pytest.mark.browser

DOCS_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "images" / "batch_progress.png"

CELLS = [
    """
import langfx_nb as lf
from pydantic import BaseModel
from langfx_nb.llms import Scripted

%load_ext langfx_nb

HOSTILE = '<img src=x onerror="window.__pwned=1">'


class Label(BaseModel):
    sentiment: str


def answer(request):
    text = request.messages[-1].text
    if "broken" in text:
        return "I cannot label this."  # no Label(...): a MappingError for the item
    return f"```python\\nLabel(sentiment={'positive' if 'good' in text else 'negative'!r})\\n```"


lm = Scripted([answer], loop=True, delay=0.15)  # ~2.5 s in all: progress to watch
rows = [{"text": ("broken" if i % 10 == 3 else "good" if i % 2 else "bad") + f" review {i}"}
        for i in range(60)]


async def label(row, session):
    if row["text"].endswith(" 7"):
        raise ValueError("bad review " + HOSTILE)  # model-made text, say
    return await session.query("Label this review: {{text}}", Label, vars=row)
""",
    """
result = await lf.batch(label, rows, session=lf.Session(lm), max_concurrency=4, name="reviews")
print("RESULT:", result.totals.ok, "ok,", result.totals.failed, "failed")
""",
]


def test_a_batch_shows_live_progress_final_counts_and_opens_an_error_group(lab: Lab) -> None:
    lab.open(lab.write_notebook("w_batch.ipynb", CELLS))
    lab.run_all()
    view = lab.page.locator(".lfx-bv")
    view.wait_for(state="visible", timeout=60_000)
    # live: the counts move while the cell runs (a few updates a second, never per item)
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = view.locator(".lfx-st").inner_text()
        seen.add(view.locator("[data-count=done] b").inner_text())
        if status not in ("running", ""):
            break
        lab.page.wait_for_timeout(100)
    lab.wait_cells_done()
    assert "RESULT: 53 ok, 7 failed" in lab.output_text(1)
    assert len(seen) >= 2, seen  # progress was seen before the end
    counts = {
        k: view.locator(f"[data-count={k}] b").inner_text()
        for k in ("done", "failed", "running", "left")
    }
    assert counts == {"done": "53", "failed": "7", "running": "0", "left": "0"}
    chip = view.locator(".lfx-st")  # 7 of 60 failed: never a green "done"
    assert chip.inner_text() == "some failed" and "lfx-st-some_failed" in str(
        chip.get_attribute("class")
    )
    cost = view.locator("[data-cost]").inner_text()  # no price configured: unknown, not $0
    assert cost.startswith("cost unknown (") and "calls unpriced" in cost and "$" not in cost
    groups = view.locator(".lfx-bv-group")
    assert groups.count() == 2
    mapping = view.locator(".lfx-bv-group[data-error=MappingError]")
    assert "× 6" in mapping.inner_text()
    value_error = view.locator(".lfx-bv-group[data-error=ValueError]")
    assert "× 1" in value_error.inner_text()
    assert "bad review <img" in value_error.locator(".lfx-bv-msg").inner_text()  # as text
    assert view.locator(".lfx-bv-msg img").count() == 0
    # open the MappingError group: its items' traces appear below
    mapping.locator("button").click()
    explorer = view.locator(".lfx-bv-traces .lfx-te")
    explorer.wait_for(state="visible", timeout=30_000)
    lab.page.wait_for_function(
        "() => document.querySelectorAll('.lfx-bv-traces .lfx-te-row').length >= 12",
        timeout=30_000,
    )
    rows = explorer.locator(".lfx-te-row")
    items = [
        rows.nth(i).locator(".lfx-te-name").inner_text()
        for i in range(rows.count())
        if rows.nth(i).locator(".lfx-te-kind").inner_text() == "item"
    ]
    assert len(items) == 6, items
    assert explorer.locator(".lfx-st-failed").count() >= 6
    assert "MappingError items" in explorer.inner_text()
    assert lab.page.evaluate("() => window.__pwned") is None
    shot = lab.screenshot("batch-progress", cell=1)
    view.screenshot(path=str(ARTIFACTS / "batch_progress.png"))
    shutil.copyfile(ARTIFACTS / "batch_progress.png", DOCS_IMAGE)
    assert shot.exists()
    # hide again
    mapping.locator("button").click()
    lab.page.wait_for_function(
        "() => !document.querySelector('.lfx-bv-traces .lfx-te')", timeout=30_000
    )


ALL_FAIL = [
    """
import asyncio
import langfx_nb as lf

%load_ext langfx_nb


async def parse(i):
    await asyncio.sleep(0.01 * (38 - i))  # later items fail first
    raise ValueError(f"item {i} is not a number")
""",
    """
result = await lf.batch(parse, range(38), max_concurrency=38, name="numbers")
""",
]


def test_a_batch_whose_items_all_failed_says_failed_and_lists_them_in_input_order(
    lab: Lab,
) -> None:
    lab.open(lab.write_notebook("w_batch_all_failed.ipynb", ALL_FAIL))
    lab.run_all()
    lab.wait_cells_done()
    view = lab.page.locator(".lfx-bv")
    view.wait_for(state="visible", timeout=60_000)
    chip = view.locator(".lfx-st")
    assert chip.inner_text() == "failed"
    assert "lfx-st-failed" in str(chip.get_attribute("class"))  # red, not a green "done"
    group = view.locator(".lfx-bv-group[data-error=ValueError]")
    text = group.inner_text()
    assert "× 38" in text and "items 0, 1, 2, 3, 4, …" in text
    assert "item 0 is not a number" in text  # the message of the first item listed
    button = group.locator("button")
    assert button.inner_text() == "open 20 of 38 traces"
    lab.screenshot("batch-all-failed", cell=1)
