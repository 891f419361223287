"""``engine=lf.engines.Ray()``: the same ``lf.batch`` with its items run on a Ray cluster.

The driver (this process) keeps what the asyncio engine keeps: the run manifest, the
session and its trace, the progress view. ``num_workers`` async actors
(``ray_worker.BatchWorker``) run the items. Each worker holds two chunks of
``max_concurrency`` items at once (at most ``max_concurrency`` of them run at a time), so it
never idles between chunks; a chunk is a streaming call (``num_returns="streaming"``) that
sends its items' outcomes back as they end (result, error, model requests, trace nodes as
``TraceNode.to_json``). The driver adopts the nodes under its ``batch`` node
(``Session.adopt``), counts the requests, records the outcomes and commits them as they
arrive, and gives a worker whose chunk ended the next one. Items are pickled when their
chunk is sent, not before.

A worker that dies (its process killed) is restarted by Ray (``max_restarts``); the items
of its chunks that had not come back are sent again, on it or another worker. An item
whose outcome reached the driver is never sent again, so a crash re-sends only the items
that were running or had ended in the last moments. Rate limits (``lf.RateLimit``,
provider headers, 429 pauses) hold for the whole cluster: one ``ray_limiter.LimitActor``
per batch, created by the first worker that needs it, leases capacity to the workers.

This module does not import Ray: ``ray_worker`` (which does) is imported on first use.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import itertools
import pickle
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import RayEngineError, ShippingError

if TYPE_CHECKING:
    from .engine import BatchJob
    from .ray_worker import Outcome

__all__ = ["Ray", "dataset_rows"]

#: Chunks held at each worker at once: one runs, the next starts as the first one's items
#: end (at most ``max_concurrency`` items run at once in a worker).
SLOTS_PER_WORKER = 2
#: How long the driver waits for an outcome before it looks at its own task again
#: (seconds): the bound on how late a cancellation is seen.
WAIT_S = 0.2


@dataclass(frozen=True, slots=True)
class Ray:
    """Run ``lf.batch`` on a Ray cluster (``pip install 'langfx_nb[ray]'``).

    ``address``: an existing cluster (``"auto"``, ``"ray://host:10001"``); ``None`` joins
    the cluster this process is already connected to, else starts a local one (stopped when
    the batch ends). ``num_workers``: worker actors (default: the cluster's CPUs), each
    running ``max_concurrency`` items at once. ``num_cpus``: the CPUs of a local cluster
    this engine starts (default: all). ``cpus_per_worker``: what each worker reserves.
    ``max_worker_restarts``: how many times Ray restarts each worker that dies before the
    batch fails with ``RayEngineError``.
    """

    address: str | None = None
    num_workers: int | None = None
    num_cpus: int | None = None
    cpus_per_worker: float = 1.0
    max_worker_restarts: int = 8

    name = "ray"
    in_process = False  # fn, items and the session's model travel to the workers

    def __post_init__(self) -> None:
        for name in ("num_workers", "num_cpus"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int or None")
        if not self.cpus_per_worker >= 0:
            raise ValueError("cpus_per_worker must be a non-negative number")
        if isinstance(self.max_worker_restarts, bool) or self.max_worker_restarts < 0:
            raise ValueError("max_worker_restarts must be a non-negative int")

    async def run(self, job: BatchJob) -> None:
        """Run ``job.pending`` on Ray workers (see the module)."""
        try:
            import ray
        except ImportError as exc:
            raise RayEngineError(
                "engine=lf.engines.Ray() needs Ray: pip install 'langfx_nb[ray]'"
            ) from exc
        view = job.session
        fn_blob = _dumps(job.fn, "fn")  # before the cluster starts and before any request
        context_blob = _dumps((view.lm, dict(view.defaults)), "the session's lm and defaults")
        if not job.pending:
            return
        started = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address is not None:
                options["address"] = self.address
            elif self.num_cpus is not None:
                options["num_cpus"] = self.num_cpus
            try:
                await asyncio.to_thread(ray.init, **options)
            except Exception as exc:  # Ray raises a bare Exception when start-up times out
                with contextlib.suppress(Exception):  # what did start is stopped
                    await asyncio.to_thread(ray.shutdown)
                where = self.address or "a local cluster"
                raise RayEngineError(
                    f"Ray could not start or join {where} ({type(exc).__name__}: {exc}); "
                    "nothing was sent. On a loaded machine a local cluster may outlast "
                    "Ray's start-up wait: start it once yourself (ray.init()) and every "
                    "Ray() batch joins it (docs/batch.md, Start-up)"
                ) from exc
            started = True  # ours to stop (a cluster we joined is only disconnected from)
        limiter = f"batch-{uuid.uuid4().hex}"
        waiter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="langfx-ray")
        actors: list[Any] = []
        try:
            fn_ref = ray.put(fn_blob)  # held here: a worker Ray restarts is made from it again
            actors = self._start_workers(ray, job, fn_ref, context_blob, limiter)
            await _drive(ray, job, actors, waiter, self.max_worker_restarts)
        finally:
            waiter.shutdown(wait=True)  # the driver's wait ends within WAIT_S
            for actor in actors:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
            with contextlib.suppress(Exception):  # made only if a worker needed a limit
                from .ray_worker import LIMITER_NAMESPACE

                ray.kill(ray.get_actor(limiter, namespace=LIMITER_NAMESPACE))
            if started:
                await asyncio.to_thread(ray.shutdown)

    def _start_workers(
        self, ray: Any, job: BatchJob, fn_ref: Any, context_blob: bytes, limiter: str
    ) -> list[Any]:
        from .ray_worker import BatchWorker

        view = job.session
        worker_cls = ray.remote(
            num_cpus=self.cpus_per_worker,
            max_restarts=self.max_worker_restarts,
        )(BatchWorker)
        config: dict[str, Any] = {
            "context": context_blob,
            "with_session": job.with_session,
            "concurrency": job.max_concurrency,
            "prices": dict(view.prices),
            "max_trace_nodes": view.trace_store.max_nodes,
            "max_text_chars": view.max_text_chars,
            "limiter": limiter,
        }
        count = self.num_workers
        if count is None:
            cpus = ray.cluster_resources().get("CPU", 1)
            count = max(1, int(cpus // max(self.cpus_per_worker, 1)))
        return [worker_cls.remote(fn_ref, config) for _ in range(count)]


async def _drive(
    ray: Any,
    job: BatchJob,
    actors: list[Any],
    waiter: concurrent.futures.Executor,
    restarts: int,
) -> None:
    """Run ``job.pending`` in chunks on ``actors`` (``SLOTS_PER_WORKER`` chunks each), each
    chunk a streaming call whose outcomes come back as its items end; record and commit
    them as they come, and hand a slot whose chunk ended the next chunk."""
    size = job.max_concurrency
    order = iter(job.pending)
    again: list[int] = []  # items of a chunk its worker's death cut short
    idle = [actor for actor in actors for _ in range(SLOTS_PER_WORKER)]
    live: dict[Any, tuple[Any, set[int]]] = {}  # a chunk's call: its worker, items not back
    failed: collections.Counter[Any] = collections.Counter()  # cut-short chunks per worker
    state, view = job.state, job.session

    def send() -> None:
        while idle:
            chunk, again[:size] = again[:size], []
            chunk += itertools.islice(order, size - len(chunk))
            if not chunk:
                return
            actor = idle.pop()
            blobs = [(i, _dumps(job.values[i], f"item {i}")) for i in chunk]  # pickled now
            live[actor.run.options(num_returns="streaming").remote(blobs)] = (actor, set(chunk))
            state.running += len(chunk)

    def take() -> list[tuple[Any, list[Outcome] | BaseException | None]]:
        """What the calls ready now sent (``None``: the call ended); waits up to WAIT_S."""
        ready, _ = ray.wait(list(live), num_returns=1, timeout=WAIT_S)
        if ready:
            ready, _ = ray.wait(list(live), num_returns=len(live), timeout=0)
        got: list[tuple[Any, list[Outcome] | BaseException | None]] = []
        for call in ready:
            try:
                got.append((call, ray.get(next(call))))
            except StopIteration:
                got.append((call, None))
            except Exception as exc:  # its worker died, or the call itself failed
                got.append((call, exc))
        return got

    send()
    loop = asyncio.get_running_loop()
    try:
        while live:
            fatal: BaseException | None = None
            for call, got in await loop.run_in_executor(waiter, take):
                actor, left = live[call]
                if isinstance(got, Exception) and not isinstance(got, ray.exceptions.RayActorError):
                    fatal = got
                    continue
                if isinstance(got, list):
                    for index, ok, payload, error, exc_blob, nodes, requests in got:
                        left.discard(index)
                        state.running -= 1
                        try:  # on_error="raise" raises here: the outcomes after it still count
                            _record(job, view, index, ok, payload, error, exc_blob, nodes, requests)
                        except Exception as exc:
                            fatal = fatal or exc
                    continue
                del live[call]  # it ended, or its worker died (Ray restarts it)
                idle.append(actor)
                if got is not None:
                    failed[actor] += 1  # each death cuts short at most its slots' chunks
                    if failed[actor] > SLOTS_PER_WORKER * (restarts + 1):
                        fatal = RayEngineError(
                            f"a Ray worker died more than max_worker_restarts times ({got})"
                        )
                        fatal.__cause__ = got
                    again[:0] = sorted(left)  # no outcome of theirs came back: sent again
                    state.running -= len(left)
            await job.commit()  # committed before more items are sent
            if fatal is not None:  # raised once what the other calls sent is recorded
                raise fatal
            send()
    finally:  # items still out when the batch stops: cancelled, as the asyncio engine counts
        for _, left in live.values():
            for index in left:
                state.statuses[index] = "cancelled"
            state.running -= len(left)
            state.cancelled += len(left)


def _record(
    job: BatchJob,
    view: Any,
    index: int,
    ok: bool,
    payload: bytes | None,
    error: tuple[str, str] | None,
    exc_blob: bytes | None,
    nodes: list[dict[str, Any]],
    requests: list[Any],
) -> None:
    """Record one outcome a worker sent (see ``ray_worker.Outcome``)."""
    node_id = view.adopt(nodes, requests).id if nodes else None
    job.count_requests(requests)
    if ok and payload is not None:
        job.record_ok(index, pickle.loads(payload), node_id)
        return
    exc_sent: BaseException | None = None
    if exc_blob is not None:
        with contextlib.suppress(Exception):
            exc_sent = pickle.loads(exc_blob)
    type_, message = error or ("RuntimeError", "the worker sent no outcome")
    job.record_failed(index, type_, message, node_id, exc_sent)


def dataset_rows(items: Any) -> Any:
    """The rows of a ``ray.data.Dataset`` (read on the driver, as dicts), else ``None``."""
    module = type(items).__module__
    if not module.startswith("ray.data") or not hasattr(items, "iter_rows"):
        return None
    return items.iter_rows()


def _dumps(value: Any, what: str) -> bytes:
    from ray import cloudpickle

    try:
        return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ShippingError(
            f"{what} cannot be sent to Ray workers: it does not pickle "
            f"({type(exc).__name__}: {exc}); define it at module level and keep open "
            "files, locks and clients out of it",
            what=what,
        ) from exc
