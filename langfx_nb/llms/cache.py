"""Response caches: an in-memory LRU and a SQLite file that survives kernel restarts.

Both store a response message's versioned JSON under a key the LanguageModel base computes
from the model identity, what the model is sent (roles and content parts, system text,
options, tools; not message metadata) and ``cache_seed``. Caching is opt-in: pass
``cache=`` to a model.

A cache never breaks a call: the ``LanguageModel`` base turns any failure of a cache (a
corrupt or unreadable file, a table of another shape, a row that is not a response, a
failed write) into one ``CacheWarning`` and goes on without it, so the call goes to the
model and a paid answer is returned even when it cannot be stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from .._unicode import has_surrogates

__all__ = ["Cache", "CacheEntryError", "CacheWarning", "InMemoryCache", "SQLiteCache"]

_T = TypeVar("_T")
#: connections a forked child inherited from its parent's caches: kept, never used or closed
_FORKED: list[sqlite3.Connection] = []


class CacheWarning(UserWarning):
    """A response cache could not be used for one call; the call went on without it."""


class CacheEntryError(ValueError):
    """A stored entry is not a cached response (the cache itself works: it may be rewritten)."""


def warn_cache_failure(cache: object, what: str, exc: BaseException) -> None:
    """Emit the one ``CacheWarning`` of a call: which cache, what failed and why."""
    reason = f"{type(exc).__name__}: {exc}"
    if len(reason) > 300:
        reason = reason[:299] + "…"
    warnings.warn(f"response cache {cache!r}: {what} ({reason})", CacheWarning, stacklevel=4)


@runtime_checkable
class Cache(Protocol):
    async def get(self, key: str) -> dict[str, Any] | None: ...
    async def put(self, key: str, value: dict[str, Any]) -> None: ...
    async def delete(self, key: str) -> None: ...


class InMemoryCache:
    """A bounded LRU, local to this process."""

    def __init__(self, max_entries: int = 1024) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._data: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> dict[str, Any] | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return value

    async def put(self, key: str, value: dict[str, Any]) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    async def put_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """``put`` each ``(key, value)`` in order."""
        for key, value in rows:
            await self.put(key, value)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)


class SQLiteCache:
    """A persistent cache in one SQLite file, safe with concurrent writers (WAL, busy timeout).

    Operations run on one worker thread of the cache's own, so the event loop never blocks on
    disk, over one connection kept open (opening a WAL file costs ~0.3 ms, far more than a
    lookup, and a batch looks up once per item). The connection is opened again when the file
    at ``path`` is no longer the one it has open (replaced or deleted; its write-ahead log is
    folded first, so the new file is read as it is) and after any SQLite error, so a damaged
    or repaired file is seen as it is now. While the cache is open, recent writes may be in
    ``<path>-wal``: copy or damage the file after :meth:`close` (which folds the log into
    it; the cache may be used again after). A forked child opens its own thread and
    connection. Several kernels can share the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._ready = False
        # the connection and the identity of the file it has open; used on the thread only
        self._kept: list[tuple[sqlite3.Connection, tuple[int, int]]] = []
        self._start_thread()
        self.hits = 0
        self.misses = 0

    def _start_thread(self) -> None:
        self._pid = os.getpid()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="langfx-sqlite-cache")
        # a collected cache's thread ends; its connection closes as it is freed
        weakref.finalize(self, self._thread.shutdown, False)

    def _own_thread(self) -> ThreadPoolExecutor:
        """The cache's thread in this process. A forked child has neither its parent's
        thread nor the right to use its connection (SQLite connections must not cross a
        fork): it starts a thread and opens a connection of its own, and leaves the
        parent's unclosed (``_FORKED``)."""
        if self._pid != os.getpid():
            _FORKED.extend(conn for conn, _ in self._kept)
            self._kept = []
            self._start_thread()
        return self._thread

    def _connect(self) -> sqlite3.Connection:
        """The connection to the file now at ``path`` (opened when there is none, or when the
        file it has open was replaced). On the cache's thread."""
        if self._kept:
            conn, seen = self._kept[0]
            try:
                st = os.stat(self.path)
                if seen == (st.st_dev, st.st_ino):
                    return conn
            except OSError:
                pass
            # replaced or deleted: the write-ahead log at path-wal still holds this file's
            # pages, which a new connection would read into the new file; fold it first
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._drop()
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            if not self._ready:
                _set_up(conn)
                self._ready = True
            st = os.stat(self.path)
        except BaseException:
            conn.close()
            raise
        self._kept.append((conn, (st.st_dev, st.st_ino)))
        return conn

    def _drop(self) -> None:
        while self._kept:
            self._kept.pop()[0].close()

    def _run(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self._connect()
        try:
            return conn.execute(sql, args).fetchall()
        except BaseException:
            self._drop()
            raise

    async def _on_thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._own_thread(), fn, *args)

    async def get(self, key: str) -> dict[str, Any] | None:
        """The stored JSON, ``None`` when absent; ``CacheEntryError`` for a row that is not
        JSON text of an object, ``sqlite3.Error``/``OSError`` when the file is unusable."""
        rows = await self._on_thread(self._run, "SELECT value FROM responses WHERE key=?", (key,))
        if not rows:
            self.misses += 1
            return None
        raw = rows[0][0]
        try:
            value = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise CacheEntryError(f"the entry for {key[:12]}… is not a JSON object")
        self.hits += 1
        return value

    async def put(self, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value, ensure_ascii=False)
        if has_surrogates(text):  # SQLite stores UTF-8; \u escapes keep the value exact
            text = json.dumps(value)
        await self._on_thread(
            self._run, "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, text)
        )

    async def put_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """``put`` each ``(key, value)``, all in one transaction (a provider batch's answers:
        a commit per answer costs far more than the answer)."""
        texts = []
        for key, value in rows:
            text = json.dumps(value, ensure_ascii=False)
            texts.append((key, json.dumps(value) if has_surrogates(text) else text))
        await self._on_thread(self._run_many, texts)

    def _run_many(self, rows: list[tuple[str, str]]) -> None:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", rows
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except BaseException:
            self._drop()
            raise

    async def delete(self, key: str) -> None:
        await self._on_thread(self._run, "DELETE FROM responses WHERE key=?", (key,))

    def close(self) -> None:
        """Close the connection (SQLite folds its write-ahead log into the file when the last
        connection closes). The cache may be used again: it reopens."""
        self._own_thread().submit(self._drop).result()

    def __len__(self) -> int:
        """The number of stored answers (a connection of its own, closed after)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            _set_up(conn)
            return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        finally:
            conn.close()

    def __repr__(self) -> str:
        return f"SQLiteCache({str(self.path)!r})"


def _set_up(conn: sqlite3.Connection, attempts: int = 200) -> None:
    """Switch the file to WAL and create the table, once per cache object.

    Changing the journal mode needs an exclusive lock, and SQLite reports "database is locked"
    for it at once instead of waiting out the busy timeout; so when another connection (this
    process or another kernel) is setting up the same file, try again for up to ~10 s.
    """
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT "
                "NULL, created REAL NOT NULL DEFAULT (julianday('now')))"
            )
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
