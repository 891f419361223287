"""Kernel websocket connection classes for a real Jupyter Server that write, once a client's
websocket is connected, whether its socket has ``TCP_NODELAY`` set, to the file named by
``LANGFX_NB_NODELAY_PROBE`` (tests/ui/test_server_nodelay.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

from langfx_nb.notebook.server import NoDelayKernelConnection


def _write_nodelay(connection: Any) -> None:
    sock = connection.websocket_handler.ws_connection.stream.socket
    value = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    Path(os.environ["LANGFX_NB_NODELAY_PROBE"]).write_text(str(int(bool(value))))


class StockProbe(ZMQChannelsWebsocketConnection):
    def connect(self) -> Any:
        result = super().connect()
        _write_nodelay(self)
        return result


class NoDelayProbe(NoDelayKernelConnection):
    def connect(self) -> Any:
        result = super().connect()
        _write_nodelay(self)
        return result
