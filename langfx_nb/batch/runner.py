"""The runner behind ``lf.batch`` (documented there and in docs/batch.md).

``run_batch`` checks the call, keys the items, opens the run manifest and reads what is
done, then ``_execute`` runs the rest: inside one ``batch`` trace node (with a
``UsageMeter`` counting every model request made through the items' views) it hands the
engine one ``BatchJob`` (``engine.py``) and awaits ``engine.run(job)``. A ticker task hands
a ``BatchProgress`` to the reporter every ``UPDATE_INTERVAL_S`` and commits the manifest's
queued rows; the reporter gets its final snapshot in ``finally``, whatever ended the batch.
The engine decides only where the items run: the runner never looks at which one it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..agentic.session import Session
from ..agentic.trace import OPEN_STATUSES, TraceNode
from ..agentic.usage import UsageMeter
from ..errors import RunManifestError
from .codec import ResultCodec, is_dataframe, item_keys, target_function
from .engine import Asyncio, BatchJob, Engine
from .identity import RunIdentity, run_identity
from .manifest import FLUSH_ROWS, Manifest, manifest_path
from .owner import IfOwned, RunOwner
from .progress import UPDATE_INTERVAL_S, Reporter, check_progress, resolve_reporter
from .ray_engine import dataset_rows
from .result import BatchResult, ItemsFailedError
from .state import BatchState, quietly

__all__ = ["run_batch", "takes_session"]


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


async def run_batch(
    fn: Callable[..., Any],
    items: Iterable[Any],
    *,
    session: Session | None,
    run: str | Path | None,
    engine: Engine | None,
    max_concurrency: int,
    on_error: str,
    progress: Any,
    key: Callable[[Any], str] | None,
    name: str | None,
    if_owned: IfOwned = "raise",
    version: str | None = None,
    identity: RunIdentity | None = None,
    inputs: Sequence[Any] | None = None,
) -> BatchResult[Any]:
    """``lf.batch``: see its docstring (``identity``: the run's, when the caller knows it
    better than ``fn`` shows: ``lf.eval.run``'s task; ``inputs``: what the manifest stores
    and the result lists as each item's input, when the items are not: ``lf.eval.run``
    batches trial numbers, and stores each trial's case inputs)."""
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
    check_progress(progress)
    if engine is None:
        engine = Asyncio()
    elif not callable(getattr(engine, "run", None)) or not isinstance(
        getattr(engine, "name", None), str
    ):
        raise ValueError(
            "engine= takes an engine object (lf.engines.Asyncio(), Ray(), ProviderBatch(), or "
            f"one with a name and an async run(job)), not {type(engine).__name__}"
        )
    if isinstance(items, (str, bytes)):
        raise TypeError("items must be an iterable of items, not a single string")
    if is_dataframe(items):
        raise TypeError(
            "items is a pandas DataFrame, which iterates over its column names: pass "
            "df.to_dict('records') to run one item per row (a dict of column -> value)"
        )
    rows = dataset_rows(items)  # a ray.data.Dataset: its rows, read here
    if rows is not None:
        items = rows
    values = list(items)
    # with run=, an item that cannot be keyed fails before anything runs
    keys = item_keys(values, key, required=run is not None)
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
        state = BatchState(len(values), name or fn_name.rpartition(".")[2] or "batch", root)
        state.inputs = values if inputs is None else list(inputs)
        state.identity = identity
        for i, k in enumerate(keys):
            if k in stored:
                state.results[i] = stored[k]
                state.statuses[i] = "ok"
                state.resumed[i] = True
        state.done = state.resumed_count = len(stored)
        state.run = str(path) if path else None
        job = BatchJob(
            fn=fn,
            values=values,
            keys=keys,
            pending=[i for i, k in enumerate(keys) if k not in stored],
            with_session=with_session,
            max_concurrency=max_concurrency,
            raise_first=on_error == "raise",
            session=root,  # the engine gets the view bound to the batch node
            manifest=manifest,
            state=state,
        )
        try:
            await _execute(engine, job, progress)
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


async def _execute(engine: Engine, job: BatchJob, progress: Any) -> None:
    """Run ``job`` on ``engine`` inside a ``batch`` node of ``job.session`` (the engine's
    job holds the node's view), with progress and the manifest's trace; what finished is
    committed whatever ends it."""
    state, manifest = job.state, job.manifest
    inputs = {"items": state.n, "to_run": len(job.pending), "resumed": state.resumed_count}
    metadata: dict[str, Any] = {"max_concurrency": job.max_concurrency, "engine": engine.name}
    if state.run is not None:
        metadata["run"] = state.run
    reporter: Reporter | None = None
    ticker: asyncio.Task[None] | None = None
    tracer: _TraceWriter | None = None
    flush_error: RunManifestError | None = None
    try:
        with state.session.track(
            "batch", state.name, inputs=inputs, metadata=metadata, meter=state.meter
        ) as tracked:
            state.batch_node_id = tracked.node.id
            view = tracked.session
            job = dataclasses.replace(job, session=view)
            if manifest is not None:
                tracer = _TraceWriter(manifest, state.session, tracked.node, state.meter)
                state.trace_prefix = tracer.prefix
            reporter = state.reporter = resolve_reporter(progress, state.session, state.snapshot())
            try:
                if reporter is not None:
                    quietly(reporter.update, state.snapshot())
                ticker = asyncio.ensure_future(_tick(state, reporter, manifest))
                await engine.run(job)
                if manifest is not None:
                    manifest.flush()
            finally:
                if ticker is not None:
                    ticker.cancel()
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
                    quietly(reporter.close, final)
            if final.failed:  # the batch says what happened: not "ok" with items failed
                what = f"{final.failed:,} of {final.total:,} items failed"
                tracked.end("failed", error=ItemsFailedError(what))
    finally:
        if tracer is not None:
            tracer.stop()
            if manifest is not None and not manifest.broken and not flush_error:
                try:  # also when cancelled or raising: the batch node's end is committed
                    manifest.flush()  # the batch node, finished
                    manifest.store_trace()  # the whole trace, stored as it is read
                except RunManifestError as exc:
                    flush_error = exc
    if flush_error is not None:
        raise flush_error


#: a trace record's JSON text, as ``json.dumps`` with these options writes it (one encoder made
#: once, not one per record: two records per item). No check for circular references: a
#: record is previews (bounded, acyclic); one holding a cycle (a caller's own ``metadata``)
#: still fails, with ``RecursionError`` instead of ``ValueError``, and is left out as before
_encode_record = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False
).encode


class _TraceWriter:
    """The batch's trace, for its manifest (a ``TraceSource``): the batch node's ancestors
    and itself (running) from the start, then each node of its subtree as it ends or is
    logged (the batch node last). A node is kept as its record (``TraceNode.to_json``) at
    its latest event, by id, and encoded to JSON once, when the manifest flushes: a node
    changed twice before a flush is written once."""

    def __init__(
        self, manifest: Manifest, session: Session, batch: TraceNode, meter: UsageMeter
    ) -> None:
        self.manifest = manifest
        self.meter = meter
        self.requests = -1  # the meter's requests when ``usage`` last handed them over
        self.store = session.trace_store
        self.run = manifest.new_trace_run()
        self.prefix = "" if self.run == 1 else f"{self.run}:"
        #: a later run's times are moved after the earlier runs' (each counts from its own
        #: session's start)
        self.offset = manifest.trace_end() if self.prefix else 0.0
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
            try:
                changed = self.changed
                changed.pop(node.id, None)  # rows come in the order of their last change
                changed[node.id] = node.to_json()
                if len(changed) >= 8 * FLUSH_ROWS:
                    self.manifest.flush()
            except Exception:  # a hook must never break the run
                return

    def usage(self) -> dict[str, Any] | None:
        """The run's usage (``UsageMeter.to_json``) and its session's ``max_trace_nodes``,
        when it changed since the last call: committed with the item rows, so after a crash
        the trace's summary still counts every request of the items kept, once."""
        if self.meter.requests == self.requests:
            return None
        self.requests = self.meter.requests
        return {**self.meter.to_json(), "max_trace_nodes": self.store.max_nodes}

    def records(self) -> tuple[list[tuple[int, str, str]], list[dict[str, Any]]]:
        """``(run, node id, JSON text)`` of each node changed since the last call, in the
        order of their last change, and the same records for the stored trace's rows (but
        the batch node's while it runs: it is written again when it ends); they are
        forgotten here."""
        changed, self.changed = self.changed, {}
        run, prefix, offset, encode = self.run, self.prefix, self.offset, _encode_record
        out: list[tuple[int, str, str]] = []
        rows: list[dict[str, Any]] = []
        batch_id = prefix + self.batch_id
        for record in changed.values():
            try:
                if prefix:
                    record["id"] = prefix + record["id"]
                    if record.get("parent_id") is not None:
                        record["parent_id"] = prefix + record["parent_id"]
                    for at in ("start", "end"):
                        if isinstance(record.get(at), (int, float)):
                            record[at] += offset
                out.append((run, record["id"], encode(record)))
                if record["id"] != batch_id or record["status"] not in OPEN_STATUSES:
                    rows.append(record)
            except Exception:  # a node that cannot be encoded is left out
                continue
        return out, rows


async def _tick(state: BatchState, reporter: Reporter | None, manifest: Manifest | None) -> None:
    while True:
        await asyncio.sleep(UPDATE_INTERVAL_S)
        if reporter is not None:
            quietly(reporter.update, state.snapshot())
        if manifest is not None and manifest.due and manifest.broken is None:
            try:
                manifest.flush()
            except RunManifestError:
                return  # the next write from a worker raises it and stops the batch
