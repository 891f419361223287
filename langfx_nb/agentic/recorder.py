"""The recorder's handle on one unit of work: ``Tracked``, what ``Session.track`` returns.

``with session.track(kind, name, ...) as tracked:`` starts a node, runs the block under a
view bound to it (its deadline armed), and ends the node with the block's outcome: the one
way the core writes trace nodes (``docs/agentic.md``, "The node contract"). ``status_for``
is the one mapping from an exception to a node status.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..errors import ExecutionTimeoutError, RunSuspended, ToolDeniedError
from .deadline import DeadlineScope
from .preview import preview
from .trace import Decision, NodeStatus, Outcome, TraceNode

if TYPE_CHECKING:
    from .budget import Budget, BudgetScope
    from .clock import Clock
    from .trace import TraceStore

__all__ = ["Tracked", "View", "status_for"]


class View(Protocol):
    """What the recorder uses of the session view bound to a node (``lf.Session`` is one)."""

    @property
    def clock(self) -> Clock: ...
    @property
    def deadline(self) -> float | None: ...
    @property
    def max_text_chars(self) -> int: ...
    @property
    def budget_scope(self) -> BudgetScope | None: ...
    def end_view(self) -> None: ...


V = TypeVar("V", bound=View)


def status_for(exc: BaseException, view: View) -> NodeStatus:
    """The trace outcome of ``exc`` raised under ``view``: ``timed_out`` for a timeout (or a
    cancellation once the view's deadline has passed), ``cancelled``, ``denied``,
    ``suspended``, ``cancelled`` for a stream whose consumer stopped early, else ``failed``."""
    if isinstance(exc, ExecutionTimeoutError):
        return "timed_out"
    if isinstance(exc, asyncio.CancelledError):
        deadline = view.deadline
        if deadline is not None and view.clock.now() >= deadline:
            return "timed_out"
        return "cancelled"
    if isinstance(exc, ToolDeniedError):
        return "denied"
    if isinstance(exc, RunSuspended):
        return "suspended"
    if isinstance(exc, GeneratorExit):
        return "cancelled"
    return "failed"


class Tracked(Generic[V]):
    """One unit of work recorded by ``Session.track``: its node, and the session view that
    work inside it must use so that it is attributed to this node.

    The node starts when ``track`` is called; ``with`` runs the work under it (arming its
    deadline) and ends it on exit: ``ok`` with ``outputs`` (previewed then), or with the
    status what was raised maps to. ``end``/``fail`` close the node earlier or with another
    status (a denied tool call); once ended, the block's own outcome no longer changes it.
    A node that waits for a decision (a tool call whose policy is asked) says so with
    ``wait`` and ``decide``. A ``Tracked`` that is never entered must be ended by its owner.
    """

    __slots__ = (
        "_base",
        "_bind",
        "_budget",
        "_limit",
        "_own",
        "_scope",
        "_store",
        "_view",
        "node",
        "outputs",
    )

    def __init__(
        self,
        node: TraceNode,
        base: V,
        store: TraceStore,
        bind: Callable[[TraceNode], V] | None = None,
        own: float | None = None,
        budget: Budget | None = None,
        limit: float | None = None,
    ) -> None:
        """``base`` is the view the recorder reads the clock, deadline and limits from, and
        ``store`` its trace store (``node``'s). With ``bind`` the work's view is made from it
        when ``session`` is first read (a node whose view inherits everything, such as a
        query's, may never need one); without it ``base`` is the work's view itself."""
        self.node = node
        self._base = base
        self._bind = bind
        self._view: V | None = base if bind is None else None
        self._store = store
        self.outputs: Any = None
        self._own = own
        self._budget = budget
        self._limit = limit
        self._scope: DeadlineScope | None = None

    @property
    def session(self) -> V:
        """The view bound to this node: work started through it is attributed here, and
        it refuses new work once the node has ended."""
        view = self._view
        if view is None:
            assert self._bind is not None
            view = self._view = self._bind(self.node)
            if self.node.end is not None:  # read after the node ended: closed already
                view.end_view()
        return view

    # -- the block -----------------------------------------------------------------------
    def __enter__(self) -> Tracked[V]:
        own = self._own
        if own is None:
            view = self._base
            deadline = view.deadline
            if deadline is not None and view.clock.now() >= deadline:
                error = ExecutionTimeoutError("the deadline passed before the work could start")
                self.fail(error)
                raise error
            return self
        clock = self._base.clock
        try:
            if own <= clock.now():
                raise ExecutionTimeoutError(f"{self.node.name}: no time left to start")
            self._scope = DeadlineScope(clock, own)
        except BaseException as exc:
            self.fail(exc)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        scope = self._scope
        fired = scope is not None and scope.close()
        if exc is None:
            self.end("ok", outputs=self.outputs)
            return
        if fired and isinstance(exc, asyncio.CancelledError):
            error = ExecutionTimeoutError(
                f"{self.node.name} exceeded max_execution_time={self._limit}s"
            )
            self.end("timed_out", error=error)
            raise error from None
        self.fail(exc)

    def _preview(self, value: Any) -> Any:
        return preview(value, self._base.max_text_chars)

    # -- ending and deciding ---------------------------------------------------------------
    def end(
        self, status: NodeStatus, *, outputs: Any = None, error: BaseException | None = None
    ) -> None:
        """Finish the node now with ``status`` (a no-op once it has finished); its view then
        refuses new work. ``outputs`` is previewed now."""
        view = self._view
        if view is not None:
            view.end_view()
        budget = self._budget
        if budget is not None:
            scope = self._base.budget_scope
            if scope is not None:
                self.node.metadata["budget"] = {"limits": budget.to_json(), "used": scope.used()}
            self._budget = None
        shown = None if outputs is None else self._preview(outputs)
        self._store.finish(self.node, status, outputs=shown, error=error)

    def fail(self, exc: BaseException, *, outputs: Any = None) -> None:
        """Finish the node with the status ``exc`` maps to (``failed``, ``denied``,
        ``cancelled``, ``timed_out``, ``suspended``) and its class and message."""
        self.end(status_for(exc, self._base), outputs=outputs, error=exc)

    def update(self, **changes: Any) -> None:
        """Change fields of the node while it runs (``progress``, ``metadata``, ``delta``);
        observers get a ``node_update``."""
        self._store.update(self.node, **changes)

    def wait(self) -> None:
        """The node now waits for a decision (a tool call's policy is asked): status
        ``waiting``, decision ``{outcome: "waiting", asked_at: now}``."""
        store = self._store
        store.update(self.node, status="waiting", decision=Decision("waiting", None, store.time()))

    def decide(
        self, outcome: Outcome, by: str | None, *, args: Any = None, note: str | None = None
    ) -> Decision:
        """Record the decision (``asked_at`` from ``wait``, ``decided_at`` now); a waiting
        node approved to run is running again, any other decision leaves it waiting until it
        ends with its outcome (never ``running`` for a moment before ``denied``). ``args``
        (edited arguments) is previewed."""
        store = self._store
        node = self.node
        prior = node.decision
        asked = prior.asked_at if prior is not None and prior.outcome == "waiting" else None
        shown = None if args is None else self._preview(args)
        decision = Decision(outcome, by, asked, store.time(), shown, note)
        if node.status == "waiting" and outcome == "approve":
            store.update(node, status="running", decision=decision)
        else:
            store.update(node, decision=decision)
        return decision
