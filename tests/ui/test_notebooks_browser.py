"""The example notebooks in a real JupyterLab and chromium: what a user sees after Run All."""

from __future__ import annotations

import pytest

from .conftest import Lab

pytestmark = pytest.mark.browser


def test_quickstart_runs_and_shows_a_typed_result(lab: Lab) -> None:
    lab.open("01_quickstart.ipynb")
    lab.run_all_and_wait()
    lab.screenshot("after-run-all")

    # Only the last cell fails, on purpose (it demonstrates a MappingError).
    errors = lab.errors()
    assert len(errors) == 1 and errors[0].startswith("MappingError:"), errors

    # Text answers render as Markdown: bold is <strong>, model HTML is visible text.
    summary = lab.cell(lab.cell_index("%%lf query --lm writer"))
    assert summary.locator(".jp-RenderedMarkdown strong").inner_text() == "Paris"
    assert "<b>HTML from a model</b> shows as text." in summary.inner_text()
    assert summary.locator(".jp-OutputArea b").count() == 0

    # The typed answer renders as a tree (text/html), with the values of the City.
    city = lab.cell(lab.cell_index("--schema City -o city"))
    tree = city.locator(".jp-OutputArea .lfx-fb")
    assert tree.count() == 1
    text = tree.inner_text()
    for expected in ("City", "Paris", "France", "2.1", "Eiffel Tower"):
        assert expected in text, text
    assert "(2100.0, 'Eiffel Tower')" in lab.output_text(lab.cell_index("city.population"))
