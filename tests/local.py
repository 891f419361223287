"""What the tests need to drive real local parts: a free port on 127.0.0.1 and Debian's chromium."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys

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


def python_bounded(code: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` in a child with 1 GB of address space and ``timeout`` seconds:
    a hang or a read without end fails the test that runs it instead of the suite."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
        check=False,
    )
