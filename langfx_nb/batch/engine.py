"""What an engine is and what it is given: ``Engine``, ``BatchJob``, and ``Asyncio``.

The runner (``runner.py``) owns a batch's life: the ``batch`` trace node, the run manifest,
the progress reporter and the final ``BatchResult``. An engine decides only where the
pending items run. It is given one ``BatchJob`` and awaits ``Engine.run(job)``; every item
it settles goes through the job, which keeps the money rules in one place:

- ``job.run_item(i)`` runs item ``i`` in this process, traced under the batch node,
  counted and recorded (the asyncio engine calls it for each item; the provider batch for
  its replay);
- ``job.record_ok`` / ``job.record_failed`` record an item that ran elsewhere (a Ray
  worker), after its trace was adopted (``job.session.adopt``) and its requests counted
  (``job.count_requests``);
- ``await job.commit()`` commits what was recorded: an engine calls it before it starts
  more items in the place that finished them, so a crash costs at most the items in
  flight.

A new engine is a class with a ``name``, an ``in_process`` flag and ``async run(job)``;
the runner needs no edit. This module imports no engine but its own.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..agentic.fanout import settle_first_failure
from ..agentic.tracebacks import error_info, format_traceback, short_message
from ..llms.deferred import Capture, capturing, current_capture
from .codec import input_preview

if TYPE_CHECKING:
    from ..agentic.session import Session
    from ..messages import Usage
    from .manifest import Manifest
    from .state import BatchState

__all__ = ["YIELD_S", "Asyncio", "BatchJob", "Engine", "run_items"]

#: A worker whose items never wait yields to the event loop this often (seconds).
YIELD_S = 0.05


class Engine(Protocol):
    """Where ``lf.batch`` runs its pending items (``engine=``).

    ``name`` is recorded on the batch node (``metadata["engine"]``). ``in_process``: ``fn``
    runs in this process, so what it closes over (a live view, a callback) sees each item;
    ``False`` when ``fn`` is shipped elsewhere (it must then pickle). ``run`` settles every
    item of ``job.pending`` through the job (see the module) and returns; an exception it
    raises ends the batch (what was recorded is committed first)."""

    @property
    def name(self) -> str: ...

    @property
    def in_process(self) -> bool: ...

    async def run(self, job: BatchJob) -> None: ...


@dataclass(frozen=True, slots=True)
class BatchJob:
    """One batch as its engine sees it: what to run and where outcomes go.

    ``values[i]`` is item ``i``, ``keys[i]`` its manifest key; ``pending`` the indices to
    run, in input order. ``fn`` takes ``(item, session)`` when ``with_session``. At most
    ``max_concurrency`` items run at once (per worker for engines with workers).
    ``raise_first``: ``on_error="raise"`` (recording a failure raises it). ``session``:
    the view bound to the batch node. ``manifest``: the run manifest (``run=``) or ``None``.
    ``state``: the batch's counters and outcomes, which progress and the result read."""

    fn: Callable[..., Any]
    values: list[Any]
    keys: list[str]
    pending: list[int]
    with_session: bool
    max_concurrency: int
    raise_first: bool
    session: Session
    manifest: Manifest | None
    state: BatchState

    async def run_item(self, index: int, capture: Capture | None = None) -> None:
        """Run item ``index`` here under its ``item`` node and record its outcome (with
        ``capture``, its model call is answered by it: a provider batch's replay). A
        failure is recorded (and raised with ``raise_first``); a cancellation marks the
        item ``cancelled`` and propagates."""
        state, manifest, fn = self.state, self.manifest, self.fn
        item = self.values[index]
        state.running += 1
        node_id: str | None = None
        encoded: tuple[str, str] | None = None
        try:
            with self.session.track(
                "item", f"item {index}", inputs=item, metadata={"index": index}
            ) as t:
                node_id = state.node_ids[index] = t.node.id
                if capture is None and current_capture() is None:  # no provider batch here
                    out = fn(item, t.session) if self.with_session else fn(item)
                    if inspect.isawaitable(out):
                        out = await out
                else:
                    with capturing(capture):
                        out = fn(item, t.session) if self.with_session else fn(item)
                        if inspect.isawaitable(out):
                            out = await out
                if manifest is not None:
                    encoded = manifest.codec.encode(out)  # TypeError: fails the item, visibly
                t.outputs = out
        except Exception as exc:
            state.running -= 1
            recorded = t.node.error if node_id is not None else None  # (t: its tracker)
            error = state.fail(index, exc, node_id, recorded)
            if manifest is not None:
                preview = input_preview(state.inputs[index])
                manifest.add_failed(
                    self.keys[index], index, error.type, error.message, error.traceback, preview
                )
            if self.raise_first:
                raise
            return
        except BaseException:
            state.running -= 1
            state.cancelled += 1
            state.statuses[index] = "cancelled"
            raise
        state.running -= 1
        self._settled_ok(index, out, encoded)

    def record_ok(self, index: int, result: Any, node_id: str | None) -> None:
        """Item ``index`` returned ``result`` elsewhere (its trace node ``node_id``, already
        adopted). A result the manifest cannot store fails the item (``TypeError``)."""
        state, manifest = self.state, self.manifest
        state.node_ids[index] = node_id
        encoded: tuple[str, str] | None = None
        if manifest is not None:
            try:
                encoded = manifest.codec.encode(result)
            except TypeError as exc:
                info = error_info(exc)
                self.record_failed(index, info["type"], info["message"], node_id, exc)
                return
        self._settled_ok(index, result, encoded)

    def _settled_ok(self, index: int, result: Any, encoded: tuple[str, str] | None) -> None:
        """Item ``index`` returned ``result``: counted, and its row queued (``encoded``)."""
        state = self.state
        state.results[index] = result
        state.statuses[index] = "ok"
        state.done += 1
        if self.manifest is not None and encoded is not None:
            preview = input_preview(state.inputs[index])
            self.manifest.add_ok(self.keys[index], index, *encoded, preview)

    def record_failed(
        self, index: int, type_: str, message: str, node_id: str | None, exc: BaseException | None
    ) -> None:
        """Item ``index`` raised ``type_: message`` elsewhere (``exc``: the exception itself
        when it travelled). The message is kept as ``error_info`` keeps one (masked, cut);
        the traceback is read from its adopted node, else formatted from ``exc``. With
        ``raise_first`` it is raised here."""
        state = self.state
        state.node_ids[index] = node_id
        message = short_message(message)
        node = self.session.find(node_id) if node_id is not None else None
        traceback = node.error.get("traceback") if node is not None and node.error else None
        if traceback is None and exc is not None:
            traceback = format_traceback(exc)
        error = state.fail_as(index, type_, message, node_id, traceback)
        if self.manifest is not None:
            preview = input_preview(state.inputs[index])
            self.manifest.add_failed(
                self.keys[index], index, error.type, error.message, traceback, preview
            )
        if self.raise_first:
            raise exc if exc is not None else RuntimeError(f"{type_}: {message}")

    def count_requests(self, requests: list[tuple[str, Usage | None, float | None]]) -> None:
        """Model requests made elsewhere (model id, usage, cost), counted in the totals."""
        for model_id, usage, cost in requests:
            self.state.meter.add(model_id, usage, cost)

    async def commit(self) -> None:
        """Commit the outcomes recorded so far to the manifest (nothing without one)."""
        if self.manifest is not None:
            await self.manifest.commit()


async def run_items(
    job: BatchJob,
    capture_for: Callable[[int], Capture | None] | None = None,
    *,
    commit_each: bool = True,
    after_each: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run ``job.pending`` here with ``job.max_concurrency`` workers pulling in input order.

    ``commit_each``: each outcome is committed before its worker takes the next item (a
    crash re-sends only what was in flight). ``capture_for(i)``: the capture answering item
    ``i``'s model call. ``after_each``: awaited after each item (the replay's cache writes).
    """
    order = iter(job.pending)
    manifest = job.manifest if commit_each else None
    run_item = job.run_item
    # one clock for all workers: items that never wait (fakes, caches) still let the
    # ticker report and commit, with one yield per YIELD_S, not per worker
    next_yield = time.monotonic() + YIELD_S

    async def worker() -> None:
        nonlocal next_yield
        for i in order:
            if time.monotonic() >= next_yield:
                next_yield = time.monotonic() + YIELD_S
                await asyncio.sleep(0)
            await run_item(i, None if capture_for is None else capture_for(i))
            if manifest is not None:
                await manifest.commit()
            if after_each is not None:
                await after_each()

    workers = [
        asyncio.ensure_future(worker()) for _ in range(min(job.max_concurrency, len(job.pending)))
    ]
    await settle_first_failure(workers)


@dataclass(frozen=True, slots=True)
class Asyncio:
    """Run the items on asyncio in this process (``engine=None``): ``max_concurrency``
    workers pull them in input order; each outcome is committed before its worker goes on."""

    name = "asyncio"
    in_process = True

    async def run(self, job: BatchJob) -> None:
        await run_items(job)
