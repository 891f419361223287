"""Voilà, as a dashboard user meets it: a real ``voila`` server on 127.0.0.1 (its own venv,
``scripts/host_env voila``: Voilà 0.5 with ipykernel 7.4) renders a notebook with a ``%%lf
query`` on a fake model, the trace explorer and an agent that asks for approval; Debian's
chromium loads the page.

Voilà's default mode runs the whole notebook before it sends the page, so the approval can only
take the background mode (the cell returns, the run waits on the kernel's loop, the click comes
from the page drawn afterwards). Before ``hosts`` knew Voilà, ipykernel 7.4 took the live mode
there: the cell waited for a prompt nobody could see and the call was denied after 15 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts._kernel import host_python
from tests.local import free_port

from .conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.hosts]

CELLS = [
    """
    %load_ext langfx_nb
    import langfx_nb as lf
    from langfx_nb.notebook import hosts

    print("MODE:", hosts.approval_mode(), "PAGE:", hosts.current().page)


    @lf.tool
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b


    talk = lf.llms.Scripted(["Paris is the capital of France."])
    calc = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])
    """,
    "%%lf query --lm talk -o capital\nWhat is the capital of France?",
    "%lf trace",
    "%%lf agent --lm calc --tools add -o ans\nWhat is 2 + 3?",
]


def notebook(cells: list[str]) -> str:
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
                "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


class VoilaServer:
    """``voila NOTEBOOK`` from the Voilà host venv; its kernel is that venv's python."""

    def __init__(self, notebook_path: Path, home: Path) -> None:
        python = Path(host_python("voila"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        self.log_path = home / "voila.log"
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "IPYTHONDIR": str(home / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
        for key in ("LANGFX_NB_APPROVE", "LANGFX_NB_APPROVAL", "PYTHONPATH", "VIRTUAL_ENV"):
            env.pop(key, None)  # `ask` must ask, the probe decide, and the venv's own code run
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                str(python.with_name("voila")),
                str(notebook_path),
                "--no-browser",
                f"--port={self.port}",
                "--Voila.ip=127.0.0.1",
                "--show_tracebacks=True",
            ],
            cwd=notebook_path.parent,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self) -> None:
        """Until the port listens (a GET of the page would run the notebook)."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"voila exited early; see {self.log_path}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
                return
            time.sleep(0.25)
        raise RuntimeError("voila did not start in 90 s")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        self._log.close()


@pytest.fixture
def voila(tmp_path: Path) -> Iterator[VoilaServer]:
    path = tmp_path / "app" / "voila_app.ipynb"
    path.parent.mkdir()
    path.write_text(notebook(CELLS))
    server = VoilaServer(path, tmp_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


BLANK_OUTPUTS = """() => [...document.querySelectorAll('.jp-OutputArea-child')]
    .filter(c => c.offsetParent !== null && c.innerText.trim() === '').length"""


def test_voila_draws_the_views_and_an_approval_click_finishes_the_run(
    voila: VoilaServer, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    try:
        # the response ends only once the whole notebook has run (Voilà's default mode)
        page.goto(voila.base, wait_until="domcontentloaded", timeout=120_000)
        body = page.locator("body")
        body.get_by_text("MODE: background PAGE: Voilà").wait_for(timeout=60_000)
        page.locator(".lfx-stream, .lfx-md, .jp-OutputArea-output").first.wait_for()
        assert "Paris is the capital of France." in body.inner_text()
        approve = page.locator(".lfx-ap .lfx-approve")
        approve.wait_for(state="visible", timeout=60_000)
        assert "add" in page.locator(".lfx-ap-pending").inner_text()
        assert "Voilà draws the page only after the whole notebook has run" in body.inner_text()
        page.locator(".lfx-te-row").first.wait_for(state="visible", timeout=30_000)
        page.wait_for_function(f"() => ({BLANK_OUTPUTS})() === 0", timeout=30_000)
        # exactly one of each view shows: the static copies hide next to their live views
        statics = page.locator(".lfx-static")
        shown = [statics.nth(i).is_visible() for i in range(statics.count())]
        assert statics.count() >= 3 and not any(shown), shown
        page.screenshot(path=str(_artifact("voila-prompt.png")), full_page=True)
        approve.click()
        page.locator(".lfx-ap-hist", has_text="approved").wait_for(timeout=30_000)
        # the run went on: the tool ran, and the agent's row in the live explorer holds the
        # answer (the explorer's last row is the final step)
        agent = page.locator(".lfx-te-row", has_text="Agent").last
        agent.wait_for(timeout=30_000)
        page.locator(".lfx-te-row", has_text="step 2").last.wait_for(timeout=30_000)
        agent.click()
        page.get_by_text("The sum is 5.").first.wait_for(timeout=30_000)
        page.screenshot(path=str(_artifact("voila-approved.png")), full_page=True)
        assert "denied" not in page.locator(".lfx-ap").inner_text()
    except Exception:
        _artifact("voila-console.txt").write_text("\n".join(console[-200:]))
        with contextlib.suppress(Exception):
            page.screenshot(path=str(_artifact("voila-failed.png")), full_page=True)
        raise
    finally:
        context.close()


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
