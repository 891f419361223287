"""Jupyter Server side: kernel websockets that send each message at once (``TCP_NODELAY``).

Tornado leaves Nagle's algorithm on for a websocket unless the handler calls
``set_nodelay(True)``, and Jupyter Server's kernel websocket never does (jupyter_server 2.x,
``services/kernels/websocket.py``, ``KernelWebsocketHandler.open``; tornado 6,
``WebSocketHandler.set_nodelay``). With Nagle on, a small frame the server writes while its
previous one is still unacknowledged waits for the browser's delayed ACK, 40 ms on Linux. Every
message a kernel sends for a widget message is such a frame (``status: busy``, the reply
``comm_msg``, ``status: idle``), so a comm round trip takes ~44 ms instead of ~3–5 ms whenever
the page answers one reply with its next request (measured on 127.0.0.1, jupyter_server 2.21,
tornado 6.6: 44 ms → 2.5 ms back to back; with 200 ms between requests half took ~45 ms,
now all 4–6 ms). The trace explorer's window requests (expand, scroll, filter over a large
trace) are such round trips.

Turn it on for a server in its ``jupyter_server_config.py`` (or give the same setting as
``--ServerApp.kernel_websocket_connection_class=...`` on the ``jupyter lab`` command line)::

    c.ServerApp.kernel_websocket_connection_class = (
        "langfx_nb.notebook.server.NoDelayKernelConnection"
    )

Nothing else changes: the connection is Jupyter Server's own, with Nagle's algorithm off.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

__all__ = ["NoDelayKernelConnection"]


class NoDelayKernelConnection(ZMQChannelsWebsocketConnection):
    """Jupyter Server's kernel websocket connection with ``TCP_NODELAY`` on its socket."""

    def connect(self) -> Any:  # jupyter_server's own: a Future or None (its base says async)
        # the handler is open (the websocket is accepted) when it asks its connection to connect
        self.websocket_handler.set_nodelay(True)
        return super().connect()
