"""Classic Notebook 6.5 (Google Colab's pinned package set: notebook 6.5.7, ipykernel 6.17.1,
IPython 7.34, ipywidgets 7.7.1, anywidget 0.9.21; ``scripts/host_env colab``) in Debian's
chromium: every view shows once.

Each view is displayed as two outputs, the live widget and a static HTML copy, and CSS picks
one. The rules were written for JupyterLab's output classes, so classic Notebook showed both;
and the copy of a waiting prompt said the call "did not run" while it still waited. Saved and
reopened (a new kernel: no widget models), the copies show and the widget outputs' notes hide.

Seen here and left alone: with Run All sent within about a second of the kernel starting,
ipywidgets 7.7's classic manager sometimes draws none of the widgets (their outputs stay empty);
the CSS then hides those outputs and the copies show, so nothing is blank. The test waits a few
seconds before Run All, as a person would.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts._kernel import host_python
from tests.local import free_port

from .conftest import HostServer, artifact, host_cells, host_server_env, notebook_json

pytestmark = [pytest.mark.browser, pytest.mark.hosts]

CELLS = host_cells('"MODE:", hosts.approval_mode()')


class ClassicServer(HostServer):
    """``jupyter notebook`` (6.5) from the Colab host venv; its kernel is that venv's python."""

    def __init__(self, root: Path, home: Path) -> None:
        python = Path(host_python("colab"))
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        argv = [
            str(python.with_name("jupyter")),
            "notebook",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--NotebookApp.token={self.token}",
            "--NotebookApp.password=",
            "--allow-root",
            f"--NotebookApp.notebook_dir={root}",
        ]
        super().__init__("notebook", argv, cwd=root, home=home, env=host_server_env(home))

    def url(self, path: str) -> str:
        return f"{self.base}{path}?token={self.token}"

    def wait_ready(self) -> None:
        self.wait_until(lambda: urllib.request.urlopen(self.url("/api/status"), timeout=5).close())


@pytest.fixture
def classic(tmp_path: Path) -> Iterator[ClassicServer]:
    root = tmp_path / "root"
    root.mkdir()
    (root / "classic.ipynb").write_text(notebook_json(CELLS))
    server = ClassicServer(root, tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


# Every output area that shows, cell by cell: a drawn live view, a static copy, its text.
SHOWN = """() => [...document.querySelectorAll('.cell')].map(cell =>
    [...cell.querySelectorAll('.output_area')].filter(a => a.offsetParent !== null)
        .map(a => ({
            live: !!a.querySelector('.lfx:not(.lfx-static)'),
            static: !!a.querySelector('.lfx-static'),
            text: a.innerText.trim().slice(0, 160),
        })))"""


DOM = """() => [...document.querySelectorAll('.output_area')].map(a => ({
    shown: a.offsetParent !== null,
    kids: [...a.children].map(k =>
        k.className + ' | ' + [...k.children].map(g => g.className).join(',')),
    lfx: [...a.querySelectorAll('.lfx')].map(x => x.className),
    text: a.innerText.trim().slice(0, 80)}))"""


# No output shows both a drawn live view and a static copy, no output that shows is blank, and
# at least ``n`` live explorers are drawn.
ONE_VIEW_EACH = """(n) => {
    const shown = e => e.offsetParent !== null;
    const each = [...document.querySelectorAll('.output')].every(o => {
        const areas = [...o.querySelectorAll(':scope > .output_area')].filter(shown);
        const live = areas.filter(a => a.querySelector('.lfx')).length;
        const copies = areas.filter(a => a.querySelector('.lfx-static')).length;
        return (live === 0 || copies === 0) && areas.every(a => a.innerText.trim() !== '');
    });
    return each && [...document.querySelectorAll('.lfx-te')].filter(shown).length >= n;
}"""


# ipywidgets 7's classic extension makes the kernel's widget manager some time after the
# kernel connects; widget outputs that arrive before it stay empty (its renderer draws nothing
# without a manager).
EXTENSIONS_LOADED = """() => ['anywidget', 'jupyter-js-widgets']
    .every(name => window.require && require.defined(`nbextensions/${name}/extension`))
    && !!Jupyter.notebook.kernel.widget_manager"""


def run_all(page: Any) -> None:
    page.evaluate("() => Jupyter.notebook.execute_all_cells()")


def test_classic_notebook_shows_each_view_once_and_approves_in_the_background(
    classic: ClassicServer, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    try:
        page.goto(classic.url("/notebooks/classic.ipynb"), wait_until="domcontentloaded")
        page.wait_for_function(
            "() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel"
            " && Jupyter.notebook.kernel.is_connected()",
            timeout=90_000,
        )
        # as a person would: after the page has loaded its widget extensions
        page.wait_for_function(EXTENSIONS_LOADED, timeout=60_000)
        # widgets made in the first seconds after the kernel starts can stay undrawn in
        # ipywidgets 7's classic manager (their copies show instead: see the module docstring)
        page.wait_for_timeout(3_000)
        run_all(page)
        page.wait_for_function(
            "() => Jupyter.notebook.get_cells().every(c => c.input_prompt_number !== '*'"
            " && c.input_prompt_number !== null)",
            timeout=90_000,
        )
        approve = page.locator(".lfx-ap .lfx-approve")
        approve.wait_for(state="visible", timeout=60_000)
        page.wait_for_function(ONE_VIEW_EACH, arg=2, timeout=30_000)  # both explorers drawn
        page.screenshot(path=str(artifact("classic-prompt.png")), full_page=True)
        shown = page.evaluate(SHOWN)
        text = page.locator("#notebook").inner_text()
        assert "MODE: background" in text
        assert "Paris is the capital of France." in text
        assert "did not run" not in text  # the waiting prompt's copy stays hidden
        for areas in shown:  # no blank output, and no copy next to its live view
            assert all(a["text"] for a in areas), areas
            assert not any(a["static"] for a in areas), areas
        assert [sum(a["live"] for a in areas) for areas in shown] == [0, 0, 1, 2]
        approve.click()
        page.locator(".lfx-ap-hist", has_text="approved").wait_for(timeout=30_000)
        page.screenshot(path=str(artifact("classic-approved.png")), full_page=True)
        # saved, then reopened with a new kernel (no widget models): the copies show instead
        page.wait_for_function(
            "() => !Jupyter.notebook.get_cells()[3].output_area.outputs.some("
            "o => JSON.stringify(o).includes('waiting for approval when'))",
            timeout=30_000,
        )
        page.evaluate("() => Jupyter.notebook.save_notebook()")
        page.wait_for_function("() => !Jupyter.notebook.dirty", timeout=30_000)
        page.evaluate("() => Jupyter.notebook.kernel.kill()")
        page.reload(wait_until="domcontentloaded")
        page.wait_for_function(
            "() => window.Jupyter && Jupyter.notebook && Jupyter.notebook._fully_loaded",
            timeout=90_000,
        )
        page.wait_for_function(ONE_VIEW_EACH, arg=0, timeout=30_000)
        statics = page.locator(".lfx-static")
        assert [statics.nth(i).is_visible() for i in range(statics.count())] == [True] * 3
        text = page.locator("#notebook").inner_text()
        assert "approved: add (c1)" in text  # the copy, refreshed when the prompt closed
        assert "could not be displayed" not in text and "needs its kernel" not in text
        page.screenshot(path=str(artifact("classic-reopened.png")), full_page=True)
    except Exception:
        artifact("classic-console.txt").write_text("\n".join(console[-200:]))
        with contextlib.suppress(Exception):
            dom = json.dumps(page.evaluate(DOM), indent=1)
            artifact("classic-failed-dom.json").write_text(dom)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(artifact("classic-failed.png")), full_page=True)
        raise
    finally:
        context.close()
