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
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hosts._kernel import host_python
from tests.local import free_port

from .conftest import HostServer, artifact, host_cells, host_server_env, notebook_json

pytestmark = [pytest.mark.browser, pytest.mark.hosts]

CELLS = host_cells('"MODE:", hosts.approval_mode(), "PAGE:", hosts.current().page')


class VoilaServer(HostServer):
    """``voila NOTEBOOK`` from the Voilà host venv; its kernel is that venv's python."""

    def __init__(self, notebook_path: Path, home: Path) -> None:
        python = Path(host_python("voila"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/"
        env = host_server_env(home)
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        argv = [
            str(python.with_name("voila")),
            str(notebook_path),
            "--no-browser",
            f"--port={self.port}",
            "--Voila.ip=127.0.0.1",
            "--show_tracebacks=True",
        ]
        super().__init__("voila", argv, cwd=notebook_path.parent, home=home, env=env)

    def wait_ready(self) -> None:
        """Until the port listens (a GET of the page would run the notebook)."""
        self.wait_until(
            lambda: socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        )


@pytest.fixture
def voila(tmp_path: Path) -> Iterator[VoilaServer]:
    path = tmp_path / "app" / "voila_app.ipynb"
    path.parent.mkdir()
    path.write_text(notebook_json(CELLS))
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
        page.screenshot(path=str(artifact("voila-prompt.png")), full_page=True)
        approve.click()
        page.locator(".lfx-ap-hist", has_text="approved").wait_for(timeout=30_000)
        # the run went on: the tool ran, and the agent's row in the live explorer holds the
        # answer (the explorer's last row is the final step)
        agent = page.locator(".lfx-te-row", has_text="Agent").last
        agent.wait_for(timeout=30_000)
        page.locator(".lfx-te-row", has_text="step 2").last.wait_for(timeout=30_000)
        agent.click()
        page.get_by_text("The sum is 5.").first.wait_for(timeout=30_000)
        page.screenshot(path=str(artifact("voila-approved.png")), full_page=True)
        assert "denied" not in page.locator(".lfx-ap").inner_text()
    except Exception:
        artifact("voila-console.txt").write_text("\n".join(console[-200:]))
        with contextlib.suppress(Exception):
            page.screenshot(path=str(artifact("voila-failed.png")), full_page=True)
        raise
    finally:
        context.close()
