"""The example notebooks in a real JupyterLab and chromium: what a user sees after Run All."""

from __future__ import annotations

import pytest

from .conftest import Lab

# Starting JupyterLab and a kernel on a loaded CI machine can eat most of the default 120 s.
pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_quickstart_runs_and_shows_a_typed_result(lab: Lab) -> None:
    lab.open("01_quickstart.ipynb")
    lab.run_all_and_wait()
    lab.screenshot("after-run-all", cell=lab.cell_index("--schema City -o city"))

    # Only the last cell fails, on purpose (it demonstrates a MappingError).
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("MappingError:"), errors

    # Text answers render as Markdown (to HTML, raw HTML off): bold is <strong>, model HTML is text.
    summary = lab.cell(lab.cell_index("%%lf query --lm writer"))
    assert summary.locator(".lfx-md strong").inner_text() == "Paris"
    assert "<b>HTML from a model</b> shows as text." in summary.inner_text()
    assert summary.locator(".jp-OutputArea b").count() == 0

    # The typed answer renders as a tree (text/html), with the values of the City.
    city = lab.cell(lab.cell_index("--schema City -o city"))
    tree = city.locator(".jp-OutputArea .lfx-fb")
    tree.wait_for()
    text = tree.inner_text()
    for expected in ("City", "Paris", "France", "2.1", "Eiffel Tower"):
        assert expected in text, text
    # no list bullets from JupyterLab's own list styles inside the result tree
    styles = tree.evaluate(
        "(t) => [...t.querySelectorAll('li')].map(li => getComputedStyle(li).listStyleType)"
    )
    assert styles and set(styles) == {"none"}, styles
    assert "(2100.0, 'Eiffel Tower')" in lab.output_text(lab.cell_index("city.population"))


AGENT_NB = "03_agents_with_approval.ipynb"


def test_agent_notebook_shows_the_trace_and_a_click_approves(lab: Lab) -> None:
    lab.open(AGENT_NB)
    lab.run_all()
    ask = lab.cell_index("%%lf agent --lm calc --tools add -o calc_answer")

    # The unattended run above finished with a live trace explorer showing its tool calls.
    guide = lab.cell(lab.cell_index("--approve allow:search,add"))
    guide.locator(".lfx-te").wait_for()
    guide.locator(".lfx-te-row", has_text="search").first.wait_for()
    assert "330 m tall" in lab.output_text(lab.cell_index("--approve allow:search,add"))

    # The `ask` cell waits for a click: its prompt shows the tool and its arguments.
    prompt = lab.cell(ask).locator(".lfx-ap-pending")
    prompt.wait_for(timeout=60_000)
    assert prompt.locator(".lfx-ap-tool").inner_text() == "add"
    assert "Add two integers." in prompt.inner_text()
    assert lab.cell(ask).locator(".jp-InputArea-prompt").inner_text().strip() == "[*]:"
    lab.screenshot("waiting-for-approval", cell=ask)
    prompt.locator("button.lfx-approve").click()

    lab.wait_cells_done()
    lab.screenshot("after-approve", cell=ask)
    assert "2 + 3 = 5." in lab.output_text(ask)
    assert lab.cell(ask).locator(".lfx-te-row .lfx-st-denied").count() == 0
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("ToolDeniedError"), errors  # the last cell


def test_clicking_deny_stops_the_run_with_tool_denied(lab: Lab) -> None:
    lab.open(AGENT_NB)
    # Run the setup cells (no agent runs), then the `ask` cell alone, as a user would.
    target = lab.cell_index("%%lf agent --lm calc --tools add -o calc_answer")
    for index, source in lab.code_cells():
        if index < target and "%%lf agent" not in source:
            lab.run_cell(index)
            lab.wait_cells_done()
    lab.run_cell(target)
    prompt = lab.cell(target).locator(".lfx-ap-pending")
    prompt.wait_for(timeout=60_000)
    prompt.locator("button.lfx-deny").click()
    lab.wait_cells_done()
    lab.screenshot("after-deny", cell=target)
    assert any(e.startswith("ToolDeniedError") for e in lab.errors()), lab.errors()
    assert "ToolDeniedError" in lab.output_text(target)
    lab.cell(target).locator(".lfx-te-row .lfx-st-denied").first.wait_for()


def test_streaming_notebook_shows_stream_views_and_typed_results(lab: Lab) -> None:
    lab.open("02_structured_streaming.ipynb")
    lab.run_all_and_wait()
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("MappingError"), errors  # the last cell
    recipe = lab.cell_index("--schema Recipe --stream -o recipe")
    lab.screenshot("recipe-streamed", cell=recipe)
    view = lab.cell(recipe).locator(".lfx-sv")
    view.wait_for()
    assert "Crêpes" in view.inner_text()
    lab.cell(recipe).locator(".lfx-sv li.lfx-done").nth(3).wait_for()  # >= 4 finished fields
    assert "(['flour', 'milk', 'eggs'], 30)" in lab.output_text(
        lab.cell_index("[i.name for i in recipe.ingredients]")
    )
    assert "MappingError" in lab.output_text(lab.cell_index("--lm sloppy"))


def test_trace_notebook_live_saved_and_big_traces(lab: Lab) -> None:
    lab.open("04_trace_explorer.ipynb")
    lab.run_all_and_wait()
    assert lab.errors() == []
    live = lab.cell(lab.cell_index("explorer = lf.nb.TraceExplorer(session"))
    live.locator(".lfx-te-row", has_text="Guide").first.wait_for()
    live.locator(".lfx-te-row", has_text="query:Fact").first.wait_for()
    saved = lab.cell(lab.cell_index("saved.write_text"))
    saved.locator(".lfx-te-row", has_text="Guide").first.wait_for()
    lab.screenshot("saved-trace", cell=lab.cell_index("saved.write_text"))

    big = lab.cell(lab.cell_index("big = lf.Session()"))
    big.locator(".lfx-te-row").first.wait_for()
    assert big.locator(".lfx-te-row").count() < 200  # only the visible rows are drawn
    big.locator(".lfx-te-bar input").fill("warning")
    big.locator(".lfx-te-bar", has_text="21 shown").wait_for()  # 20 warnings + their ancestor
    big.locator(".lfx-te-row", has_text="warning").first.wait_for()
    lab.screenshot("big-trace-filtered", cell=lab.cell_index("big = lf.Session()"))


HOSTILE = (
    "Hi <img src=x onerror=\"window.__lfx_pwned = 'img'\"> "
    "<script>window.__lfx_pwned = 'script'</script> **bold**"
)


def test_hostile_model_text_in_a_query_cell_shows_as_text_and_runs_nothing(lab: Lab) -> None:
    name = lab.write_notebook(
        "magic_hostile.ipynb",
        [
            "import langfx_nb as lf\n%load_ext langfx_nb",
            f"hostile = lf.llms.StaticResponse({HOSTILE!r})",
            "%%lf query --lm hostile\nsay hi",
        ],
    )
    lab.open(name)
    lab.run_all_and_wait()
    assert lab.errors() == []
    text = lab.output_text(2)
    out = lab.cell(2).locator(".jp-OutputArea")
    assert "<img src=x onerror=" in text and "<script>" in text
    assert out.locator("img, script").count() == 0
    assert out.locator("strong").inner_text() == "bold"  # Markdown still renders
    assert lab.page.evaluate("() => window.__lfx_pwned === undefined")
    lab.screenshot("hostile-text", cell=2)
