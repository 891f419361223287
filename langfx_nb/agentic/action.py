"""Action: a unit of work a user writes as ``call`` and runs with ``invoke``.

The action object is configuration only. Every ``invoke`` creates its own trace node and
session view, so one instance may run many times, concurrently; results and errors live
in the per-invocation trace records, never on the object.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .budget import Budget
from .session import Session

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = ["Action"]

T = TypeVar("T")


class Action(Generic[T]):
    """Subclass and implement ``async def call(self, session) -> T``; run with ``invoke``.

    ``call`` receives a session view bound to this invocation: use ``session.query``,
    ``session.generate``, nested ``other.invoke(session)`` and ``session.concurrent_map`` so
    the work shows up under this action in the trace and obeys its deadline.
    """

    #: Name shown in traces; defaults to the class name.
    name: str | None = None

    async def call(self, session: Session) -> T:
        raise NotImplementedError(f"{type(self).__name__} must implement `async def call`")

    def trace_inputs(self) -> Any:
        """What the trace shows as this invocation's inputs; override to choose.

        The default is the public instance fields (dataclass fields, pydantic fields or
        ``vars``); previews redact credential-like keys and reduce models to their ids.
        """
        if dataclasses.is_dataclass(self):
            return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        dump = getattr(self, "model_dump", None)
        if callable(dump):
            return dict(self)  # type: ignore[call-overload]
        try:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}
        except TypeError:
            return None

    def trace_name(self) -> str:
        return self.name or type(self).__name__

    async def invoke(
        self,
        session: Session | None = None,
        *,
        lm: LanguageModel | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        **defaults: Any,
    ) -> T:
        """Run ``call`` with lifecycle tracking, a deadline, a budget and error recording.

        Without ``session`` an owned session is created (with ``lm``) and disposed when the
        run ends. ``max_execution_time`` (seconds) can only shorten the deadline inherited
        from the caller. Expiry raises ``ExecutionTimeoutError``; the node records the outcome
        (ok, failed, denied, cancelled or timed_out) and the error class and message.
        ``budget`` (``lf.Budget``) limits the tokens and cost of this run, nested work
        included, on top of the caller's budget (``BudgetExceededError``); the node's
        ``metadata.budget`` shows the limits and what was used.
        """
        if max_execution_time is not None and max_execution_time < 0:
            raise ValueError("max_execution_time must be >= 0")
        if session is None:
            owned = Session(lm)
            try:
                return await self._run(owned, None, max_execution_time, defaults, budget)
            finally:
                await owned.dispose()
        return await self._run(session, lm, max_execution_time, defaults, budget)

    async def _run(
        self,
        parent: Session,
        lm: LanguageModel | None,
        max_execution_time: float | None,
        defaults: dict[str, Any],
        budget: Budget | None = None,
    ) -> T:
        with parent.track(
            "action",
            self.trace_name(),
            inputs=self.trace_inputs(),
            lm=lm,
            defaults=defaults,
            max_execution_time=max_execution_time,
            budget=budget,
        ) as tracked:
            tracked.outputs = result = await self.call(tracked.session)
        return result
