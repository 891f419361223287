"""Hostile model text shown as Markdown, in a real chromium: in the live JupyterLab notebook and
in nbconvert's HTML export of the same notebook, no payload runs (``window.__pwned`` stays
undefined, even after every link in the output is clicked and every element hovered)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.markdown_payloads import PAYLOADS

from .conftest import ARTIFACTS, Lab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

_ANSWER = PAYLOADS["escaped-backtick"] + "\n\n" + PAYLOADS["fence-info-backtick"]
_CELLS = [
    "import langfx_nb as lf\n%load_ext langfx_nb\n"
    "from langfx_nb.llms import StaticResponse\n"
    "from langfx_nb.notebook.markdown import MarkdownText",
    *(f"MarkdownText({text!r})" for text in PAYLOADS.values()),
    # the real path: a model's answer returned by a %%lf query cell
    f"lm = StaticResponse({_ANSWER!r})",
    "%%lf query --lm lm\nsay it",
]

_POKE = """(scope) => {
    const roots = [...document.querySelectorAll(scope)];
    const all = (sel) => roots.flatMap((r) => [...r.querySelectorAll(sel)]);
    for (const el of all('*')) {
        for (const type of ['mouseover', 'mouseenter', 'focus']) {
            el.dispatchEvent(new Event(type, {bubbles: true}));
        }
    }
    for (const a of all('a')) {
        a.addEventListener('click', (e) => {
            if (!(a.getAttribute('href') || '').toLowerCase().startsWith('javascript:')) {
                e.preventDefault();  // a safe link would navigate away: keep the page
            }
        });
        a.click();
    }
    return all('img, script, iframe, svg, object, embed').length;
}"""


def _notebook(path: Path) -> None:
    nb: dict[str, Any] = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"c{i}",
                "metadata": {},
                "outputs": [],
                "source": src,
            }
            for i, src in enumerate(_CELLS)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


def test_live_notebook_runs_no_payload(lab: Lab) -> None:
    _notebook(lab.server.root / "md_payloads.ipynb")
    lab.open("md_payloads.ipynb")
    lab.run_all_and_wait()
    assert lab.errors() == []
    live = lab.page.evaluate(_POKE, ".jp-OutputArea-output")
    lab.page.wait_for_timeout(500)
    assert lab.page.evaluate("() => window.__pwned") is None
    assert live == 0
    assert lab.page.locator(".jp-OutputArea-output .lfx-md").count() == len(PAYLOADS) + 1
    # the payloads are visible as text
    assert "<img src=x onerror=window.__pwned=1>" in lab.output_text(len(_CELLS) - 1)
    lab.screenshot("markdown-payloads")


def test_nbconvert_html_runs_no_payload(lab: Lab, tmp_path: Path) -> None:
    source = tmp_path / "md_payloads.ipynb"
    _notebook(source)
    jupyter = Path(sys.executable).with_name("jupyter")
    subprocess.run(
        [str(jupyter), "nbconvert", "--to", "html", "--execute", str(source)],
        check=True,
        capture_output=True,
        timeout=180,
        env={**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"},
    )
    html = source.with_suffix(".html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "md_payloads.html").write_bytes(html.read_bytes())
    lab.page.goto(html.as_uri(), wait_until="load")
    count = lab.page.evaluate(_POKE, ".jp-OutputArea-output")
    lab.page.wait_for_timeout(500)
    assert lab.page.evaluate("() => window.__pwned") is None
    assert count == 0
    assert lab.page.locator(".lfx-md").count() == len(PAYLOADS) + 1
    assert "<script>window.__pwned=1</script>" in lab.page.inner_text("body")
