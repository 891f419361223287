"""The state of one batch, which its engine fills through its ``BatchJob`` and its progress
snapshots and result read: per-item outcomes, counters, error groups, usage, the
provider's own counts."""

from __future__ import annotations

import bisect
import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agentic.tracebacks import error_info, format_traceback
from ..agentic.usage import UsageMeter, total_tokens
from .progress import MAX_GROUP_ITEMS, BatchProgress, Reporter, group_errors
from .result import BatchResult, BatchTotals, ItemError, ItemStatus

if TYPE_CHECKING:
    from ..agentic.session import Session
    from .identity import RunIdentity

__all__ = ["BatchState", "quietly"]


class BatchState:
    """The state of one batch: per-item outcomes, counters, error groups, and the
    provider's own counts (``show_provider``), which progress snapshots read."""

    def __init__(self, n: int, name: str, session: Session) -> None:
        self.results: list[Any] = [None] * n
        self.statuses: list[ItemStatus] = ["skipped"] * n
        self.errors: list[ItemError | None] = [None] * n
        self.node_ids: list[str | None] = [None] * n
        self.resumed: list[bool] = [False] * n
        self.done = 0
        self.failed = 0
        self.cancelled = 0  # stopped in flight by the batch's end: failed, in progress
        self.running = 0
        self.resumed_count = 0
        self.groups: dict[str, list[Any]] = {}
        self.meter = UsageMeter()
        self.session = session
        self.name = name
        self.n = n
        self.t0 = time.monotonic()
        self.batch_node_id: str | None = None
        #: what the run manifest puts before this run's node ids (``"2:"`` in its second
        #: run): the result names the manifest's nodes, which ``TraceExplorer(result)`` shows
        self.trace_prefix = ""
        self.finished = False
        self.provider: dict[str, Any] | None = None
        self.run: str | None = None  # the run manifest's path (``run=``)
        self.reporter: Reporter | None = None  # the batch's progress view, once shown
        self.inputs: list[Any] = []  # the items, by index (``BatchResult.inputs``)
        self.identity: RunIdentity | None = None  # the run's (with ``run=``)

    def show_provider(self, counts: dict[str, Any]) -> None:
        """The provider's own counts (``engine=ProviderBatch()``), shown by progress: at
        once when its status changed (a few times per batch), else at the next tick."""
        changed = self.provider is None or self.provider.get("status") != counts.get("status")
        self.provider = dict(counts)
        if changed and self.reporter is not None:
            quietly(self.reporter.update, self.snapshot())

    def fail(
        self,
        index: int,
        exc: BaseException,
        node_id: str | None,
        recorded: Mapping[str, Any] | None = None,
    ) -> ItemError:
        """Item ``index`` raised ``exc``; ``recorded``: its item node's error, which holds
        the same type, message and traceback (formatted once: a traceback is the costly
        part of a failed item)."""
        if recorded is not None and "traceback" in recorded:
            info, traceback = recorded, recorded["traceback"]
        else:
            info, traceback = error_info(exc), format_traceback(exc)
        return self.fail_as(index, info["type"], info["message"], node_id, traceback)

    def fail_as(
        self, index: int, type_: str, message: str, node_id: str | None, traceback: str | None
    ) -> ItemError:
        error = ItemError(type_, message, traceback)
        self.errors[index] = error
        self.statuses[index] = "failed"
        self.failed += 1
        group = self.groups.get(error.type)
        if group is None:
            group = self.groups[error.type] = [0, error.message, [], []]
        group[0] += 1
        # the group's first items in input order, whatever order they failed in
        at = bisect.bisect(group[2], index)
        if at < MAX_GROUP_ITEMS:
            if at == 0:
                group[1] = error.message  # the message of the first item listed
            group[2].insert(at, index)
            group[3].insert(at, node_id)
            if len(group[2]) > MAX_GROUP_ITEMS:
                del group[2][-1], group[3][-1]
        return error

    def snapshot(self) -> BatchProgress:
        elapsed = time.monotonic() - self.t0
        settled_now = self.done - self.resumed_count + self.failed
        rate = settled_now / elapsed if elapsed > 0 else 0.0
        usage = self.meter.usage
        tokens = total_tokens(usage)
        failed = self.failed + self.cancelled
        left = self.n - self.done - failed - self.running
        remaining = left + self.running
        eta = remaining / rate if rate > 0 else (0.0 if not remaining else None)
        cost, unpriced = self.meter.cost()
        return BatchProgress(
            total=self.n,
            done=self.done,
            failed=failed,
            running=self.running,
            left=left,
            resumed=self.resumed_count,
            cancelled=self.cancelled,
            elapsed_s=elapsed,
            items_per_s=rate,
            tokens_per_s=tokens / elapsed if elapsed > 0 else 0.0,
            eta_s=eta,
            requests=self.meter.requests,
            usage=usage,
            cost=cost,
            unpriced_models=unpriced,
            unpriced_requests=self.meter.unpriced_requests,
            errors=group_errors(self.groups),
            finished=self.finished,
            run=self.run,
            batch_node_id=self.batch_node_id,
            session_id=self.session.id,
            name=self.name,
            provider=self.provider,
        )

    def result(self, keys: list[str], path: Path | None) -> BatchResult[Any]:
        usage = self.meter.usage
        cost, unpriced = self.meter.cost()
        totals = BatchTotals(
            requests=self.meter.requests,
            usage=usage,
            cost=cost,
            unpriced_models=unpriced,
            elapsed_s=time.monotonic() - self.t0,
            ok=self.done,
            failed=self.failed,
            resumed=self.resumed_count,
            unpriced_requests=self.meter.unpriced_requests,
        )
        prefix = self.trace_prefix
        node_ids = self.node_ids
        if prefix:
            node_ids = [None if i is None else prefix + i for i in node_ids]
        return BatchResult(
            results=self.results,
            statuses=self.statuses,
            errors=self.errors,
            node_ids=node_ids,
            keys=keys,
            resumed=self.resumed,
            totals=totals,
            batch_node_id=None if self.batch_node_id is None else prefix + self.batch_node_id,
            session=self.session,
            run_path=None if path is None else str(path),
            inputs=self.inputs,
            identity=self.identity,
        )


def quietly(call: Callable[[BatchProgress], None], progress: BatchProgress) -> None:
    with contextlib.suppress(Exception):  # a broken progress view never stops a batch
        call(progress)
