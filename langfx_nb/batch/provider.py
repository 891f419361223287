"""``engine=lf.engines.ProviderBatch()``: ``lf.batch`` through the providers' batch APIs.

The same ``fn`` runs twice per item, unchanged:

1. **Collect.** ``fn(item)`` runs with a collecting capture (``llms/deferred.py``): its first
   model call that misses the LLM cache stops with ``DeferredCall`` and its request is kept.
   Nothing is traced or sent. ``fn(item, session)`` gets a scratch session with the run
   session's model and defaults (so ``session.query`` without ``lm=`` builds the request
   the replay builds). An item whose ``fn`` finishes without a request (cache hits) or
   raises is not batched: it runs in step 3, where a model call it makes that the cache
   does not answer is refused (``ProviderBatchError``, nothing sent) unless
   ``ProviderBatch(online=True)`` lets it go online at full price. With
   ``on_error="raise"``, an item whose ``fn`` raises here (before its model call) fails at
   once and stops the batch: nothing is submitted.
2. **Batch.** The requests are grouped per model and account, split at the provider's
   limits (requests and bytes per batch), submitted (sent once: a create whose answer is
   lost is looked for in the account's batch list, ``Wire.find``, never sent again); each
   accepted batch id is committed to the run manifest at once, so a new process (a kernel
   restart) polls the batches it finds there instead of submitting again. Batches are
   polled every ``poll_interval`` seconds; the progress view shows the provider's own
   counts. Items that errored, expired or were canceled are resubmitted alone (a batch of
   only them), ``max_resubmits`` times.
3. **Replay.** The items run as in any ``lf.batch`` (traced, counted, written to the
   manifest), with the model call answered from the batch: the response body is decoded
   and checked exactly as an online answer (finish reason, parsing, validation, the LLM
   cache write, so a later plain ``lf.query`` of the same request is a cache hit), marked
   ``metadata["processing"] = "batch"`` (batch prices). The cache is not read again (the
   collect step's lookup missed and the batch's answer was paid for); the cache writes are
   made ``FLUSH_ROWS`` at a time (``CacheWrites``), all before ``lf.batch`` returns.

One model call per item: a second call in the replay (an agent loop, ``repair=``) fails
that item with ``ProviderBatchError``. An answer paid for is used: a replay that builds
another request than the one collected (an ``fn`` that is not deterministic, a default
that changed) gets the batch's answer to the collected one, marked
``metadata["batch_request_differed"] = True``; only a replay with another model fails.
A batch is marked collected (a rerun does not poll it again) only when each of its paid
answers was used by its item's replay: a rerun with ``run=`` recovers the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agentic.tracebacks import error_info
from ..errors import LangFxError, ProviderBatchError, RetryableError, ServerError
from ..llms.cache import warn_cache_failure
from ..llms.deferred import Capture, DeferredCall, capturing
from .manifest import FLUSH_ROWS

if TYPE_CHECKING:
    from ..llms.base import LanguageModel, LMRequest
    from ..llms.batch_wire import Outcome, Wire
    from ..llms.cache import Cache
    from ..messages import AIMessage
    from .engine import BatchJob
    from .manifest import Manifest
    from .spool import Spool

__all__ = ["CacheWrites", "ProviderBatch", "ProviderPlan", "collect_and_batch"]

COUNT_KEYS = ("succeeded", "errored", "expired", "canceled", "processing")
#: A poll that fails with a ``RetryableError`` (429, 5xx, a dropped connection) is tried
#: again, after the server's ``retry-after`` or 1, 2, 4 ... seconds (at most
#: ``MAX_POLL_BACKOFF_S``, and never sooner than ``poll_interval``); the error is raised
#: when one batch's polls failed ``MAX_POLL_FAILURES`` times in a row (about 6 minutes
#: without answer): the batch keeps running at the provider, and a rerun with ``run=``
#: polls it again.
MAX_POLL_FAILURES = 10
MAX_POLL_BACKOFF_S = 120.0
#: The provider failures an item is resubmitted after (a malformed answer was billed).
RESUBMITTED = frozenset({"errored", "expired", "canceled"})
#: The manifest's transactions during the replay: 2,048 rows or 1 s (online, each item's
#: row is committed before its worker goes on). A replayed item lost to a crash costs no
#: second request (its batch stays ``submitted`` until every item is stored, and a rerun
#: polls and downloads it again), so the replay commits in large transactions: small ones
#: rewrite the same index pages again and again.
REPLAY_FLUSH_ROWS = 2048
REPLAY_FLUSH_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class ProviderBatch:
    """Run ``lf.batch`` through the providers' batch APIs (half price, hours not seconds).

    ``poll_interval``: seconds between status polls. ``max_resubmits``: how many times an
    item that errored, expired or was canceled is sent again, alone. ``max_requests`` /
    ``max_bytes``: split batches below the provider's own limits (its wire's, in its
    module; docs/providers.md lists them).
    ``cancel_on_interrupt``: cancel the submitted batches when the cell is interrupted
    (by default they keep running at the provider and a rerun with the same ``run=``
    collects them). ``online``: an item whose model call could not be collected (its
    ``fn`` raised first) may send it online, at full price, when it reaches it in the
    replay; by default that call fails the item with ``ProviderBatchError`` and nothing is
    sent. ``max_result_bytes``: the most one answer of the batch API (a poll, a results
    file, decoded) may hold; past it the run stops with ``ProviderBatchError`` (the
    batches keep running at the provider: a rerun with a higher bound collects them).
    """

    poll_interval: float = 30.0
    max_resubmits: int = 1
    max_requests: int | None = None
    max_bytes: int | None = None
    cancel_on_interrupt: bool = False
    online: bool = False
    max_result_bytes: int = 1024 * 1024 * 1024

    name = "provider_batch"
    in_process = True  # fn runs here twice: to collect its request, then to replay it

    def __post_init__(self) -> None:
        if not self.poll_interval >= 0:
            raise ValueError("poll_interval must be a non-negative number of seconds")
        if isinstance(self.max_resubmits, bool) or self.max_resubmits < 0:
            raise ValueError("max_resubmits must be a non-negative int")
        for name in ("max_requests", "max_bytes", "max_result_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int or None")

    async def run(self, job: BatchJob) -> None:
        """Steps 1-3 of the module docstring. The replay commits the manifest every
        ``REPLAY_FLUSH_ROWS`` rows or ``REPLAY_FLUSH_INTERVAL_S``, not per item: a replayed
        item lost to a crash is replayed from the same batch at no cost."""
        from .engine import run_items

        plan = await collect_and_batch(self, job)
        manifest = job.manifest
        if manifest is not None:
            manifest.flush_rows = REPLAY_FLUSH_ROWS
            manifest.flush_interval = REPLAY_FLUSH_INTERVAL_S
        writes = plan.cache_writes

        async def write_cache() -> None:
            if writes.due:
                await writes.flush()

        try:
            await run_items(job, plan.capture_for, commit_each=False, after_each=write_cache)
            if manifest is not None:
                manifest.flush()
            await plan.finish(manifest)
        finally:
            with contextlib.suppress(Exception):  # the answers of the items that finished
                await writes.flush()


def custom_id(key: str) -> str:
    """An item's id inside a provider batch (``[A-Za-z0-9_-]{1,64}`` for every provider)."""
    return "i" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def request_fingerprint(model: LanguageModel, request: LMRequest) -> int:
    """What must be equal between the collected request and the replayed one: the model,
    the turns (role, text, tool calls), the system prompt, options, tools and schema.

    Compared only within one process (a resumed run collects again), so Python's own
    ``hash`` of those values serves (a stable digest would cost more than the rest of the
    batch machinery per item)."""
    turns = tuple(
        (m.role, m.text, tuple((c.id, c.name, repr(c.args)) for c in m.tool_calls))
        for m in request.messages
    )
    return hash(
        (
            model.model_id,
            request.system,
            turns,
            repr(request.options),
            tuple(t.name for t in request.tools),
            repr(request.tool_choice),
            repr(request.response_schema),
        )
    )


class CacheWrites:
    """The replay's LLM-cache writes, kept and written ``FLUSH_ROWS`` at a time per cache in
    one transaction (``put_many`` where the cache has it, else ``put`` one by one): a
    ``SQLiteCache`` hops to its thread and commits per ``put``, which costs more than the
    rest of a replayed item (``benchmarks/provider_batch.py --llm-cache sqlite``). A
    write that fails warns once per flush (``CacheWarning``) and loses no result;
    ``discard`` drops a write not yet made (``forget_cached``: an answer that failed
    validation)."""

    __slots__ = ("_pending", "rows")

    def __init__(self) -> None:
        self._pending: dict[int, tuple[Cache, dict[str, dict[str, Any]]]] = {}
        self.rows = 0

    def put(self, cache: Cache, key: str, value: dict[str, Any]) -> None:
        held = self._pending.get(id(cache))
        if held is None:
            held = self._pending[id(cache)] = (cache, {})
        held[1][key] = value  # a later write of a key replaces the earlier one
        self.rows += 1

    def discard(self, cache: Cache, key: str) -> None:
        held = self._pending.get(id(cache))
        if held is not None:
            held[1].pop(key, None)

    @property
    def due(self) -> bool:
        return self.rows >= FLUSH_ROWS

    async def flush(self) -> None:
        pending, self._pending, self.rows = self._pending, {}, 0
        for cache, rows in pending.values():
            if not rows:
                continue
            try:
                put_many = getattr(cache, "put_many", None)
                if put_many is not None:
                    await put_many(list(rows.items()))
                else:
                    for key, value in rows.items():
                        await cache.put(key, value)
            except Exception as exc:
                warn_cache_failure(
                    cache, f"could not store {len(rows)} provider batch answers (returned)", exc
                )


class _Collector:
    __slots__ = ("model", "request")

    reads_cache = True  # a request the cache answers is not batched
    cache_writes = None

    def __init__(self) -> None:
        self.model: LanguageModel | None = None
        self.request: LMRequest | None = None

    async def answer(self, model: LanguageModel, request: LMRequest) -> AIMessage[Any]:
        self.model, self.request = model, request
        raise DeferredCall()


class _Refuser:
    """The replay's answer to a model call that was not collected (its ``fn`` raised in
    the collect step, then got further): refused, nothing sent (``ProviderBatch.online``)."""

    __slots__ = ("reason",)

    reads_cache = True  # a cached answer costs nothing and is returned
    cache_writes = None

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def answer(self, model: LanguageModel, request: LMRequest) -> AIMessage[Any]:
        raise ProviderBatchError(
            f"this item's model call was not in the provider batch: its fn raised when its "
            f"request was collected ({self.reason}); it is not sent online at full price "
            "unless engine=ProviderBatch(online=True)"
        )


class _Replayer:
    """The replay's answer to an item's model call. The cache is not read again (the
    collect step's lookup missed; the batch's answer was paid for and is the one used);
    the answer's cache write goes to the run's ``CacheWrites``. ``settled``: nothing is
    left to recover from the batch for this item (its answer was handed out, or there is
    none)."""

    __slots__ = (
        "cache_writes",
        "fingerprint",
        "model_id",
        "outcome",
        "provider",
        "settled",
        "used",
    )

    reads_cache = False

    def __init__(
        self, provider: str, model_id: str, fingerprint: int, outcome: Outcome, writes: CacheWrites
    ) -> None:
        self.provider = provider
        self.model_id = model_id
        self.fingerprint = fingerprint
        self.outcome = outcome
        self.cache_writes = writes
        self.used = False
        self.settled = outcome.failure is not None

    async def answer(self, model: LanguageModel, request: LMRequest) -> AIMessage[Any]:
        if self.used:
            raise ProviderBatchError(
                "fn made a second model call for this item: engine=ProviderBatch() answers "
                "one model call per item (an agent or repair= needs engine=None)"
            )
        self.used = True
        if model.model_id != self.model_id:
            raise ProviderBatchError(
                f"fn called {model.model_id} where the batch asked {self.model_id} (is it "
                "deterministic?); the batch's answer is kept for a rerun with run="
            )
        outcome = self.outcome
        if outcome.failure is not None:
            said = f" ({outcome.message})" if outcome.message else ""
            if outcome.failure == "malformed":
                said = f": {outcome.message}"
            raise ProviderBatchError(
                f"{self.provider} batch: the request {outcome.failure}{said}",
                failure=outcome.failure,
            )
        decode = getattr(model, "decode")  # noqa: B009 - every Wire's model has one
        try:
            message: AIMessage[Any] = decode(outcome.body)
        finally:
            self.settled = True  # decoded or not, this answer is what the provider holds
        message.metadata["processing"] = "batch"
        if request_fingerprint(model, request) != self.fingerprint:
            message.metadata["batch_request_differed"] = True
        return message


@dataclass(slots=True)
class _Item:
    """A batched item: its request kept only as the provider's entry, in the run's
    ``Spool`` on disk (not the request's objects, nor 100,000 entries in memory)."""

    index: int
    cid: str
    account: str
    wire: Wire
    span: tuple[int, int]
    fingerprint: int


class ProviderPlan:
    """What the collect and batch steps found: a capture per batched item for the replay,
    and the batches to mark collected once the replay has stored every outcome."""

    def __init__(self, online: bool = False) -> None:
        self.online = online
        self.items: dict[int, _Item] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.uncollected: dict[int, str] = {}  # item -> why its fn raised in the collect step
        self.replayers: dict[str, _Replayer] = {}
        self.batch_ids: list[str] = []
        self.batch_cids: dict[str, list[str]] = {}
        self.counts: dict[str, Any] = {
            "status": "collecting",
            "batches": 0,
            "resumed_batches": 0,
            "resubmitted": 0,
        }
        self.cache_writes = CacheWrites()

    def capture_for(self, index: int) -> Capture | None:
        item = self.items.get(index)
        if item is None:
            reason = self.uncollected.get(index)
            return None if reason is None or self.online else _Refuser(reason)
        outcome = self.outcomes.get(item.cid)
        if outcome is None:  # cannot happen once collect_and_batch returned
            raise ProviderBatchError("the provider batch gave no result for this item")
        model_id = item.account.rpartition("@")[0]
        replayer = _Replayer(item.wire.name, model_id, item.fingerprint, outcome, self.cache_writes)
        self.replayers[item.cid] = replayer
        return replayer

    async def finish(self, manifest: Manifest | None) -> None:
        """Once every item has its outcome: the cache writes written, and the batches
        whose answers were all handed out marked collected (one holding an answer no
        replay used stays to be polled by a rerun)."""
        await self.cache_writes.flush()
        if manifest is None:
            return
        unsettled = {cid for cid, r in self.replayers.items() if not r.settled}
        for batch_id in self.batch_ids:
            if unsettled.isdisjoint(self.batch_cids.get(batch_id, ())):
                manifest.collected(batch_id)


async def collect_and_batch(engine: ProviderBatch, job: BatchJob) -> ProviderPlan:
    """Steps 1 and 2 of the module docstring; the plan answers step 3. The collect step's
    ``fn(item, session)`` sees the model and defaults of ``job.session``."""
    from .spool import Spool

    plan = ProviderPlan(engine.online)
    job.state.show_provider(plan.counts)
    with contextlib.closing(Spool()) as spool:  # the entries, on disk until submitted
        await _collect(engine, job, plan, spool)
        await _batch(engine, job, plan, spool)
    plan.counts["status"] = "collected"
    job.state.show_provider(plan.counts)
    return plan


async def _collect(engine: ProviderBatch, job: BatchJob, plan: ProviderPlan, spool: Spool) -> None:
    """Step 1: each pending item's request, as its provider's entry in ``spool``."""
    from ..agentic.session import Session
    from ..llms.batch_wire import wire_for

    wires: dict[str, Wire] = {}
    accounts: dict[int, tuple[LanguageModel, str, Wire]] = {}
    # collect runs leave no trace in the batch's; they see the run's model and defaults
    fn, values = job.fn, job.values
    scratch = Session(job.session.lm, max_trace_nodes=16, **job.session.defaults)
    try:
        for i in job.pending:
            collector = _Collector()
            with capturing(collector):
                try:
                    out = fn(values[i], scratch) if job.with_session else fn(values[i])
                    if inspect.isawaitable(out):
                        await out
                except DeferredCall:
                    pass
                except Exception as exc:
                    if collector.request is None:
                        if job.raise_first:  # on_error="raise": stop before anything is paid
                            info = error_info(exc)
                            job.record_failed(i, info["type"], info["message"], None, exc)
                        plan.uncollected[i] = f"{type(exc).__name__}: {exc}"[:200]
            model, request = collector.model, collector.request
            if model is None or request is None:
                continue
            known = accounts.get(id(model))
            if known is None or known[0] is not model:  # once per model object
                account = f"{model.model_id}@{getattr(model, 'server', None)}"
                wire = wires.get(account)
                if wire is None:
                    wire = wires[account] = wire_for(model, engine.max_result_bytes)
                known = accounts[id(model)] = (model, account, wire)
            _, account, wire = known
            cid = custom_id(job.keys[i])
            span = spool.add(wire.entry(cid, request))
            plan.items[i] = _Item(i, cid, account, wire, span, request_fingerprint(model, request))
    finally:
        await scratch.dispose()


async def _batch(engine: ProviderBatch, job: BatchJob, plan: ProviderPlan, spool: Spool) -> None:
    """Step 2: the collected entries submitted (or found submitted by an earlier
    process), polled and their outcomes read into ``plan``; failures resubmitted."""
    manifest, report = job.manifest, job.state.show_provider
    by_cid = {item.cid: item for item in plan.items.values()}
    active: dict[str, tuple[Wire, list[str]]] = {}
    submitted = manifest.submitted_batches() if manifest is not None else []
    if submitted:  # batches an earlier process submitted: poll, never resubmit
        todo = set(job.pending)  # the custom ids of the items done in an earlier run:
        done = {custom_id(k) for i, k in enumerate(job.keys) if i not in todo}
        for batch_id, account, cids in submitted:
            mine = [c for c in cids if c in by_cid and by_cid[c].account == account]
            if mine:
                active[batch_id] = (by_cid[mine[0]].wire, mine)
            if len(mine) + len(done.intersection(cids)) == len(cids):  # marked collected at
                plan.batch_ids.append(batch_id)  # the end only when all are this run's
                plan.batch_cids[batch_id] = cids
        plan.counts["batches"] = plan.counts["resumed_batches"] = len(active)
    waiting = {c for _, cids in active.values() for c in cids}
    fresh = [item for item in plan.items.values() if item.cid not in waiting]
    if fresh:
        plan.counts["status"] = "submitting"
        report(plan.counts)
    active.update(await _submit(engine, fresh, manifest, plan, spool))
    attempts: dict[str, int] = {}
    latest: dict[str, dict[str, Any]] = {}
    failures: dict[str, int] = {}  # consecutive failed polls of a batch
    statuses: dict[str, str] = {}  # the provider's word at the last poll that answered
    try:
        while active:
            plan.counts["status"] = "waiting"
            retry: list[_Item] = []
            backoff = 0.0
            for batch_id, (wire, cids) in list(active.items()):
                try:
                    polled = await wire.poll(batch_id)
                    results = await wire.results(batch_id, polled) if polled.ended else None
                except RetryableError as exc:  # 429, 5xx, a dropped connection: poll again
                    failures[batch_id] = n = failures.get(batch_id, 0) + 1
                    if n >= MAX_POLL_FAILURES:
                        exc.add_note(_resume_note(wire, batch_id, n))
                        raise
                    wait = _seconds(exc) or min(MAX_POLL_BACKOFF_S, 2.0 ** (n - 1))
                    backoff = max(backoff, min(wait, MAX_POLL_BACKOFF_S))
                    shown = latest.setdefault(batch_id, _unpolled(wire, batch_id, len(cids)))
                    said = statuses.get(batch_id)
                    shown["status"] = (f"{said}; " if said else "") + (
                        f"poll failed: {type(exc).__name__}, retrying ({n}/{MAX_POLL_FAILURES})"
                    )
                    continue
                except LangFxError as exc:
                    exc.add_note(_resume_note(wire, batch_id, 0))
                    raise
                failures.pop(batch_id, None)
                statuses[batch_id] = polled.status
                latest[batch_id] = {
                    "id": batch_id,
                    "provider": wire.name,
                    "status": polled.status,
                    "total": len(cids),
                    **wire.progress(polled.counts, len(cids)),
                }
                if results is None:
                    continue
                for cid in cids:
                    outcome = results.get(cid) or results.get("*")
                    if outcome is None:
                        from ..llms.batch_wire import Outcome

                        outcome = Outcome(failure="expired", message="no result was returned")
                    plan.outcomes[cid] = outcome
                    if (
                        outcome.failure in RESUBMITTED
                        and attempts.get(cid, 0) < engine.max_resubmits
                    ):
                        attempts[cid] = attempts.get(cid, 0) + 1
                        retry.append(by_cid[cid])
                del active[batch_id]
            _sum_counts(plan.counts, latest)
            report(plan.counts)
            if retry:
                plan.counts["resubmitted"] += len(retry)
                for item in retry:
                    plan.outcomes.pop(item.cid, None)
                active.update(await _submit(engine, retry, manifest, plan, spool))
                continue
            if active:
                await asyncio.sleep(max(engine.poll_interval, backoff))
    except asyncio.CancelledError:
        if engine.cancel_on_interrupt:
            with contextlib.suppress(Exception):
                await asyncio.shield(_cancel_all(active))
        raise


def _unpolled(wire: Wire, batch_id: str, n: int) -> dict[str, Any]:
    """What progress shows of a batch no poll has answered yet."""
    return {"id": batch_id, "provider": wire.name, "status": "", "total": n, "processing": n}


def _seconds(exc: BaseException) -> float | None:
    """The server's ``retry-after`` on a retryable error, when it gave one."""
    wait = getattr(exc, "retry_after", None)
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait >= 0:
        return float(wait)
    return None


def _resume_note(wire: Wire, batch_id: str, failures: int) -> str:
    tried = f" ({failures} polls in a row failed)" if failures else ""
    return (
        f"while polling {wire.name} batch {batch_id}{tried}; it keeps running at the "
        "provider: with run=, the same call again polls it, without submitting again"
    )


async def _cancel_all(active: dict[str, tuple[Wire, list[str]]]) -> None:
    for batch_id, (wire, _) in active.items():
        with contextlib.suppress(Exception):
            await wire.cancel(batch_id)


async def _submit(
    engine: ProviderBatch,
    items: list[_Item],
    manifest: Manifest | None,
    plan: ProviderPlan,
    spool: Spool,
) -> dict[str, tuple[Wire, list[str]]]:
    """Submit ``items`` in batches per account, split at the limits; record each id."""
    out: dict[str, tuple[Wire, list[str]]] = {}
    groups: dict[str, list[_Item]] = {}
    for item in items:
        groups.setdefault(item.account, []).append(item)
    for account, group in groups.items():
        wire = group[0].wire
        max_requests = min(wire.max_requests, engine.max_requests or wire.max_requests)
        max_bytes = min(wire.max_bytes, engine.max_bytes or wire.max_bytes)
        spans: list[tuple[int, int]] = []
        cids: list[str] = []
        size = wire.overhead
        for item in group:
            length = item.span[1]
            if length + wire.overhead > max_bytes:
                raise ProviderBatchError(
                    f"one request is {length} bytes, over the {wire.name} batch limit "
                    f"of {max_bytes} bytes"
                )
            if len(spans) >= max_requests or size + length + 1 > max_bytes:
                await _send(wire, account, spool.entries(spans), cids, manifest, plan, out)
                spans, cids, size = [], [], wire.overhead
            spans.append(item.span)
            cids.append(item.cid)
            size += length + 1
        if spans:
            await _send(wire, account, spool.entries(spans), cids, manifest, plan, out)
    return out


async def _send(
    wire: Wire,
    account: str,
    entries: Iterable[bytes],
    cids: list[str],
    manifest: Manifest | None,
    plan: ProviderPlan,
    out: dict[str, tuple[Wire, list[str]]],
) -> None:
    marker = uuid.uuid4().hex
    since = time.time()
    try:
        batch_id = await wire.submit(entries, marker)
    except ServerError as exc:  # a 5xx or a lost answer: the batch may exist all the same
        batch_id = await _find_created(wire, marker, len(cids), since, plan, exc)
    if manifest is not None:  # committed now: a restart polls this batch, never resubmits
        manifest.add_provider_batch(batch_id, account, cids)
    plan.batch_ids.append(batch_id)
    plan.batch_cids[batch_id] = cids
    plan.counts["batches"] += 1
    out[batch_id] = (wire, cids)


async def _find_created(
    wire: Wire, marker: str, requests: int, since: float, plan: ProviderPlan, exc: ServerError
) -> str:
    """The batch a create that failed with ``exc`` made after all, by its marker in the
    account's batch list; when none is found (nothing was created: the next run submits
    again) or several may be it, ``ProviderBatchError`` and nothing is created."""
    try:
        found = [b for b in await wire.find(marker, requests, since) if b not in plan.batch_ids]
    except LangFxError as listing:
        raise ProviderBatchError(
            f"{wire.name} batch: the answer to a batch create was lost ({exc}) and the "
            f"account's batches could not be listed ({listing}); nothing was created again: "
            "check the provider's console before running again"
        ) from exc
    if len(found) == 1:
        return found[0]
    if not found:
        raise ProviderBatchError(
            f"{wire.name} batch: a batch create failed ({exc}) and the provider lists no "
            "batch it made; nothing was sent again (a rerun submits these requests)"
        ) from exc
    raise ProviderBatchError(
        f"{wire.name} batch: the answer to a batch create was lost ({exc}) and "
        f"{len(found)} batches it may have made are listed ({', '.join(found[:5])}); "
        "nothing was created again: cancel the ones not wanted before running again"
    ) from exc


def _sum_counts(counts: dict[str, Any], latest: dict[str, dict[str, Any]]) -> None:
    """The totals over every batch polled, and ``per_batch``: each batch's last poll
    (a new list of new dicts each time: a snapshot keeps the one it was given)."""
    for k in COUNT_KEYS:
        counts[k] = sum(c.get(k, 0) for c in latest.values())
    counts["total"] = sum(c["total"] for c in latest.values())
    counts["per_batch"] = [dict(c) for c in latest.values()]
