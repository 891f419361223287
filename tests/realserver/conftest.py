"""The real-server tier: llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct (98 MB).

``scripts/realserver_setup`` builds the server and fetches the model into a cache outside the
checkout (about 8.5 minutes the first time on 2 cores, then instant). It runs once when the
collected tests include any ``realserver`` test, at the end of collection, so the build is
never inside a test's timeout; ``scripts/test`` also runs it before pytest.

One server (``llama_server``) serves the whole session; tests that kill a server start their
own. Servers listen on 127.0.0.1 at a free port, with ``-t 1`` (two threads fell to 1.4
tokens/s while another process held a core) and ``-c 2048 --jinja``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import langfx_nb as lf
from tests.local import free_port

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "scripts" / "realserver_setup"
_PATHS = pytest.StashKey[dict[str, str] | str]()  # the paths, or why the setup failed


def _setup() -> dict[str, str]:
    """Run the build-or-reuse script; its stdout is ``server=PATH`` and ``model=PATH``."""
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(
        [str(SETUP)], env=env, check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    paths = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert {"server", "model"} <= paths.keys(), out
    return paths


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.get_closest_marker("realserver") for item in session.items):
        try:
            session.config.stash[_PATHS] = _setup()
        except (subprocess.CalledProcessError, OSError, AssertionError) as exc:
            session.config.stash[_PATHS] = f"scripts/realserver_setup failed: {exc}"


class LlamaServer:
    """One ``llama-server`` process; ``start`` waits until ``/health`` answers 200."""

    def __init__(self, server: str, model: str, *args: str) -> None:
        self.server, self.model, self.args = server, model, args
        self.port = free_port()
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        cmd = [self.server, "-m", self.model, "--host", "127.0.0.1", "--port", str(self.port)]
        cmd += ["-c", "2048", "--jinja", "-t", "1", *self.args]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited: see {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"llama-server not healthy after {timeout} s: see {self.log}")

    def kill(self) -> None:
        """SIGKILL: the server dies without closing its connections cleanly."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


@pytest.fixture(scope="session")
def llama_paths(request: pytest.FixtureRequest) -> dict[str, str]:
    paths = request.config.stash.get(_PATHS, None)
    if isinstance(paths, str):
        pytest.fail(paths)  # red, not skipped: CI must not pass without the real server
    return paths if paths is not None else _setup()


@pytest.fixture(scope="session")
def llama_server(llama_paths: dict[str, str]) -> Iterator[LlamaServer]:
    server = LlamaServer(llama_paths["server"], llama_paths["model"])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def openai_at(url: str, **kw: object) -> lf.llms.OpenAI:
    return lf.llms.OpenAI("smollm2", base_url=f"{url}/v1", **kw)  # type: ignore[arg-type]


@pytest.fixture
def allow_requests() -> Iterator[None]:
    lf.llms.allow_model_requests(True)  # the suite-wide guard blocks real requests
    try:
        yield
    finally:
        lf.llms.allow_model_requests(False)


@pytest.fixture
async def lm(llama_server: LlamaServer, allow_requests: None) -> AsyncIterator[lf.llms.OpenAI]:
    model = openai_at(llama_server.url)
    try:
        yield model
    finally:
        await model.aclose()
