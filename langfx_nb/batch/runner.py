"""The runner behind ``lf.batch`` (documented there and in docs/batch.md).

A fixed pool of ``max_concurrency`` workers pulls the items that are not done yet, in input
order. Each item runs inside ``Session.track("item", ...)`` under one ``batch`` node, with a
``UsageMeter`` on the batch node counting every model request made through the items'
views. A ticker task hands a ``BatchProgress`` to the reporter every
``UPDATE_INTERVAL_S`` and commits the manifest's queued rows; the reporter gets its final
snapshot in ``finally``, whatever ended the batch.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import inspect
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..agentic.fanout import settle_first_failure
from ..agentic.session import Session
from ..agentic.trace import TraceNode
from ..agentic.tracebacks import error_info, format_traceback
from ..agentic.usage import UsageMeter, total_tokens
from ..errors import RunManifestError
from ..llms.deferred import Capture, capturing, current_capture
from ..messages import Usage
from .codec import ResultCodec, item_keys, target_function
from .identity import RunIdentity, run_identity
from .manifest import FLUSH_ROWS, Manifest, manifest_path
from .owner import IfOwned, RunOwner
from .progress import (
    MAX_GROUP_ITEMS,
    UPDATE_INTERVAL_S,
    BatchProgress,
    Reporter,
    group_errors,
    resolve_reporter,
)
from .provider import ProviderBatch, ProviderPlan, collect_and_batch
from .ray_engine import Ray, dataset_rows, run_on_ray
from .result import BatchResult, BatchTotals, ItemError, ItemsFailedError, ItemStatus

__all__ = ["run_batch", "takes_session"]

#: A worker whose items never wait yields to the event loop this often (seconds).
YIELD_S = 0.05
#: The manifest's transactions during a provider batch's replay: 2,048 rows or 1 s (online,
#: each item's row is committed before its worker goes on). A replayed item lost to a crash
#: costs no second request (its batch stays ``submitted`` until every item is stored, and a
#: rerun polls and downloads it again); with ~150 rows per 50 ms transaction each commit
#: rewrote the same random-key index pages: ~4 us of CPU and 20-30 us of wall time per item
#: more in SQLite.
REPLAY_FLUSH_ROWS = 2048
REPLAY_FLUSH_INTERVAL_S = 1.0


def takes_session(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` accepts a second positional argument (the item's session view)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= 2


class _Run:
    """The state of one batch: per-item outcomes, counters, error groups."""

    def __init__(self, n: int, name: str, session: Session) -> None:
        self.results: list[Any] = [None] * n
        self.statuses: list[ItemStatus] = ["skipped"] * n
        self.errors: list[ItemError | None] = [None] * n
        self.node_ids: list[str | None] = [None] * n
        self.resumed: list[bool] = [False] * n
        self.done = 0
        self.failed = 0
        self.running = 0
        self.resumed_count = 0
        self.groups: dict[str, list[Any]] = {}
        self.meter = UsageMeter()
        self.session = session
        self.name = name
        self.n = n
        self.t0 = time.monotonic()
        self.batch_node_id: str | None = None
        self.finished = False
        self.provider: dict[str, Any] | None = None
        self.run: str | None = None  # the run manifest's path (``run=``)
        self.inputs: list[Any] = []  # the items, by index (``BatchResult.inputs``)
        self.identity: RunIdentity | None = None  # the run's (with ``run=``)

    def set_provider(self, counts: dict[str, Any]) -> None:
        """The provider's own counts (``engine=ProviderBatch()``), shown by progress."""
        self.provider = dict(counts)

    def fail(self, index: int, exc: BaseException, node_id: str | None) -> ItemError:
        info = error_info(exc)
        return self.fail_as(index, info["type"], info["message"], node_id, format_traceback(exc))

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
        left = self.n - self.done - self.failed - self.running
        remaining = left + self.running
        eta = remaining / rate if rate > 0 else (0.0 if not remaining else None)
        cost, unpriced = self.meter.cost()
        return BatchProgress(
            total=self.n,
            done=self.done,
            failed=self.failed,
            running=self.running,
            left=left,
            resumed=self.resumed_count,
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
        return BatchResult(
            results=self.results,
            statuses=self.statuses,
            errors=self.errors,
            node_ids=self.node_ids,
            keys=keys,
            resumed=self.resumed,
            totals=totals,
            batch_node_id=self.batch_node_id,
            session=self.session,
            run_path=None if path is None else str(path),
            inputs=self.inputs,
            identity=self.identity,
        )


class _RaySink:
    """Where ``engine=Ray()`` records the outcomes the workers send back (driver side)."""

    def __init__(
        self, state: _Run, keys: list[str], manifest: Manifest | None, raise_first: bool
    ) -> None:
        self.state = state
        self.keys = keys
        self.manifest = manifest
        self.raise_first = raise_first

    def running(self, count: int) -> None:
        self.state.running += count

    def requests(self, requests: list[tuple[str, Usage | None, float | None]]) -> None:
        for model_id, usage, cost in requests:
            self.state.meter.add(model_id, usage, cost)

    def ok(self, index: int, result: Any, node_id: str | None) -> None:
        state, manifest = self.state, self.manifest
        state.node_ids[index] = node_id
        encoded: tuple[str, str] | None = None
        if manifest is not None:
            try:
                encoded = manifest.codec.encode(result)
            except TypeError as exc:
                info = error_info(exc)
                self.failed(index, info["type"], info["message"], node_id, exc)
                return
        state.results[index] = result
        state.statuses[index] = "ok"
        state.done += 1
        if manifest is not None and encoded is not None:
            manifest.add_ok(self.keys[index], index, *encoded, state.inputs[index])

    def failed(
        self, index: int, type_: str, message: str, node_id: str | None, exc: BaseException | None
    ) -> None:
        state = self.state
        state.node_ids[index] = node_id
        node = state.session.find(node_id) if node_id is not None else None  # adopted
        traceback = node.error.get("traceback") if node is not None and node.error else None
        error = state.fail_as(index, type_, message, node_id, traceback)
        if self.manifest is not None:
            self.manifest.add_failed(
                self.keys[index], index, error.type, error.message, traceback, state.inputs[index]
            )
        if self.raise_first:
            raise exc if exc is not None else RuntimeError(f"{type_}: {message}")

    async def settled(self) -> None:
        """Commit the outcomes recorded so far (before their worker is given more items)."""
        if self.manifest is not None:
            await self.manifest.commit()


def _quietly(call: Callable[[BatchProgress], None], progress: BatchProgress) -> None:
    with contextlib.suppress(Exception):  # a broken progress view never stops a batch
        call(progress)


async def run_batch(
    fn: Callable[..., Any],
    items: Iterable[Any],
    *,
    session: Session | None,
    run: str | Path | None,
    engine: Any,
    max_concurrency: int,
    on_error: str,
    progress: Any,
    key: Callable[[Any], str] | None,
    name: str | None,
    if_owned: IfOwned = "raise",
    version: str | None = None,
    identity: RunIdentity | None = None,
) -> BatchResult[Any]:
    """``lf.batch``: see its docstring (``identity``: the run's, when the caller knows it
    better than ``fn`` shows: ``lf.eval.run``'s task)."""
    if not callable(fn):
        raise TypeError(f"fn must be an async callable, not {type(fn).__name__}")
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
        raise TypeError("max_concurrency must be an int")
    if max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1")
    if on_error not in ("collect", "raise"):
        raise ValueError("on_error must be 'collect' or 'raise'")
    if if_owned not in ("raise", "wait"):
        raise ValueError("if_owned must be 'raise' or 'wait'")
    if engine is not None and not isinstance(engine, (ProviderBatch, Ray)):
        raise ValueError(
            "engine=: None (asyncio in this process), lf.engines.ProviderBatch() or "
            f"lf.engines.Ray() are available here, not {type(engine).__name__}"
        )
    if isinstance(items, (str, bytes)):
        raise TypeError("items must be an iterable of items, not a single string")
    rows = dataset_rows(items)  # a ray.data.Dataset: its rows, read here
    if rows is not None:
        items = rows
    values = list(items)
    keys = item_keys(values, key)  # an item that cannot be keyed fails before anything runs
    with_session = takes_session(fn)
    codec = ResultCodec(fn)
    path = manifest_path(run) if run is not None else None
    if path is not None and identity is None:
        identity = run_identity(fn, version=version, session=session)
    owner = await RunOwner.acquire(path, if_owned) if path is not None else None
    try:
        manifest = Manifest.open(path, identity, codec) if identity and path else None
    except BaseException:
        if owner is not None:
            owner.release()
        raise
    root = session if session is not None else Session()
    try:
        stored = manifest.stored(keys) if manifest is not None else {}
        fn_name = identity.fn if identity else getattr(target_function(fn), "__qualname__", "")
        state = _Run(len(values), name or fn_name.rpartition(".")[2] or "batch", root)
        state.inputs, state.identity = values, identity
        for i, k in enumerate(keys):
            if k in stored:
                state.results[i] = stored[k]
                state.statuses[i] = "ok"
                state.resumed[i] = True
        state.done = state.resumed_count = len(stored)
        pending = [i for i, k in enumerate(keys) if k not in stored]
        try:
            await _execute(
                fn,
                values,
                keys,
                pending,
                state,
                manifest,
                with_session,
                max_concurrency,
                on_error == "raise",
                progress,
                str(path) if path else None,
                engine,
            )
        except RunManifestError as exc:
            exc.result = state.result(keys, path)
            raise
        return state.result(keys, path)
    finally:
        if manifest is not None:
            manifest.close()
        if owner is not None:
            owner.release()
        if session is None:  # the batch's own session: ended, still readable
            await root.dispose()


async def _execute(
    fn: Callable[..., Any],
    values: list[Any],
    keys: list[str],
    pending: list[int],
    state: _Run,
    manifest: Manifest | None,
    with_session: bool,
    max_concurrency: int,
    raise_first: bool,
    progress: Any,
    run_path: str | None,
    engine: ProviderBatch | Ray | None = None,
) -> None:
    inputs = {"items": state.n, "to_run": len(pending), "resumed": state.resumed_count}
    metadata: dict[str, Any] = {"max_concurrency": max_concurrency}
    if engine is not None:
        metadata["engine"] = "ray" if isinstance(engine, Ray) else "provider_batch"
    if run_path is not None:
        metadata["run"] = run_path
    state.run = run_path
    reporter: Reporter | None = None
    ticker: asyncio.Task[None] | None = None
    tracer: _TraceWriter | None = None
    flush_error: RunManifestError | None = None
    plan: ProviderPlan | None = None
    try:
        with state.session.track(
            "batch", state.name, inputs=inputs, metadata=metadata, meter=state.meter
        ) as tracked:
            state.batch_node_id = tracked.node.id
            view = tracked.session
            if manifest is not None:
                tracer = _TraceWriter(manifest, state.session, tracked.node)
            reporter = resolve_reporter(progress, state.session, state.snapshot())
            try:
                if reporter is not None:
                    _quietly(reporter.update, state.snapshot())
                ticker = asyncio.ensure_future(_tick(state, reporter, manifest))
                if isinstance(engine, Ray):
                    sink = _RaySink(state, keys, manifest, raise_first)
                    await run_on_ray(
                        engine, fn, values, pending, view, sink, with_session, max_concurrency
                    )
                    pending = []  # run: the pool below has nothing left
                if isinstance(engine, ProviderBatch):

                    def on_provider(counts: dict[str, Any]) -> None:
                        changed = state.provider is None or (
                            state.provider.get("status") != counts.get("status")
                        )
                        state.set_provider(counts)
                        if changed and reporter is not None:  # a few status changes per batch
                            _quietly(reporter.update, state.snapshot())

                    plan = await collect_and_batch(
                        engine, fn, values, keys, pending, manifest, with_session, on_provider, view
                    )
                if plan is not None and manifest is not None:  # see REPLAY_FLUSH_ROWS
                    manifest.flush_rows = REPLAY_FLUSH_ROWS
                    manifest.flush_interval = REPLAY_FLUSH_INTERVAL_S
                # online, each outcome is committed before its worker takes the next item
                # (a crash re-sends only what was in flight); a replayed item costs nothing
                commit_each = manifest is not None and plan is None
                capture_for = plan.capture_for if plan is not None else None
                writes = plan.cache_writes if plan is not None else None
                order = iter(pending)
                # one clock for all workers: items that never wait (fakes, caches) still let
                # the ticker report and commit, with one yield per YIELD_S, not per worker
                next_yield = time.monotonic() + YIELD_S

                async def worker() -> None:
                    nonlocal next_yield
                    for i in order:
                        if time.monotonic() >= next_yield:
                            next_yield = time.monotonic() + YIELD_S
                            await asyncio.sleep(0)
                        await _one(
                            fn,
                            values[i],
                            i,
                            keys[i],
                            state,
                            view,
                            manifest,
                            with_session,
                            raise_first,
                            None if capture_for is None else capture_for(i),
                        )
                        if commit_each and manifest is not None:
                            await manifest.commit()
                        if writes is not None and writes.due:
                            await writes.flush()

                workers = [
                    asyncio.ensure_future(worker())
                    for _ in range(min(max_concurrency, len(pending)))
                ]
                await settle_first_failure(workers)
                if manifest is not None:
                    manifest.flush()
                if plan is not None:
                    await plan.finish(manifest)
            finally:
                if ticker is not None:
                    ticker.cancel()
                if plan is not None:  # the answers of the items that finished
                    with contextlib.suppress(Exception):
                        await plan.cache_writes.flush()
                if manifest is not None and manifest.broken is None:
                    try:
                        manifest.flush()  # what finished before a cancellation or an error
                    except RunManifestError as exc:
                        flush_error = exc
                state.finished = True
                final = state.snapshot()
                tracked.outputs = {"done": final.done, "failed": final.failed, "total": final.total}
                view.set_progress(final.settled, final.total)
                if reporter is not None:
                    _quietly(reporter.close, final)
            if final.failed:  # the batch says what happened: not "ok" with items failed
                what = f"{final.failed:,} of {final.total:,} items failed"
                tracked.end("failed", error=ItemsFailedError(what))
    finally:
        if tracer is not None:
            tracer.stop()
    if tracer is not None and manifest is not None and not manifest.broken and not flush_error:
        try:
            manifest.flush()  # the batch node, finished
            manifest.store_trace()  # the whole trace, stored as it is read
        except RunManifestError as exc:
            flush_error = exc
    if flush_error is not None:
        raise flush_error


#: a trace record's JSON text, as ``json.dumps`` with these options writes it (one encoder made
#: once, not one per record: two records per item)
_encode_record = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


class _TraceWriter:
    """The batch's trace, for its manifest (a ``TraceSource``): the batch node's ancestors
    and itself (running) from the start, then each node of its subtree as it ends or is
    logged (the batch node last). A node is kept as its record (``TraceNode.to_json``) at
    its latest event, by id, and encoded to JSON once, when the manifest flushes: a node
    changed twice before a flush is written once."""

    def __init__(self, manifest: Manifest, session: Session, batch: TraceNode) -> None:
        self.manifest = manifest
        self.store = session.trace_store
        self.run = manifest.new_trace_run()
        self.prefix = "" if self.run == 1 else f"{self.run}:"
        self.batch_id = batch.id
        self.changed: dict[str, dict[str, Any]] = {}
        chain: list[TraceNode] = []
        node: TraceNode | None = batch
        while node is not None:
            chain.append(node)
            node = self.store.nodes.get(node.parent_id) if node.parent_id is not None else None
        for node in reversed(chain):
            self.changed[node.id] = node.to_json()
        manifest.record_trace_from(self)
        self.store.node_hooks.append(self.hook)

    def stop(self) -> None:
        """No more events are recorded; what was recorded is still handed to the manifest."""
        self.store.node_hooks.remove(self.hook)

    def __len__(self) -> int:
        """How many nodes changed since the last ``records``."""
        return len(self.changed)

    def _under_batch(self, node: TraceNode) -> bool:
        nodes, batch_id = self.store.nodes, self.batch_id
        parent = node.parent_id
        while parent is not None:
            if parent == batch_id:
                return True
            above = nodes.get(parent)
            if above is None:
                return False
            parent = above.parent_id
        return False

    def hook(self, event: str, node: TraceNode) -> None:
        if (event == "end" or event == "log") and (
            node.id == self.batch_id or self._under_batch(node)
        ):
            with contextlib.suppress(Exception):  # a hook must never break the run
                changed = self.changed
                changed.pop(node.id, None)  # rows come in the order of their last change
                changed[node.id] = node.to_json()
                if len(changed) >= 8 * FLUSH_ROWS:
                    self.manifest.flush()

    def records(self) -> list[tuple[int, str, str]]:
        """``(run, node id, JSON text)`` of each node changed since the last call, in the
        order of their last change; they are forgotten here."""
        changed, self.changed = self.changed, {}
        run, prefix, encode = self.run, self.prefix, _encode_record
        out: list[tuple[int, str, str]] = []
        for record in changed.values():
            with contextlib.suppress(Exception):  # a node that cannot be encoded is left out
                if prefix:
                    record["id"] = prefix + record["id"]
                    if record.get("parent_id") is not None:
                        record["parent_id"] = prefix + record["parent_id"]
                out.append((run, record["id"], encode(record)))
        return out


async def _tick(state: _Run, reporter: Reporter | None, manifest: Manifest | None) -> None:
    while True:
        await asyncio.sleep(UPDATE_INTERVAL_S)
        if reporter is not None:
            _quietly(reporter.update, state.snapshot())
        if manifest is not None and manifest.due and manifest.broken is None:
            try:
                manifest.flush()
            except RunManifestError:
                return  # the next write from a worker raises it and stops the batch


async def _one(
    fn: Callable[..., Any],
    item: Any,
    index: int,
    key: str,
    state: _Run,
    view: Session,
    manifest: Manifest | None,
    with_session: bool,
    raise_first: bool,
    capture: Capture | None = None,
) -> None:
    """Run one item under its ``item`` node and record its outcome (with ``capture``, its
    model call is answered by a provider batch)."""
    state.running += 1
    node_id: str | None = None
    encoded: tuple[str, str] | None = None
    try:
        with view.track("item", f"item {index}", inputs=item, metadata={"index": index}) as t:
            node_id = state.node_ids[index] = t.node.id
            if capture is None and current_capture() is None:  # no provider batch here
                out = fn(item, t.session) if with_session else fn(item)
                if inspect.isawaitable(out):
                    out = await out
            else:
                with capturing(capture):
                    out = fn(item, t.session) if with_session else fn(item)
                    if inspect.isawaitable(out):
                        out = await out
            if manifest is not None:
                encoded = manifest.codec.encode(out)  # TypeError: fails the item, visibly
            t.outputs = out
    except Exception as exc:
        state.running -= 1
        error = state.fail(index, exc, node_id)
        if manifest is not None:
            manifest.add_failed(key, index, error.type, error.message, error.traceback, item)
        if raise_first:
            raise
        return
    except BaseException:
        state.running -= 1
        state.statuses[index] = "cancelled"
        raise
    state.running -= 1
    state.results[index] = out
    state.statuses[index] = "ok"
    state.done += 1
    if manifest is not None and encoded is not None:
        manifest.add_ok(key, index, *encoded, item)
