"""The first open of a large trace file with no index sidecar, in a notebook: the first part
of the file at once, the whole of it from a child process.

Indexing 1,000,000 records is ~10 s of pure-Python work (``trace_file``), which no kernel
should spend before the reader sees a row. So when an asyncio loop runs in this thread (a
Jupyter kernel), :func:`open_trace_file` indexes only about the first ``PREFIX_BYTES`` of
records and returns that; :class:`BackgroundRead` then runs, in effect, ``python -m
langfx_nb.notebook.trace_open PATH`` on the other core, which indexes the whole file and
writes the sidecar (beside the trace, else the per-user cache), reporting how far it has read
on its stdout; the kernel loads the sidecar when the child ends and hands the whole index
over.
Without a running loop (a script) the file is indexed whole before :func:`open_trace_file`
returns, as before. A batch's run manifest opens the same way (:func:`open_trace_store`): its
first ``PREFIX_RECORDS`` trace records at once, the whole trace from a child that writes the
manifest's sidecar (notebook/trace_store.py).

The child's stdout protocol, one JSON object per line: ``{"read": <bytes>}`` as it goes, then
``{"done": <sidecar path>}`` or ``{"error": <text>}``. The child exits when its stdin closes,
so a kernel that dies, however it dies, leaves no child behind (docs/decisions.md
"Large trace files open progressively").
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..batch.manifest import is_manifest_path
from .trace_file import Prefix, index_file, load_index, open_index, open_prefix, sidecar_cache_dir
from .trace_index import INDEX_FILE_BYTES, TraceIndex
from .trace_store import index_store, load_store_index, open_store_index, store_extent

__all__ = [
    "PREFIX_BYTES",
    "PREFIX_RECORDS",
    "PROGRESSIVE_BYTES",
    "PROGRESSIVE_RECORDS",
    "BackgroundRead",
    "ReadingStatus",
    "open_indexed",
    "open_trace_file",
    "open_trace_store",
]

#: Bytes of records indexed at once, before the rest is read in the background (about
#: 0.25 s at ~17 MB/s, whatever the file's size).
PREFIX_BYTES = 3 << 20
#: A file up to this size is indexed whole at once (about 0.5 s): a child would not help.
PROGRESSIVE_BYTES = 3 * PREFIX_BYTES
#: A run manifest's trace records indexed at once (about 0.3 s), and the most that are
#: indexed whole at once (counted by rowid).
PREFIX_RECORDS = 20_000
PROGRESSIVE_RECORDS = 3 * PREFIX_RECORDS
_PROGRESS_S = 0.25  # the child reports how far it has read at most this often
# The child's program: this copy of the package (the kernel may import it from a directory
# the child would not look in), then :func:`main` with the file's path.
_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD = (
    f"import sys; sys.path.insert(0, {_ROOT!r}); "
    "from langfx_nb.notebook.trace_open import main; sys.exit(main())"
)

#: Children still running, killed when this interpreter exits (a kernel shut down).
_CHILDREN: set[subprocess.Popen[bytes]] = set()


@dataclass(frozen=True)
class ReadingStatus:
    """How far the background read of a trace file has got."""

    read: int  #: bytes of the file the child has indexed so far
    size: int  #: the file's size
    nodes: int  #: nodes shown until then (those of the first part of the file)
    #: why the read stopped (shown as text): the explorer keeps showing the first part
    error: str | None = None

    @property
    def note(self) -> str:
        """One line for a copy of the explorer that cannot show the banner (text only)."""
        if self.error is not None:
            return f"Reading the trace file stopped: {self.error}"
        percent = 100 * self.read // max(1, self.size)
        return f"Reading the trace file: {percent} % read; shown: the first {self.nodes:,} nodes"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"read": self.read, "size": self.size, "nodes": self.nodes}
        if self.error is not None:
            out["error"] = self.error
        return out


def open_indexed(source: Any) -> tuple[TraceIndex, Prefix | None] | None:
    """What ``TraceExplorer`` indexes in place, indexed: a path to a batch's run manifest
    (:func:`open_trace_store`) or to a trace file of ``INDEX_FILE_BYTES`` or more
    (:func:`open_trace_file`), with the :class:`Prefix` a :class:`BackgroundRead` completes
    when only its first part is indexed; ``None`` for any other source (read whole)."""
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return None  # JSON text
    if not isinstance(source, str | Path):
        return None
    path = Path(source)
    if is_manifest_path(path):
        return open_trace_store(path)
    try:
        big = path.stat().st_size >= INDEX_FILE_BYTES
    except OSError:
        return None  # read_trace reports a missing file
    return open_trace_file(path) if big else None


def open_trace_file(path: Path) -> tuple[TraceIndex, Prefix | None]:
    """The index of a large trace file, and ``None``; or, for a file with no sidecar larger
    than ``PROGRESSIVE_BYTES`` opened while an asyncio loop runs in this thread, the index of
    its first part and that :class:`Prefix` (start a :class:`BackgroundRead` for the rest).
    A malformed file (or a malformed first part) raises ``ValueError`` naming the path."""
    try:
        index = load_index(path)
        if index is not None:
            return index, None
        if not _loop_running() or path.stat().st_size <= PROGRESSIVE_BYTES:
            return open_index(path), None
        prefix = open_prefix(path, PREFIX_BYTES)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if prefix.complete:
        return prefix.index, None
    return prefix.index, prefix


def open_trace_store(path: Path) -> tuple[TraceIndex, Prefix | None]:
    """:func:`open_trace_file` for a batch's run manifest: its trace's index, and ``None``;
    or, for a manifest with no matching sidecar and more than ``PROGRESSIVE_RECORDS`` trace
    records opened while an asyncio loop runs in this thread, the index of its first
    ``PREFIX_RECORDS`` records and a :class:`Prefix` for a :class:`BackgroundRead`. A file
    that is not a manifest with a trace raises ``ValueError`` naming the path."""
    index = load_store_index(path)
    if index is not None:
        return index, None
    if not _loop_running():
        return open_store_index(path), None
    end = store_extent(path)
    if end <= PROGRESSIVE_RECORDS:
        return open_store_index(path), None
    first = open_store_index(path, limit=PREFIX_RECORDS)
    return first, Prefix(path, first, len(first), end, complete=False, store=True)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class BackgroundRead:
    """A child process indexing a whole trace file while its first part is shown.

    :meth:`start` runs it on this thread's loop. Each progress report calls
    ``on_progress(status)``; at the end exactly one of ``on_done(index)`` (the whole index,
    loaded from the sidecar the child wrote) or ``on_fail(status)`` (``status.error`` says
    why: the file is malformed past its first part, the child was killed, the file changed
    meanwhile…) is called, on the loop's thread. :meth:`cancel` kills the child at once and
    calls neither. The callbacks run after the constructor's caller has returned to the
    loop, never from :meth:`start`."""

    def __init__(
        self,
        prefix: Prefix,
        *,
        on_progress: Callable[[ReadingStatus], None],
        on_done: Callable[[TraceIndex], None],
        on_fail: Callable[[ReadingStatus], None],
    ) -> None:
        self.path = prefix.path.absolute()
        self.store = prefix.store
        self._status = ReadingStatus(read=0, size=prefix.size, nodes=len(prefix.index))
        self._on_progress, self._on_done, self._on_fail = on_progress, on_done, on_fail
        self._task: asyncio.Task[None] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._following = False  # the task has begun (it closes the child's pipes)

    @property
    def status(self) -> ReadingStatus:
        """How far the child has read (``error``: it stopped short)."""
        return self._status

    @property
    def pid(self) -> int | None:
        """The child's process id once started."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        """Started and not ended yet (ended: the index handed over, failed, or cancelled)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the child now, and the task that follows it on this thread's running loop.
        (The child is started here, not from the task: a task cancelled while asyncio
        creates a subprocess can hang the loop's shutdown on Python 3.11.)"""
        if self._process is not None:
            return
        loop = asyncio.get_running_loop()
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, *(["--store"] if self.store else []), str(self.path)],
            stdin=subprocess.PIPE,  # closes when this process ends: the child ends too
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # a traceback's last line is shown as the error
        )
        _CHILDREN.add(self._process)
        self._task = loop.create_task(self._run(self._process))

    def cancel(self) -> None:
        """Kill the child now (and reap it) and stop; no callback is called any more."""
        self._on_progress = self._on_done = self._on_fail = _ignore
        process = self._process
        if process is not None:
            _end(process, pipes=not self._following)
        if self._task is not None and not self._task.done():
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                self._task.cancel()

    async def wait(self) -> None:
        """Until the read has ended: the child has exited (reaped) and the callback ran.
        Returns also when it was cancelled (the read's own task ends cancelled)."""
        if self._task is not None:
            await asyncio.wait({self._task})

    async def _run(self, process: subprocess.Popen[bytes]) -> None:
        self._following = True
        try:
            await self._read(process)
        except Exception as exc:  # anything unforeseen: shown as the read's error, never lost
            self._fail(f"reading the trace file failed: {type(exc).__name__}: {exc}")
        finally:
            _end(process, pipes=True)

    async def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        transport, _protocol = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), process.stdout
        )
        error, done, said = None, False, ""
        try:
            async for line in reader:
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    said = line.decode("utf-8", "replace").strip() or said
                elif isinstance(message.get("read"), int):
                    self._status = ReadingStatus(
                        message["read"], self._status.size, self._status.nodes
                    )
                    self._on_progress(self._status)
                elif "error" in message:
                    error = str(message["error"])
                elif "done" in message:
                    done = True
        finally:
            transport.close()
        code = await asyncio.to_thread(process.wait)  # its output ended: it is ending
        if error is None and (code != 0 or not done):
            error = _exit_text(code, said)
        if error is not None:
            self._fail(error)
            return
        load = load_store_index if self.store else load_index
        index = await asyncio.to_thread(load, self.path)
        if index is None:
            self._fail("the trace file changed while it was read: open it again")
            return
        self._status = ReadingStatus(self._status.size, self._status.size, len(index))
        self._on_done(index)

    def _fail(self, error: str) -> None:
        self._status = ReadingStatus(
            self._status.read, self._status.size, self._status.nodes, error[:2000]
        )
        self._on_fail(self._status)


def _ignore(*_args: Any) -> None:
    pass


def _exit_text(code: int, said: str) -> str:
    """Why the child ended without its index (``said``: its last line of other output)."""
    if code < 0:
        why = f"the reading process was stopped (signal {-code})"
    else:
        why = f"the reading process ended with exit code {code}"
    return why + (f": {said[:500]}" if said else "")


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def _end(process: subprocess.Popen[bytes], *, pipes: bool) -> None:
    """Kill the child if it runs, reap it (at once: it has ended, or was just killed) and,
    with ``pipes``, close this side of its pipes."""
    _kill(process)
    process.wait()
    _CHILDREN.discard(process)
    if pipes:
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


@atexit.register
def _kill_children() -> None:
    for process in list(_CHILDREN):
        _kill(process)


# -- the child --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Index the trace file named by the one argument and write its sidecar, reporting on
    stdout (see the module's docstring). Exits when stdin closes (its parent is gone)."""
    args = sys.argv[1:] if argv is None else argv
    store = args[:1] == ["--store"]  # a run manifest's trace (trace_store.index_store)
    if store:
        args = args[1:]
    if len(args) != 1:
        print(
            "usage: python -m langfx_nb.notebook.trace_open [--store] TRACE_FILE",
            file=sys.stderr,
        )
        return 2
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    path = Path(args[0])
    last = [0.0]

    def progress(offset: int) -> None:
        now = time.monotonic()
        if now - last[0] >= _PROGRESS_S:
            last[0] = now
            _say({"read": offset})

    try:
        where = index_store(path, progress) if store else index_file(path, progress)
    except (ValueError, OSError) as exc:
        _say({"error": f"{path}: {exc}"})
        return 1
    if where is None:
        _say(
            {
                "error": f"{path}: its index could not be written beside it nor in "
                f"{sidecar_cache_dir()}"
            }
        )
        return 1
    _say({"read": store_extent(path) if store else path.stat().st_size})
    _say({"done": str(where)})
    return 0


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def _exit_with_parent() -> None:
    """Stdin is a pipe from the parent: it reads empty once the parent is gone. (The raw
    descriptor: a daemon thread blocked in ``sys.stdin``'s buffer aborts the interpreter's
    exit.)"""
    with contextlib.suppress(OSError):
        while os.read(0, 1 << 16):
            pass
    os._exit(3)


if __name__ == "__main__":
    sys.exit(main())
