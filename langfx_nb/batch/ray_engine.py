"""``engine=lf.engines.Ray()``: the same ``lf.batch`` with its items run on a Ray cluster.

The driver (this process) keeps what the asyncio engine keeps: the run manifest, the
session and its trace, the progress view. ``num_workers`` long-lived actors
(``batch/ray_worker.py``) each run the items they are given on their own asyncio loop, up
to ``max_concurrency`` at once, and send back, every few hundred items or ~0.1 s, each
item's result, error, model requests and trace nodes (``TraceNode.to_json``); the driver
adopts the nodes under its ``batch`` node (``Session.adopt``), counts the requests and
writes the manifest. The driver keeps a few chunks' worth of items queued at each actor:
when an actor dies (its process killed), the items it held but had not returned go back to
the front of the queue and run on a new actor; items whose results reached the driver are
never sent again. Rate limits (``lf.RateLimit``, provider headers, 429 pauses) hold for the
whole cluster: one ``ray_limiter.LimitActor``, started when a worker first needs it, leases
capacity to the workers in small grants.

A cluster this engine starts itself gets ``ray_lazy/`` first on its processes'
``PYTHONPATH`` (this process, the user's, is left as it is): a stand-in that imports
``rfc3987_syntax`` lazily (every Ray process imports ``jsonschema``, which
imports that package, which builds a grammar at import: ~1.5 s of CPU per process;
``ray_lazy/rfc3987_syntax``, docs/decisions.md).

This module does not import Ray: ``ray_worker`` (which does) is imported on first use.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import RayEngineError, ShippingError

if TYPE_CHECKING:
    from ..agentic.session import Session
    from ..messages import Usage

__all__ = ["Ray", "Sink", "dataset_rows", "run_on_ray"]

#: Items queued at a worker at first (x ``max_concurrency``); grows while it keeps up.
QUEUE_FACTOR = 2
#: The most items queued at one worker (bounds what a killed worker makes run again).
MAX_QUEUED = 4096
#: Put first on the ``PYTHONPATH`` of the Ray processes of a cluster this engine starts.
LAZY_IMPORTS = Path(__file__).with_name("ray_lazy")


@dataclass(frozen=True, slots=True)
class Ray:
    """Run ``lf.batch`` on a Ray cluster (``pip install 'langfx_nb[ray]'``).

    ``address``: an existing cluster (``"auto"``, ``"ray://host:10001"``); ``None`` joins
    the cluster this process is already connected to, else starts a local one (stopped when
    the batch ends). ``num_workers``: worker actors (default: the cluster's CPUs), each
    running ``max_concurrency`` items at once. ``num_cpus``: the CPUs of a local cluster
    this engine starts (default: all). ``cpus_per_worker``: what each worker reserves.
    ``max_worker_restarts``: workers that die are replaced this many times in all before
    the batch fails with ``RayEngineError``.
    """

    address: str | None = None
    num_workers: int | None = None
    num_cpus: int | None = None
    cpus_per_worker: float = 1.0
    max_worker_restarts: int = 8

    def __post_init__(self) -> None:
        for name in ("num_workers", "num_cpus"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise ValueError(f"{name} must be a positive int or None")
        if not self.cpus_per_worker >= 0:
            raise ValueError("cpus_per_worker must be a non-negative number")
        if isinstance(self.max_worker_restarts, bool) or self.max_worker_restarts < 0:
            raise ValueError("max_worker_restarts must be a non-negative int")


class Sink(Protocol):
    """What the runner gives ``run_on_ray`` to record outcomes into (``runner._RaySink``)."""

    def running(self, count: int) -> None: ...

    def ok(self, index: int, result: Any, node_id: str | None) -> None: ...

    def failed(
        self, index: int, type_: str, message: str, node_id: str | None, exc: BaseException | None
    ) -> None: ...

    def requests(self, requests: list[tuple[str, Usage | None, float | None]]) -> None: ...

    async def settled(self) -> None: ...


def dataset_rows(items: Any) -> Iterable[Any] | None:
    """The rows of a ``ray.data.Dataset`` (read on the driver, as dicts), else ``None``."""
    module = type(items).__module__
    if not module.startswith("ray.data") or not hasattr(items, "iter_rows"):
        return None
    return items.iter_rows()


@contextlib.contextmanager
def _lazy_cluster() -> Iterator[None]:
    """While a local cluster starts: ``LAZY_IMPORTS`` first on its processes' path."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(LAZY_IMPORTS), *([old] if old else [])])
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


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
        ) from None


async def run_on_ray(
    engine: Ray,
    fn: Callable[..., Any],
    values: list[Any],
    pending: list[int],
    view: Session,
    sink: Sink,
    with_session: bool,
    max_concurrency: int,
) -> None:
    """Run ``values[i]`` for each ``i`` in ``pending`` on Ray workers (see the module)."""
    try:
        import ray
    except ImportError:
        raise RayEngineError(
            "engine=lf.engines.Ray() needs Ray: pip install 'langfx_nb[ray]'"
        ) from None
    fn_blob = _dumps(fn, "fn")  # before the cluster starts and before any request
    context_blob = _dumps((view.lm, dict(view.defaults)), "the session's lm and defaults")
    blobs = {i: _dumps(values[i], f"item {i}") for i in pending}
    if not pending:
        return
    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if engine.address is None and engine.num_cpus is not None:
            options["num_cpus"] = engine.num_cpus
        if engine.address is None:  # a local cluster of our own
            with _lazy_cluster():
                await asyncio.to_thread(ray.init, **options)
        else:
            await asyncio.to_thread(ray.init, address=engine.address, **options)
        started = True
    from .ray_limiter import LimitActor
    from .ray_worker import BatchWorker

    store = view.trace_store
    worker_cls = ray.remote(num_cpus=engine.cpus_per_worker, max_restarts=0)(BatchWorker)
    limit_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(LimitActor)
    fn_ref = ray.put(fn_blob)
    config: dict[str, Any] = {
        "context": context_blob,
        "with_session": with_session,
        "concurrency": max_concurrency,
        "prices": dict(view.prices),
        "max_trace_nodes": store.max_nodes,
        "max_text_chars": view.max_text_chars,
    }

    limit_actor: list[Any] = []  # the batch's LimitActor, once a worker asked for it

    def new_actor() -> Any:
        actor = worker_cls.remote(fn_ref, config)
        if limit_actor:
            limit_actor[0].add_worker.remote(actor)
        return actor

    async def share_limiter() -> None:
        if limit_actor:
            return
        limit_actor.append(limit_cls.remote())
        config["limiter"] = limit_actor[0]  # for workers that replace dead ones
        for actor in actors:
            limit_actor[0].add_worker.remote(actor)
            actor.use_limiter.remote(limit_actor[0])

    count = engine.num_workers
    if count is None:
        cpus = ray.cluster_resources().get("CPU", 1)  # type: ignore[no-untyped-call]
        count = max(1, int(cpus // max(engine.cpus_per_worker, 1)))
    queue: collections.deque[int] = collections.deque(pending)
    held: list[dict[int, None]] = [{} for _ in range(count)]
    restarts = [0]
    actors: list[Any] = [new_actor() for _ in range(count)]

    def apply(outcome: tuple[Any, ...]) -> None:
        index, ok, payload, error, exc_blob, nodes, requests = outcome
        node_id = None
        if nodes:
            node_id = view.adopt(nodes, requests).id
        sink.requests(requests)
        if ok:
            sink.ok(index, pickle.loads(payload), node_id)
            return
        exc: BaseException | None = None
        if exc_blob is not None:
            with contextlib.suppress(Exception):
                exc = pickle.loads(exc_blob)
        sink.failed(index, error[0], error[1], node_id, exc)

    async def drive(slot: int) -> None:
        target = QUEUE_FACTOR * max_concurrency
        mine = held[slot]
        while True:
            give: list[tuple[int, bytes]] = []
            while queue and len(mine) + len(give) < target:
                i = queue.popleft()
                give.append((i, blobs[i]))
            if not give and not mine:
                if not any(held):
                    return
                await asyncio.sleep(0.05)  # another worker may die and hand items back
                continue
            for i, _ in give:
                mine[i] = None
            sink.running(len(give))
            try:
                outcomes, wants_limiter = await actors[slot].exchange.remote(give)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                queue.extendleft(reversed(list(mine)))  # they run again, first in line
                sink.running(-len(mine))
                mine.clear()
                restarts[0] += 1
                if restarts[0] > engine.max_worker_restarts:
                    raise RayEngineError(
                        f"Ray workers died {restarts[0]} times (max_worker_restarts="
                        f"{engine.max_worker_restarts})"
                    ) from None
                actors[slot] = new_actor()
                continue
            if wants_limiter:
                await share_limiter()
            for outcome in outcomes:
                mine.pop(outcome[0], None)
                sink.running(-1)
                apply(outcome)
            await sink.settled()  # committed before this worker is given more items
            if len(outcomes) >= target // 2 and target < MAX_QUEUED:
                target = min(MAX_QUEUED, target * 2)  # it keeps up: larger chunks

    tasks = [asyncio.ensure_future(drive(slot)) for slot in range(count)]
    try:
        from ..agentic.fanout import settle_first_failure

        await settle_first_failure(tasks)
    finally:
        for task in tasks:
            task.cancel()
        for actor in [*actors, *limit_actor]:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        if started:
            await asyncio.to_thread(ray.shutdown)
