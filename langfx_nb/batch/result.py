"""``BatchResult``: what ``lf.batch`` returns, one entry per input item, in input order."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from ..agentic.usage import cost_label
from ..messages import Usage

if TYPE_CHECKING:
    from ..agentic.session import Session
    from .identity import RunIdentity

__all__ = ["BatchResult", "BatchTotals", "ItemError", "ItemStatus", "ItemsFailedError"]

R = TypeVar("R")

#: ``ok``: a result; ``failed``: ``fn`` raised (see ``errors``); ``cancelled``: the batch
#: stopped (cancelled, or ``on_error="raise"``) before the item finished; ``skipped``: the
#: batch stopped before the item started.
ItemStatus = Literal["ok", "failed", "cancelled", "skipped"]


@dataclass(frozen=True, slots=True)
class ItemError:
    """What an item's ``fn`` raised: its class name, its short message (never a provider
    body) and ``traceback``, where it was raised (the frames of the exception and its
    causes, bounded, secrets masked: ``agentic/tracebacks.py``; ``None`` when unknown, as
    for an item whose error came back from another process without one)."""

    type: str
    message: str
    traceback: str | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


class ItemsFailedError(Exception):
    """What a ``batch`` trace node records as its error when items failed ("3 of 50 items
    failed"): the node ends ``failed``, its items' own errors are on the items. Never
    raised (so not in the ``LangFxError`` tree): ``lf.batch`` returns every item's outcome
    in its ``BatchResult``."""


@dataclass(frozen=True, slots=True)
class BatchTotals:
    """What the whole batch spent.

    ``requests`` and ``usage`` count model calls made through the items' sessions in this
    run (resumed items cost nothing again); ``cost`` is ``None`` when no model used had a
    price in the session (``unpriced_models`` lists those left out of it,
    ``unpriced_requests`` counts their requests: ``cost_text`` labels the sum). ``elapsed_s`` is
    the batch's wall time; ``ok``/``failed``/``resumed`` count items.
    """

    requests: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    unpriced_models: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    ok: int = 0
    failed: int = 0
    resumed: int = 0
    unpriced_requests: int = 0

    @property
    def cost_text(self) -> str:
        """``$1.23``; ``≥ $1.23 (3 calls unpriced: fake:b)`` when requests had no price;
        ``cost unknown`` when none had one (``agentic.usage.cost_label``)."""
        return cost_label(self.cost, self.unpriced_requests, self.unpriced_models)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "usage": self.usage.to_json(),
            "cost": self.cost,
            "unpriced_models": list(self.unpriced_models),
            "unpriced_requests": self.unpriced_requests,
            "elapsed_s": self.elapsed_s,
            "ok": self.ok,
            "failed": self.failed,
            "resumed": self.resumed,
        }


class BatchResult(Generic[R]):
    """The outcome of ``lf.batch``: parallel sequences indexed like the input items.

    - ``results[i]``: item i's result (``None`` unless ``statuses[i] == "ok"``).
    - ``statuses[i]``: ``ItemStatus``; ``errors[i]``: an ``ItemError`` for failed items.
    - ``node_ids[i]``: item i's ``item`` trace node in ``session`` (``None`` for items
      resumed from the manifest or never started); the session holds a bounded window of
      them, ``session.find(node_id)`` returns ``None`` once a node has been evicted. With
      ``run=``, the ids (and ``batch_node_id``) are the run manifest's, which
      ``TraceExplorer(result)`` shows: the session's ids in the manifest's first run, and
      ``"<run>:<id>"`` in a later run on the same manifest (``<id>`` the session's).
    - ``keys[i]``: the item's key in the run manifest (also without ``run=``, where an item
      with no JSON form, which ``run=`` refuses, is keyed by its position: ``item-3``).
    - ``resumed[i]``: True when the result came from the manifest (no request was sent).
    - ``inputs[i]``: the item that gave ``results[i]`` (read back by ``load``: its stored
      preview, see there).
    - ``errors[i].traceback``: where a failed item's ``fn`` raised (also in its trace node).
    - ``totals``: ``BatchTotals``; ``batch_node_id``: the ``batch`` node; ``run_path``:
      the manifest file (``None`` without ``run=``); ``identity``: what the run is (its
      ``fn``, version or source, models and templates: ``batch/identity.py``; ``None``
      without ``run=``).

    Iterating yields the results; ``len`` is the number of items.
    """

    __slots__ = (
        "batch_node_id",
        "errors",
        "identity",
        "inputs",
        "keys",
        "node_ids",
        "results",
        "resumed",
        "run_path",
        "session",
        "statuses",
        "totals",
    )

    def __init__(
        self,
        *,
        results: list[R | None],
        statuses: list[ItemStatus],
        errors: list[ItemError | None],
        node_ids: list[str | None],
        keys: list[str],
        resumed: list[bool],
        totals: BatchTotals,
        batch_node_id: str | None,
        session: Session | None,
        run_path: str | None = None,
        inputs: list[Any] | None = None,
        identity: RunIdentity | None = None,
    ) -> None:
        self.results = results
        self.statuses = statuses
        self.errors = errors
        self.node_ids = node_ids
        self.keys = keys
        self.resumed = resumed
        self.totals = totals
        self.batch_node_id = batch_node_id
        self.session = session
        self.run_path = run_path
        self.inputs: list[Any] = inputs if inputs is not None else [None] * len(results)
        self.identity = identity

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[R | None]:
        return iter(self.results)

    def __getitem__(self, index: int) -> R | None:
        return self.results[index]

    @property
    def ok(self) -> bool:
        """Whether every item has a result."""
        return all(s == "ok" for s in self.statuses)

    @property
    def failed(self) -> list[int]:
        """Indices of the items that did not finish with a result."""
        return [i for i, s in enumerate(self.statuses) if s != "ok"]

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per item: ``index``, ``key``, ``input``, ``status``, ``result`` (a
        pydantic model as its ``model_dump()``), ``error_type``, ``error_message``,
        ``error_traceback``, ``node_id``, ``resumed``."""
        out = []
        for i, value in enumerate(self.results):
            error = self.errors[i]
            out.append(
                {
                    "index": i,
                    "key": self.keys[i],
                    "input": _plain(self.inputs[i]),
                    "status": self.statuses[i],
                    "result": _plain(value),
                    "error_type": None if error is None else error.type,
                    "error_message": None if error is None else error.message,
                    "error_traceback": None if error is None else error.traceback,
                    "node_id": self.node_ids[i],
                    "resumed": self.resumed[i],
                }
            )
        return out

    @classmethod
    def load(cls, run: str | os.PathLike[str]) -> BatchResult[Any]:
        """What the run manifest ``run`` (a ``run=`` name or path) holds, without running
        anything: one entry per stored item, in the input order of the run that stored it.
        ``results`` are the stored JSON values (a pydantic model as its dict: no class is
        imported), ``inputs`` each item's stored preview (its JSON value; its text when it
        was cut at 4,000 characters or had no JSON form), ``errors`` with their tracebacks,
        ``identity`` the run's. ``RunManifestError`` when the file is not a manifest."""
        from .manifest import manifest_path, read_run

        path = manifest_path(run)
        identity, rows = read_run(path)
        errors = [
            None
            if r.status == "ok"
            else ItemError(r.error_type or "", r.error_message or "", r.traceback)
            for r in rows
        ]
        statuses: list[ItemStatus] = ["ok" if r.status == "ok" else "failed" for r in rows]
        ok = statuses.count("ok")
        return cls(
            results=[r.value for r in rows],
            statuses=statuses,
            errors=errors,
            node_ids=[None] * len(rows),
            keys=[r.key for r in rows],
            resumed=[True] * len(rows),
            totals=BatchTotals(ok=ok, failed=len(rows) - ok, resumed=len(rows)),
            batch_node_id=None,
            session=None,
            run_path=str(path),
            inputs=[r.input for r in rows],
            identity=identity,
        )

    def to_pandas(self) -> Any:
        """``to_records()`` as a ``pandas.DataFrame`` (pandas is optional)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "BatchResult.to_pandas() needs pandas, which is not installed: "
                "pip install pandas (or use to_records())"
            ) from exc
        return pd.DataFrame.from_records(self.to_records())

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"BatchResult({len(self)} items: {t.ok} ok, {t.failed} failed, "
            f"{t.resumed} resumed; {t.requests} requests in {t.elapsed_s:.1f}s)"
        )


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump()
    return value
