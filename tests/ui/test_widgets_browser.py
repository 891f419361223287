"""The widgets in a real JupyterLab + Debian chromium: clicks decide tool calls, the trace and
the stream view update live, and hostile model text stays inert text.

Each test writes its own small notebook into the shared server's root (the harness in
``conftest.py`` serves a temporary copy of ``notebooks/``) and drives it like a user would.
"""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

import pytest

from .conftest import Lab

pytestmark = pytest.mark.browser

SETUP = """
import langfx_nb as lf
from langfx_nb.llms import Scripted, StaticResponse
from langfx_nb.notebook.approval import ApprovalPolicy
from langfx_nb.notebook.stream_view import StreamView
from langfx_nb.notebook.trace_explorer import TraceExplorer


@lf.tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


def final(request):
    return f"The answer is {request.messages[-1].text}."
"""

AGENT_CELLS = [
    SETUP,
    """
session = lf.Session(Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), final]))
explorer = TraceExplorer(session, title="agent run")
explorer
""",
    """
policy = ApprovalPolicy(tools=[add], render_timeout=60)
answer = await lf.Agent("add 2 and 3", tools=[add], allow_tool=policy).invoke(session)
print("ANSWER:", answer)
""",
]


def run_all_nowait(lab: Lab) -> None:
    """Start Run All without waiting for it (``Lab.run_all`` returns the command's promise, and
    ``page.evaluate`` waits for it, i.e. until every cell has finished)."""
    lab.page.evaluate(
        "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return true; }"
    )


def write_notebook(lab: Lab, name: str, cells: list[str]) -> str:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": textwrap.dedent(src).strip(),
            }
            for src in cells
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (lab.server.root / name).write_text(json.dumps(nb))
    return name


def explorer_rows(lab: Lab) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = lab.page.evaluate(
        """() => [...document.querySelectorAll('.lfx-te-row')]
            .filter(r => r.style.display !== 'none')
            .map(r => ({kind: r.querySelector('.lfx-te-kind').textContent,
                        name: r.querySelector('.lfx-te-name').textContent,
                        status: r.querySelector('.lfx-st').textContent}))"""
    )
    return rows


def wait_row(lab: Lab, kind: str, status: str, timeout_s: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = explorer_rows(lab)
        if any(r["kind"] == kind and r["status"] == status for r in rows):
            return rows
        lab.page.wait_for_timeout(100)
    raise AssertionError(f"no {kind} row with status {status}: {rows}")


def test_click_approve_and_the_agent_finishes_with_the_tool_result(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_approve.ipynb", AGENT_CELLS))
    run_all_nowait(lab)
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    approve.wait_for(state="visible", timeout=60_000)
    prompt = lab.page.locator(".lfx-ap-pending").inner_text()
    assert "add" in prompt and "c1" in prompt and "Add two integers." in prompt
    # the trace is live while the cell waits for the click: the call shows it is waiting
    wait_row(lab, "tool_call", "waiting for approval")
    # the waiting call selected: its record comes from the kernel, and follows the node
    call = lab.page.locator(
        ".lfx-te-row", has=lab.page.locator(".lfx-te-kind", has_text="tool_call")
    )
    call.locator(".lfx-te-name").click()
    detail = lab.page.locator(".lfx-te-detail")
    detail.locator("h4", has_text="Policy decision").wait_for(timeout=30_000)
    assert "Output" not in detail.inner_text()
    lab.screenshot("approval-prompt")
    approve.click()
    lab.wait_cells_done()
    out = lab.output_text(2)
    assert "ANSWER: The answer is 5." in out, out
    detail.locator("h4", has_text="Output").wait_for(timeout=30_000)  # the call ended: 5
    rows = wait_row(lab, "tool_call", "ok")
    assert any(
        r["kind"] == "action" and r["name"] == "Agent" and r["status"] == "ok" for r in rows
    ), rows
    assert "approved" in lab.page.locator(".lfx-ap-hist").inner_text()
    assert lab.errors() == []
    lab.screenshot("approved")


def test_click_deny_raises_tool_denied_error_and_shows_a_denied_node(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_deny.ipynb", AGENT_CELLS))
    run_all_nowait(lab)
    deny = lab.page.locator(".lfx-ap .lfx-deny")
    deny.wait_for(state="visible", timeout=60_000)
    deny.click()
    lab.wait_cells_done()
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("ToolDeniedError:"), errors
    wait_row(lab, "tool_call", "denied")
    assert lab.page.locator(".lfx-te .lfx-st-denied").count() >= 1
    # a second click on the old prompt is impossible: the prompt is gone
    assert lab.page.locator(".lfx-ap .lfx-deny").count() == 0
    lab.screenshot("denied")


STREAM_CELLS = [
    SETUP,
    """
import pydantic

class Person(pydantic.BaseModel):
    name: str
    motto: str

answer = '```python\\nPerson(name="Ada Lovelace", motto="' + "poetical science " * 6 + '")\\n```'
lm = StaticResponse(answer, chunk_size=4, delay=0.08)
view = StreamView()
person = await view.consume(lf.query_stream("who?", Person, lm=lm))
print("DONE:", person.name)
""",
]


def test_stream_view_fills_in_field_by_field(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_stream.ipynb", STREAM_CELLS))
    run_all_nowait(lab)
    lab.page.locator(".lfx-sv").wait_for(state="visible", timeout=60_000)
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = lab.page.locator(".lfx-sv").inner_text()
        if not seen or seen[-1] != text:
            seen.append(text)
        if "validated" in text:
            break
        lab.page.wait_for_timeout(50)
    lab.wait_cells_done()
    assert "DONE: Ada Lovelace" in lab.output_text(1)
    partial = [t for t in seen if "motto" in t and "validated" not in t]
    assert len(partial) >= 3, seen  # the motto string was seen growing
    lengths = [len(t) for t in partial]
    assert lengths == sorted(lengths), lengths
    assert lab.page.locator(".lfx-sv li.lfx-done").count() >= 2  # completed fields marked
    assert "✓ validated" in seen[-1]
    lab.screenshot("stream-done")


HOSTILE = '<img src=x onerror="window.__lfx_xss=1"><script>window.__lfx_xss=2</script>'

HOSTILE_CELLS = [
    SETUP,
    f"""
HOSTILE = {HOSTILE!r}
session = lf.Session(StaticResponse("Answer: " + HOSTILE))
explorer = TraceExplorer(session)
explorer
""",
    """
text = await session.query("say it")
view = StreamView()
lm = StaticResponse("# Title\\n" + HOSTILE, chunk_size=7)
await view.consume(lf.query_stream("again", lm=lm))
session.log("info", HOSTILE)
lf.AIMessage(HOSTILE)
""",
]


def test_hostile_model_text_is_shown_as_text_and_runs_nothing(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_hostile.ipynb", HOSTILE_CELLS))
    lab.run_all_and_wait()
    assert lab.errors() == []
    # select the query node to show its raw response in the detail pane
    row = lab.page.locator(".lfx-te-row", has_text="log").first
    row.wait_for(timeout=30_000)
    lab.page.locator(".lfx-te-row .lfx-te-kind", has_text="query").first.click()
    # details may come on demand from the kernel (snapshots carry node summaries)
    lab.page.locator(".lfx-te-detail", has_text="Output").wait_for(timeout=30_000)
    detail = lab.page.locator(".lfx-te-detail").inner_text()
    assert "<img src=x onerror=" in detail, detail
    sv = lab.page.locator(".lfx-sv").inner_text()
    assert "<script>window.__lfx_xss=2</script>" in sv, sv
    assert lab.page.locator(".lfx-sv h3").inner_text() == "Title"  # the Markdown subset rendered
    assert HOSTILE.split(">")[0] in lab.output_text(2)  # Message rich display: escaped text
    lab.page.wait_for_timeout(500)
    assert lab.page.evaluate("() => window.__lfx_xss === undefined")
    for area in (".lfx-te", ".lfx-sv", ".jp-OutputArea-output"):
        assert lab.page.locator(f"{area} img").count() == 0, area
        assert lab.page.locator(f"{area} script").count() == 0, area
    lab.screenshot("hostile")


def test_page_reload_shows_the_final_trace_from_the_kernel(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_reload.ipynb", AGENT_CELLS))
    run_all_nowait(lab)
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    approve.wait_for(state="visible", timeout=60_000)
    approve.click()
    lab.wait_cells_done()
    before = wait_row(lab, "tool_call", "ok")
    # save (outputs keep the widget views; the kernel lives on), then check it is on disk
    lab.page.evaluate("() => window.jupyterapp.shell.currentWidget.context.save()")
    lab.page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
    )
    saved = json.loads((lab.server.root / "w_reload.ipynb").read_text())
    assert any(c["outputs"] for c in saved["cells"]), "the notebook was not saved with outputs"
    lab.page.reload(wait_until="domcontentloaded")
    lab.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
    lab.wait_kernel_idle()
    after = wait_row(lab, "tool_call", "ok", timeout_s=60)
    assert sorted(map(str, after)) == sorted(map(str, before))
    lab.screenshot("reloaded")


def test_approve_with_edited_arguments_from_the_schema_form(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_edit.ipynb", AGENT_CELLS))
    run_all_nowait(lab)
    prompt = lab.page.locator(".lfx-ap-pending")
    prompt.locator("button.lfx-edit").wait_for(state="visible", timeout=60_000)
    prompt.locator("button.lfx-edit").click()
    field = prompt.locator('input[name="a"]')
    assert field.input_value() == "2"
    field.fill("2.5")  # not an integer: refused in the page, the prompt keeps waiting
    prompt.locator("button.lfx-approve-edited").click()
    assert "a: expected an integer" in prompt.locator(".lfx-field-error").first.inner_text()
    field.fill("10")
    prompt.locator("button.lfx-approve-edited").click()
    lab.wait_cells_done()
    assert "ANSWER: The answer is 13." in lab.output_text(2)
    assert "approved with edited arguments" in lab.page.locator(".lfx-ap-hist").inner_text()
    lab.screenshot("edited")


def test_approval_shows_the_kernels_validation_error_at_its_field(lab: Lab) -> None:
    # The form accepts 0 (an integer); the tool's own constraint (seats >= 1) is checked in
    # the kernel, and its error comes back to the seats field, not to the prompt in general.
    cells = [
        """
import typing
import pydantic
import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.approval import ApprovalPolicy


@lf.tool
async def book(seats: typing.Annotated[int, pydantic.Field(ge=1)], name: str) -> int:
    \"\"\"Book seats.\"\"\"
    return seats * 10


def final(request):
    return f"Done: {request.messages[-1].text}."
""",
        """
lm = Scripted([lf.ToolCall("c1", "book", {"seats": 2, "name": "Ada"}), final])
policy = ApprovalPolicy(tools=[book], render_timeout=60)
answer = await lf.Agent("book", tools=[book], allow_tool=policy).invoke(lm=lm)
print("ANSWER:", answer)
""",
    ]
    lab.open(write_notebook(lab, "w_field_error.ipynb", cells))
    run_all_nowait(lab)
    prompt = lab.page.locator(".lfx-ap-pending")
    prompt.locator("button.lfx-edit").wait_for(state="visible", timeout=60_000)
    prompt.locator("button.lfx-edit").click()
    prompt.locator('input[name="seats"]').fill("0")
    prompt.locator("button.lfx-approve-edited").click()
    seats = prompt.locator(".lfx-form-row", has=lab.page.locator('input[name="seats"]'))
    error = seats.locator(".lfx-field-error")
    error.filter(has_text="greater than or equal to 1").wait_for(timeout=30_000)
    assert error.inner_text() == "seats: Input should be greater than or equal to 1"
    assert "lfx-invalid" in (seats.get_attribute("class") or "")
    name_row = prompt.locator(".lfx-form-row", has=lab.page.locator('input[name="name"]'))
    assert name_row.locator(".lfx-field-error").inner_text() == ""
    assert prompt.locator(".lfx-ap-error").inner_text() == ""  # nothing left for the box
    prompt.locator('input[name="seats"]').fill("3")
    prompt.locator("button.lfx-approve-edited").click()
    lab.wait_cells_done()
    assert "ANSWER: Done: 30." in lab.output_text(1)


READING_CELLS = [
    SETUP,
    """
import pydantic

class Planet(pydantic.BaseModel):
    name: str
    moons: int = pydantic.Field(ge=0)

lm = StaticResponse("```python\\nPlanet(name='Mars', moons=-2)\\n```", chunk_size=6)
session = lf.Session(lm)
explorer = TraceExplorer(session, title="reading")
explorer
""",
    """
ask = "How many moons has {{p}}? Answer with the number."
try:
    await session.query(ask, Planet, vars={"p": "Mars"})
except lf.MappingError as exc:
    print("QUOTED:", "the model's answer:" in str(exc))
session.log("warning", "the cache is cold")
view = StreamView(schema=Planet)
try:
    await view.consume(session.query_stream(ask, Planet, vars={"p": "Mars"}))
except lf.MappingError:
    print("STREAM FAILED")
""",
]


def test_what_a_new_user_reads_says_what_happened(lab: Lab) -> None:
    lab.open(write_notebook(lab, "w_reading.ipynb", READING_CELLS))
    lab.run_all_and_wait()
    assert "QUOTED: True" in lab.output_text(2) and "STREAM FAILED" in lab.output_text(2)
    # the stream view: "validation_failed" (it parsed), the field's error named once
    sv = lab.page.locator(".lfx-sv")
    assert sv.locator(".lfx-st").inner_text() == "validation_failed"
    text = sv.inner_text()
    assert text.count("greater than or equal to 0") == 1, text
    assert "1 field did not validate (marked ✗ above)" in text
    # the explorer: a warning log shows its level; the summary has no doubled words
    rows = wait_row(lab, "log", "warning")
    assert [r["status"] for r in rows if r["kind"] == "query"] == ["failed", "failed"]
    summary = lab.page.locator(".lfx-te-summary").inner_text()
    assert "· cost unknown (2 calls unpriced" in summary and "total cost cost" not in summary
    below = lab.page.locator(".lfx-te-row", has_text="session").first.inner_text()
    assert "2 failed below" in below, below
    # a query's Conversation opens on the user's request, not on the protocol's example
    lab.page.locator(".lfx-te-row .lfx-te-kind", has_text="query").first.click()
    user = lab.page.locator(".lfx-te-detail .lfx-msg-user pre").first
    user.wait_for(timeout=30_000)
    shown = user.inner_text()
    assert "REQUEST:\nHow many moons has Mars? Answer with the number." in shown, shown
    assert "apple" not in shown  # the built-in example is under "show all"
    lab.screenshot("reading")
