"""What runs inside the Ray cluster for ``engine=lf.engines.Ray()`` (``ray_engine.py``).

- ``BatchWorker``: an async actor holding ``fn`` and a session of its own. ``run(items)``
  runs a chunk of items (at most ``concurrency`` at once across every chunk it holds) and
  streams their outcomes back as they end: ``(index, ok, pickled result, (type, message),
  pickled exception, trace nodes, requests)``. It never opens the run manifest; the trace
  nodes go to the driver, which adopts them.
- Its account limiters are ``ray_limiter.LeasedLimiter``s (``ratelimit.set_limiter_factory``),
  spending grants of the batch's one ``LimitActor``: a named actor the first worker that
  needs a limit creates (``get_if_exists``; detached, so that a worker dying does not take
  it along; the driver kills it when the batch ends). ``pause`` is that actor telling of a
  429.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import pickle
from collections.abc import AsyncIterator
from typing import Any

import ray
from ray import cloudpickle

from ..agentic.session import Session
from ..agentic.tracebacks import error_info
from ..agentic.usage import UsageMeter
from ..llms.ratelimit import limiter_for, set_limiter_factory
from ..messages import Usage
from .ray_limiter import LeasedLimiter, LimitActor

__all__ = ["LIMITER_NAMESPACE", "BatchWorker", "Outcome"]

#: The Ray namespace of the batches' limiter actors (each named after its batch).
LIMITER_NAMESPACE = "langfx_nb"

#: ``(index, ok, pickled result, (type, message), pickled exception, trace nodes, requests)``
Outcome = tuple[
    int,
    bool,
    bytes | None,
    tuple[str, str] | None,
    bytes | None,
    list[dict[str, Any]],
    list[tuple[str, Usage | None, float | None]],
]


class RequestLog(UsageMeter):
    """A meter that also keeps each request (model id, usage, cost) for the driver."""

    __slots__ = ("log",)

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, Usage | None, float | None]] = []

    def add(self, model_id: str, usage: Usage | None, cost: float | None = None) -> None:
        self.log.append((model_id, usage, cost))


class BatchWorker:
    """One Ray worker of a batch (see the module docstring)."""

    def __init__(self, fn_blob: bytes, config: dict[str, Any]) -> None:
        self.fn = pickle.loads(fn_blob)
        self.with_session = bool(config["with_session"])
        self.slots = asyncio.Semaphore(int(config["concurrency"]))
        lm, defaults = pickle.loads(config["context"])
        self.session = Session(
            lm,
            prices=config["prices"],
            max_trace_nodes=int(config["max_trace_nodes"]),
            max_text_chars=int(config["max_text_chars"]),
            **defaults,
        )
        self.limiter_name = str(config["limiter"])
        self.limit_handle: Any = None  # the batch's LimitActor, once a limit was needed
        self.limit_lock = asyncio.Lock()
        set_limiter_factory(lambda account: LeasedLimiter(account, self))

    async def run(self, items: list[tuple[int, bytes]]) -> AsyncIterator[list[Outcome]]:
        """The outcomes of ``items`` (``(index, pickled item)``) as they end: each value
        sent is those that ended since the last (called with ``num_returns="streaming"``).
        At most ``concurrency`` items run at once across every call this worker holds."""
        pending = {asyncio.ensure_future(self._slot(index, blob)) for index, blob in items}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                yield [task.result() for task in done]
        finally:
            for task in pending:
                task.cancel()

    async def limit_actor(self) -> Any:
        """The batch's ``LimitActor``, created by the first worker that asks for it."""
        async with self.limit_lock:
            if self.limit_handle is None:
                cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(LimitActor)
                handle: Any = cls.options(
                    name=self.limiter_name,
                    namespace=LIMITER_NAMESPACE,
                    lifetime="detached",
                    get_if_exists=True,
                ).remote()
                context = ray.get_runtime_context()
                await handle.add_worker.remote(context.current_actor, context.get_actor_id())
                self.limit_handle = handle
        return self.limit_handle

    async def pause(self, account: str, seconds: float) -> None:
        """A 429 elsewhere in the cluster: this worker's requests of ``account`` wait too."""
        limiter = limiter_for(account)
        if isinstance(limiter, LeasedLimiter):
            limiter.pause(seconds)

    async def _slot(self, index: int, blob: bytes) -> Outcome:
        async with self.slots:
            return await self._one(index, blob)

    async def _one(self, index: int, blob: bytes) -> Outcome:
        log = RequestLog()
        node = None
        try:
            item = pickle.loads(blob)
            with self.session.track(
                "item", f"item {index}", inputs=item, metadata={"index": index}, meter=log
            ) as tracked:
                node = tracked.node
                out = self.fn(item, tracked.session) if self.with_session else self.fn(item)
                if inspect.isawaitable(out):
                    out = await out
                try:
                    payload = cloudpickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)  # type: ignore[no-untyped-call]
                except Exception as exc:
                    raise TypeError(
                        f"the result ({type(out).__name__}) cannot be sent back to the "
                        f"driver: it does not pickle ({type(exc).__name__})"
                    ) from exc
                tracked.outputs = out
        except Exception as exc:
            info = error_info(exc)
            exc_blob = None
            with contextlib.suppress(Exception):
                exc_blob = cloudpickle.dumps(exc)  # type: ignore[no-untyped-call]
            nodes = [n.to_json() for n in node.walk()] if node is not None else []
            return index, False, None, (info["type"], info["message"]), exc_blob, nodes, log.log
        nodes = [n.to_json() for n in node.walk()]
        return index, True, payload, None, None, nodes, log.log
