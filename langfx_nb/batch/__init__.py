"""``lf.batch``: run one async function over many items, traced, rate limited, resumable.

This package is imported with ``langfx_nb`` and stays light: the runner (sessions, the
manifest) loads on the first call. ``langfx_nb.batch`` the package and ``lf.batch`` the
function share a name, so the package is one object with both roles: calling it
(``await lf.batch(fn, items)``) calls :func:`batch`, and its submodules are its attributes as
in any package (``import langfx_nb.batch.progress``, ``lf.batch.progress.BatchProgress``).
Type checkers see ``lf.batch`` as the function (``langfx_nb/__init__.py``).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .progress import BatchProgress, ErrorGroup, Reporter, set_default_reporter
from .result import BatchResult, BatchTotals, ItemError, ItemStatus

if TYPE_CHECKING:
    from ..agentic.session import Session
    from .engine import Engine

__all__ = [
    "BatchProgress",
    "BatchResult",
    "BatchTotals",
    "ErrorGroup",
    "ItemError",
    "ItemStatus",
    "Reporter",
    "batch",
    "set_default_reporter",
]

OnError = Literal["collect", "raise"]


async def batch(
    fn: Callable[..., Any],
    items: Iterable[Any],
    *,
    session: Session | None = None,
    run: str | Path | None = None,
    engine: Engine | None = None,
    max_concurrency: int = 16,
    on_error: OnError = "collect",
    progress: Any = None,
    key: Callable[[Any], str] | None = None,
    name: str | None = None,
    if_owned: Literal["raise", "wait"] = "raise",
    version: str | None = None,
) -> BatchResult[Any]:
    """``await fn(item)`` (or ``fn(item, session)``) for every item; a ``BatchResult``.

    - ``fn``: an async callable (a plain function's answer is taken as it is; it holds the
      event loop while it runs). With one parameter it gets the item; with two, the item
      and a session view bound to the item's trace node: model calls made through that
      view (``session.query(...)``, ``session.generate(...)``) are traced under the item
      and counted in the batch's totals and progress. Calls that do not go through the
      view (``lf.query(..., lm=lm)``) run but are neither traced nor counted.
    - ``session``: the session that holds the trace (one ``batch`` node, one ``item``
      child per item, a bounded window of them, exact counts); a new ``Session()`` when
      omitted (``BatchResult.session``).
    - ``run``: a name (``./.langfx_runs/NAME.sqlite``) or a path ending in ``.sqlite``/
      ``.db``: a SQLite manifest of each item's key, status and typed result. Running
      the same call again sends nothing for items already done and returns their stored
      results; items that failed, or were in flight at a crash, run again. Each row keeps
      the item's input (a bounded preview) and a failed item's traceback
      (``BatchResult.load(run)`` reads them back). A manifest made by another run (its
      ``fn``'s name and source text, or ``version``; the models and ``lf.Template``s it
      uses) or result schema is refused (``RunManifestError`` naming what changed),
      untouched.
      One run owns a manifest at a time (an OS lock the kernel frees when the process
      ends, ``kill -9`` included): another run of it raises ``RunManifestError`` naming
      the owner (pid, host, start time), or with ``if_owned="wait"`` waits for it to end.
      Each finished item is committed before its worker takes the next one, so a crash
      sends again only the items that were in flight.
    - ``engine``: where the items run: ``None`` in this process on asyncio
      (``lf.engines.Asyncio()``), ``lf.engines.ProviderBatch()`` through the providers'
      batch APIs, ``lf.engines.Ray()`` on a Ray cluster, or any ``lf.engines.Engine``.
    - ``max_concurrency``: items running at once. ``on_error``: ``"collect"`` records what
      an item raised and goes on; ``"raise"`` stops the batch and raises the first error.
    - ``progress``: ``None`` automatic (a notebook widget, a terminal bar or nothing),
      ``False`` none, a ``Reporter`` or a callable of ``BatchProgress``.
    - ``key``: the manifest key of an item (default: a hash of its JSON form, with an
      occurrence number for repeated items). ``name``: the batch node's name.
    - ``version``: with ``run=``, what identifies ``fn``'s code in place of its source text
      (change it when the code's meaning changes; a reformat or a comment then keeps the
      manifest). Without ``run=`` there is no manifest for it to identify: ``ValueError``.

    Cancelling the awaiting task stops the batch at once: in-flight items are cancelled
    (their requests closed), results already finished are written to the manifest, and
    ``CancelledError`` propagates.
    """
    from .identity import check_version
    from .runner import run_batch

    check_version(version, run)
    return await run_batch(
        fn,
        items,
        session=session,
        run=run,
        engine=engine,
        max_concurrency=max_concurrency,
        on_error=on_error,
        progress=progress,
        key=key,
        name=name,
        if_owned=if_owned,
        version=version,
    )


class _Package(types.ModuleType):
    """The type of this package's module: calling it calls :func:`batch` (``lf.batch`` is
    the package, so ``langfx_nb.batch.progress`` and ``import langfx_nb.batch.runner`` work
    while ``lf.batch(fn, items)`` stays the function's call)."""

    def __call__(self, fn: Callable[..., Any], items: Iterable[Any], **options: Any) -> Any:
        return batch(fn, items, **options)

    @property
    def __signature__(self) -> inspect.Signature:  # help() and ``lf.batch?`` show batch's
        return inspect.signature(batch)


sys.modules[__name__].__class__ = _Package
