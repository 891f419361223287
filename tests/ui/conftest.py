"""The shared real-browser harness: JupyterLab on 127.0.0.1 driven by Debian's chromium.

Session-scoped: one JupyterLab server (on a temporary copy of ``notebooks/``, isolated config,
runtime and workspace dirs, a random token, ``--expose-app-in-browser`` so tests can run
JupyterLab commands) and one headless chromium launched through Playwright from
``/usr/bin/chromium`` (``playwright install`` is never used). Each test gets a fresh page;
``Lab.open(name)`` opens a notebook in a fresh workspace (``?reset``) so no earlier layout or
kernel leaks in. Screenshots go to ``artifacts/ui/`` (gitignored). Everything started here is
stopped at the end of the session, including the kernels the server started.

Every browser test carries ``@pytest.mark.browser``; run them with
``.venv/bin/pytest tests/ui -m browser``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.local import CHROMIUM, CHROMIUM_ARGS, free_port

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "artifacts" / "ui"
SERVER_START_TIMEOUT = 90.0  # a loaded 2-core CI box can take a while to import JupyterLab
KERNEL_TIMEOUT_MS = 90_000


# Render every cell (no windowing, so off-screen outputs exist in the DOM) and no news toast.
_LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}


def artifact(name: str) -> Path:
    """A path under ``ARTIFACTS`` for a screenshot or log kept for diagnosis."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


def notebook_json(cells: list[str], kernel: str = "python3") -> str:
    """A notebook of code cells (each dedented) on ``kernel`` (a kernelspec name), as JSON."""
    import textwrap

    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "id": f"c{i}",
                    "metadata": {},
                    "outputs": [],
                    "source": textwrap.dedent(src).strip(),
                }
                for i, src in enumerate(cells)
            ],
            "metadata": {
                "kernelspec": {
                    "display_name": "Python 3" if kernel == "python3" else kernel,
                    "language": "python",
                    "name": kernel,
                }
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def host_server_env(home: Path) -> dict[str, str]:
    """The environment of a host's own server (Voilà, classic Notebook) started from its venv:
    Jupyter's folders under ``home``; no approval settings (``ask`` must ask, the probe decide)
    and no ``PYTHONPATH``/``VIRTUAL_ENV`` (the venv's own install runs)."""
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    for key in ("LANGFX_NB_APPROVE", "LANGFX_NB_APPROVAL", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(key, None)
    return env


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a server started with ``start_new_session``, then SIGKILL if it will not go."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


# A host test's notebook: one setup cell that prints ``probe`` (what the host decided), then a
# query, its trace, and an agent whose tool call waits for approval.
HOST_CELLS = [
    """
    %load_ext langfx_nb
    import langfx_nb as lf
    from langfx_nb.notebook import hosts

    print({probe})


    @lf.tool
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b


    talk = lf.llms.Scripted(["Paris is the capital of France."])
    calc = lf.llms.Scripted([lf.ToolCall("c1", "add", {{"a": 2, "b": 3}}), "The sum is 5."])
    """,
    "%%lf query --lm talk -o capital\nWhat is the capital of France?",
    "%lf trace",
    "%%lf agent --lm calc --tools add -o ans\nWhat is 2 + 3?",
]


def host_cells(probe: str) -> list[str]:
    """:data:`HOST_CELLS` whose first cell prints ``probe`` (Python expressions)."""
    return [HOST_CELLS[0].format(probe=probe), *HOST_CELLS[1:]]


class HostServer:
    """A notebook host's own server (classic Notebook, Voilà, marimo) from its venv: its own
    process group, its output in ``home/NAME.log``, stopped with :func:`stop_group`."""

    def __init__(
        self, name: str, argv: list[str], *, cwd: Path, home: Path, env: dict[str, str]
    ) -> None:
        self.name = name
        self.log_path = home / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def wait_until(self, ready: Callable[[], object], timeout_s: float = 90) -> None:
        """Until ``ready()`` returns without an ``OSError`` (``URLError`` is one)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{self.name} exited early: {tail}")
            with contextlib.suppress(OSError):
                ready()
                return
            time.sleep(0.25)
        raise RuntimeError(f"{self.name} did not start in {timeout_s:.0f} s")

    def stop(self) -> None:
        stop_group(self.proc)
        self._log.close()


class LabServer:
    """A JupyterLab process serving a directory; ``url(path)`` adds the token."""

    def __init__(
        self,
        root: Path,
        home: Path,
        *,
        nodelay: bool = False,
        connection_class: str | None = None,
    ) -> None:
        """``nodelay``: kernel websockets with Nagle's algorithm off
        (``langfx_nb.notebook.server.NoDelayKernelConnection``); off, the stock server.
        ``connection_class``: another kernel websocket connection class (by import name)."""
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "jupyterlab.log"
        settings = home / "lab-settings"
        for plugin, values in _LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "IPYTHONDIR": str(home / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
        env.pop("LANGFX_NB_APPROVE", None)  # the browser tests click: `ask` must really ask
        jupyter = Path(sys.executable).with_name("jupyter")
        cmd = [
            str(jupyter),
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--ServerApp.token={self.token}",
            "--ServerApp.password=",
            "--allow-root",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.workspaces_dir={home / 'workspaces'}",
            f"--LabApp.user_settings_dir={settings}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if nodelay:
            connection_class = "langfx_nb.notebook.server.NoDelayKernelConnection"
        if connection_class is not None:
            cmd.append(f"--ServerApp.kernel_websocket_connection_class={connection_class}")
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def url(self, path: str, **query: str) -> str:
        params = "&".join(
            [*(f"{k}={v}" if v else k for k, v in query.items()), f"token={self.token}"]
        )
        return f"{self.base}{path}?{params}"

    def api(self, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(
            f"{self.base}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
            data=b"" if method == "POST" else None,
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early; see {self.log_path}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                self.api("/api/status")
                return
            time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not start in {SERVER_START_TIMEOUT:.0f}s")

    def stop(self) -> None:
        """Shut the server (and the kernels it started) down; kill it if it will not go."""
        with contextlib.suppress(Exception):
            for kernel in self.api("/api/kernels"):
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        with contextlib.suppress(Exception):
            self.api("/api/shutdown", method="POST")
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self._log.close()
        with contextlib.suppress(OSError):  # kept for diagnosis next to the screenshots
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.log_path, ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    if not NOTEBOOKS.is_dir():
        pytest.skip("no notebooks/ directory")
    home = tmp_path_factory.mktemp("jupyter-home")
    root = tmp_path_factory.mktemp("lab-root")
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy2(nb, root / nb.name)
    server = LabServer(root, home, nodelay=True)  # as scripts/lab serves the tours
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class Lab:
    """One page of JupyterLab plus the helpers the UI tests share."""

    def __init__(self, page: Any, server: LabServer, name: str) -> None:
        self.page = page
        self.server = server
        self.name = name
        self.console: list[str] = []
        page.on("console", lambda msg: self.console.append(f"{msg.type}: {msg.text}"))
        page.on("pageerror", lambda err: self.console.append(f"pageerror: {err}"))

    # -- navigation ----------------------------------------------------------------------------

    def open(self, notebook: str) -> None:
        """Open ``notebook`` in a fresh workspace and wait for its kernel to be idle."""
        workspace = f"t{uuid.uuid4().hex[:10]}"
        self.page.goto(
            self.server.url(f"/lab/workspaces/{workspace}/tree/{notebook}", reset=""),
            wait_until="domcontentloaded",
        )
        self.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        self.wait_kernel_idle()

    def write_notebook(self, name: str, cells: list[str]) -> str:
        """Write a notebook of code cells into the served directory; returns its name."""
        nb = {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "id": f"c{i}",
                    "metadata": {},
                    "outputs": [],
                    "source": src.strip("\n"),
                }
                for i, src in enumerate(cells)
            ],
            "metadata": {
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        (self.server.root / name).write_text(json.dumps(nb))
        return name

    def command(self, command: str, args: dict[str, Any] | None = None) -> None:
        """Start a JupyterLab command; returns at once (Run All's promise would wait for every
        cell, including one waiting for a click)."""
        self.page.evaluate(
            "([c, a]) => { window.jupyterapp.commands.execute(c, a); }", [command, args or {}]
        )

    # -- running -------------------------------------------------------------------------------

    def kernel_status(self) -> str | None:
        status: str | None = self.page.evaluate(
            """() => {
                const w = window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext && w.sessionContext.session
                    && w.sessionContext.session.kernel;
                return k ? k.status : null;
            }"""
        )
        return status

    def wait_kernel_idle(self, timeout_ms: int = KERNEL_TIMEOUT_MS) -> None:
        self.page.wait_for_function(
            """() => {
                const w = window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext && w.sessionContext.session
                    && w.sessionContext.session.kernel;
                return !!k && k.status === 'idle';
            }""",
            timeout=timeout_ms,
        )

    def run_all(self) -> None:
        """Run every cell (as the Run ▸ Run All Cells menu does); does not wait."""
        self.command("notebook:run-all-cells")

    def run_all_and_wait(self, timeout_ms: int = KERNEL_TIMEOUT_MS) -> None:
        self.run_all()
        self.wait_cells_done(timeout_ms)
        self.wait_all_rendered()

    def wait_all_rendered(self, timeout_ms: int = 20_000) -> bool:
        """Best effort: wait until every output in the notebook shows some text (Markdown,
        HTML and widget views render after the kernel is idle). False on timeout."""
        try:
            self.page.wait_for_function(
                """() => [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')]
                    .every(o => o.textContent.trim().length > 0)""",
                timeout=timeout_ms,
            )
        except Exception:
            return False
        return True

    def wait_cells_done(self, timeout_ms: int = KERNEL_TIMEOUT_MS) -> None:
        """Wait until no code cell is queued or running (`[*]`) and the kernel is idle."""
        self.page.wait_for_function(
            """() => {
                const prompts = [...document.querySelectorAll(
                    '.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')];
                const w = window.jupyterapp.shell.currentWidget;
                const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
                return prompts.length > 0 && prompts.every(p => !p.textContent.includes('*'))
                    && !!k && k.status === 'idle';
            }""",
            timeout=timeout_ms,
        )

    def select_cell(self, index: int) -> None:
        self.page.evaluate(
            "(i) => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = i; }", index
        )

    def run_cell(self, index: int) -> None:
        """Select code cell ``index`` and press Shift+Enter, as a user would; does not wait."""
        self.select_cell(index)
        self.page.locator(".jp-Notebook .jp-Cell").nth(index).click()
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Shift+Enter")

    # -- reading -------------------------------------------------------------------------------

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def cell_index(self, source_contains: str) -> int:
        """Index of the first code cell whose source contains the text."""
        index: int = self.page.evaluate(
            """(needle) => {
                const cells = window.jupyterapp.shell.currentWidget.content.widgets;
                return cells.findIndex(c => c.model.type === 'code'
                    && c.model.sharedModel.getSource().includes(needle));
            }""",
            source_contains,
        )
        if index < 0:
            raise LookupError(f"no cell contains {source_contains!r}")
        return index

    def code_cells(self) -> list[tuple[int, str]]:
        """(index, source) of every code cell, in order."""
        cells: list[tuple[int, str]] = [
            (int(i), str(src))
            for i, src in self.page.evaluate(
                """() => window.jupyterapp.shell.currentWidget.content.widgets
                    .map((c, i) => [i, c.model.type, c.model.sharedModel.getSource()])
                    .filter(x => x[1] === 'code').map(x => [x[0], x[2]])"""
            )
        ]
        return cells

    def wait_outputs_rendered(self, index: int, timeout_ms: int = 30_000) -> None:
        """Wait until cell ``index`` has outputs and each has rendered some text (Markdown
        and HTML render asynchronously, after the kernel is already idle)."""
        self.page.wait_for_function(
            """(i) => {
                const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
                const outs = [...cell.node.querySelectorAll('.jp-OutputArea-output')];
                return outs.length > 0 && outs.every(o => o.textContent.trim().length > 0);
            }""",
            arg=index,
            timeout=timeout_ms,
        )

    def output_text(self, index: int) -> str:
        """The rendered text of cell ``index``'s outputs (waits until they are rendered)."""
        self.wait_outputs_rendered(index)
        text: str = self.cell(index).locator(".jp-OutputArea").inner_text()
        return text

    def errors(self) -> list[str]:
        """The error outputs of all cells (ename: evalue lines)."""
        found: list[str] = self.page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(c => c.model.type === 'code')
                .flatMap(c => { const o = c.model.outputs; const out = [];
                    for (let i = 0; i < o.length; i++) { const j = o.get(i).toJSON();
                        if (j.output_type === 'error') out.push(j.ename + ': ' + j.evalue); }
                    return out; })"""
        )
        return found

    def dump_state(self, label: str) -> Path:
        """Write every code cell's prompt, source head and outputs plus the browser console
        to artifacts/ui/ (what a failed run in CI leaves to look at)."""
        cells = self.page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                .filter(c => c.model.type === 'code')
                .map(c => ({prompt: c.promptNode ? c.promptNode.textContent : '',
                            source: c.model.sharedModel.getSource().slice(0, 80),
                            outputs: c.model.outputs.toJSON()}))"""
        )
        state = {"kernel": self.kernel_status(), "cells": cells, "console": self.console[-200:]}
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.name}-{label}")
        path = ARTIFACTS / f"{safe}.json"
        path.write_text(json.dumps(state, indent=1, default=str))
        return path

    def screenshot(self, label: str, cell: int | None = None) -> Path:
        """Save a PNG under artifacts/ui/; ``cell`` scrolls that cell into view first."""
        if cell is not None:
            with contextlib.suppress(Exception):
                self.cell(cell).scroll_into_view_if_needed(timeout=5_000)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.name}-{label}")
        path = ARTIFACTS / f"{safe}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # One rerun per browser test guards against a rare, not yet reproduced failure (see
    # docs/notebook.md, "Browser tests"); a second failure is reported with its artifacts.
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.flaky(reruns=1))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def lab(browser: Any, lab_server: LabServer, request: pytest.FixtureRequest) -> Iterator[Lab]:
    """A fresh browser context and page on the shared JupyterLab; screenshot at the end."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    harness = Lab(page, lab_server, request.node.name)
    try:
        yield harness
    finally:
        with contextlib.suppress(Exception):
            harness.screenshot("final")
        if request.node.stash.get(_FAILED, False):
            with contextlib.suppress(Exception):
                harness.dump_state("failed")
        context.close()
        with contextlib.suppress(Exception):
            for kernel in lab_server.api("/api/kernels"):
                lab_server.api(f"/api/kernels/{kernel['id']}", method="DELETE")
