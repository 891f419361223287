"""``NoDelayKernelConnection`` on a real Jupyter Server: a kernel websocket it serves has
``TCP_NODELAY`` on its socket (Jupyter Server's own class leaves it off, which delays each
small kernel → page frame by the peer's delayed ACK; docs/widgets.md)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
from tornado.websocket import websocket_connect

from .conftest import LabServer

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("connection_class", "expected"),
    [("tests.ui.nodelay_probe.StockProbe", "0"), ("tests.ui.nodelay_probe.NoDelayProbe", "1")],
)
def test_a_kernel_websocket_has_nagle_off_only_with_the_nodelay_connection(
    connection_class: str,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = tmp_path / "nodelay"
    monkeypatch.setenv("LANGFX_NB_NODELAY_PROBE", str(probe))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the server imports tests.ui.nodelay_probe
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    server = LabServer(root, home, connection_class=connection_class)
    try:
        server.wait_ready()
        kernel = server.api("/api/kernels", method="POST")
        url = server.url(f"/api/kernels/{kernel['id']}/channels").replace("http", "ws", 1)

        async def connect_and_wait() -> None:
            ws = await websocket_connect(url)
            try:
                deadline = time.monotonic() + 60
                while not probe.exists() and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            finally:
                ws.close()
                async with asyncio.timeout(10):  # until the server has closed it too
                    while await ws.read_message() is not None:
                        pass

        # on a thread of its own: the browser tests' Playwright keeps a loop running on this one
        client = threading.Thread(target=asyncio.run, args=(connect_and_wait(),))
        client.start()
        client.join()
        assert probe.read_text() == expected
    finally:
        server.stop()
