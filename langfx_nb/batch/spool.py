"""A provider batch run's entries on disk until they are submitted."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO

__all__ = ["Spool"]


class Spool:
    """A run's batch entries in a temporary file, each known by its ``(offset, length)``:
    100,000 requests of a kilobyte or more stay on disk, not in memory, until a batch
    sends them (``entries``)."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.size = 0

    def add(self, entry: bytes) -> tuple[int, int]:
        offset = self.size
        self.file.write(entry)
        self.size += len(entry)
        return offset, len(entry)

    def entries(self, spans: Iterable[tuple[int, int]]) -> Iterator[bytes]:
        """The entries at ``spans``, read back one by one."""
        self.file.flush()
        fd = self.file.fileno()
        for offset, length in spans:
            yield os.pread(fd, length, offset)

    def close(self) -> None:
        self.file.close()
