"""What the tests need to drive real local parts: a free port on 127.0.0.1 and Debian's chromium."""

from __future__ import annotations

import socket

CHROMIUM = "/usr/bin/chromium"
# Headless as root on a machine with no outside network: without the background-networking
# flags chromium keeps trying to reach its update and sync services.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
