"""langfx_nb.notebook.server: the kernel websocket connection turns Nagle's algorithm off."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("jupyter_server")

from jupyter_server.services.kernels.connection.channels import (
    ZMQChannelsWebsocketConnection,
)

from langfx_nb.notebook.server import NoDelayKernelConnection


def test_nodelay_is_set_on_the_websocket_before_jupyter_server_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []

    class Handler:  # a real KernelWebsocketHandler needs a running server
        def set_nodelay(self, value: bool) -> None:
            calls.append(("nodelay", value))

    monkeypatch.setattr(
        ZMQChannelsWebsocketConnection, "connect", lambda self: calls.append(("connect",))
    )
    monkeypatch.setattr(NoDelayKernelConnection, "websocket_handler", Handler(), raising=False)
    conn = NoDelayKernelConnection.__new__(NoDelayKernelConnection)
    assert conn.connect() is None
    assert calls == [("nodelay", True), ("connect",)]


def test_it_is_jupyter_servers_connection_class() -> None:
    # what ServerApp.kernel_websocket_connection_class accepts (a Type of the base class)
    from jupyter_server.services.kernels.connection.base import BaseKernelWebsocketConnection

    assert issubclass(NoDelayKernelConnection, BaseKernelWebsocketConnection)
