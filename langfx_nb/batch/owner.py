"""One run at a time on a run manifest: an OS file lock held for the run's whole life.

``lf.batch(run=...)`` takes an exclusive ``flock`` on ``<manifest>.lock`` (next to the
manifest) before it reads what is done, and keeps it until the batch returns. A second
run of the same manifest, in another process or in this one, cannot take it: it fails at
once with ``RunManifestError`` naming the owner (pid, host, start time, as the owner wrote
them into the lock file), or, with ``if_owned="wait"``, waits until the owner is gone and
then reads what it finished. Two runs never send the same items side by side.

The lock belongs to the owner's open file: the kernel releases it when the process ends,
however it ends (``kill -9`` included), so a crashed run never locks the manifest for
ever. The lock file itself stays (an empty-looking file is harmless; removing it while
another process waits on it would let two owners in). Locks are per host: processes on
different machines sharing a network file system are not kept apart where the file
system does not carry ``flock`` (see docs/batch.md).
"""

from __future__ import annotations

import asyncio
import datetime
import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Literal

from ..errors import RunManifestError

__all__ = ["IfOwned", "RunOwner", "lock_path"]

IfOwned = Literal["raise", "wait"]
#: how often a waiting run tries the lock again (seconds)
POLL_S = 0.1
_MAX_OWNER_TEXT = 4096


def lock_path(path: Path) -> Path:
    """The lock file of the manifest at ``path``."""
    return path.with_name(path.name + ".lock")


class RunOwner:
    """This process's hold on a manifest; ``release`` ends it (the OS ends it at exit)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    async def acquire(cls, path: Path, if_owned: IfOwned = "raise") -> RunOwner:
        """Own the manifest at ``path``: ``RunManifestError`` naming the owner when another
        run holds it (``if_owned="raise"``), or wait for it (``"wait"``; cancellable)."""
        lock = lock_path(path)
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RunManifestError(
                f"run manifest {path}: cannot create its lock file {lock.name} "
                f"({type(exc).__name__}: {exc})",
                path=str(path),
            ) from exc
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError as exc:
                    if if_owned == "raise":
                        raise RunManifestError(
                            f"run manifest {path} is in use by another run ({_owner_of(lock)}): "
                            "one run owns a manifest at a time, so no item is sent twice. "
                            "Wait for it to finish (or pass if_owned='wait'), or use another "
                            "run= name. A run that was killed frees it at once.",
                            path=str(path),
                        ) from exc
                    await asyncio.sleep(POLL_S)
            _write_owner(fd)
        except BaseException:
            os.close(fd)  # (closing it releases the lock, if it was taken)
            raise
        return cls(path, fd)

    def release(self) -> None:
        """Let another run own the manifest (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _write_owner(fd: int) -> None:
    """Record who owns the manifest now, for the message a second run shows."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _owner_of(lock: Path) -> str:
    """``pid 123 on host h, started 2026-01-01T00:00:00+00:00`` (what the owner wrote)."""
    try:
        with lock.open("rb") as file:
            data = json.loads(file.read(_MAX_OWNER_TEXT))
        pid, host, started = data["pid"], data["host"], data["started"]
        if not (isinstance(pid, int) and isinstance(host, str) and isinstance(started, str)):
            raise TypeError("not an owner record")
    except (OSError, ValueError, KeyError, TypeError):
        return "owner not recorded yet"
    return f"pid {pid} on host {host[:100]}, started {started[:40]}"
