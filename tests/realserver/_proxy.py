"""A TCP pass-through that counts connections, to see from the server side what the client's
connection pool does (how many connections were opened, how many the client closed), and
keeps the bytes each way (what the server was asked and what it answered)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType


class CountingProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_port``; counts accepted and closed links."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self.opened = 0
        self.closed_by_client = 0
        #: every byte each way, to count what the server was asked and answered
        self.sent = bytearray()
        self.received = bytearray()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._running = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> CountingProxy:
        self._spawn(self._accept)
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._running = False
        _close(self._listener)  # shutdown wakes the thread blocked in accept()
        for s in list(self._sockets):
            _close(s)
        for t_ in self._threads:
            t_.join(5)

    def wait_closed(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until the client has closed ``count`` connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.closed_by_client >= count:
                return True
            time.sleep(0.01)
        return False

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while self._running:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self.opened += 1
            self._sockets += [client, upstream]
            link = {"ended": False}  # the first side to end the link is the one that closed it
            self._spawn(self._pump, client, upstream, True, link)
            self._spawn(self._pump, upstream, client, False, link)

    def _pump(
        self, src: socket.socket, dst: socket.socket, from_client: bool, link: dict[str, bool]
    ) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    (self.sent if from_client else self.received).extend(data)
                dst.sendall(data)
        except OSError:
            pass
        with self._lock:
            first, link["ended"] = not link["ended"], True
            if first and from_client and self._running:
                self.closed_by_client += 1
        _close(src)
        _close(dst)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
