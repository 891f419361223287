"""Session: the shared trace, model, defaults and deadline of a run, and its bound views.

A ``Session`` you construct is the *root*. ``Action.call`` receives a *view*: another
``Session`` object that shares the root's trace store, observers, prices and model, but is
bound to one invocation (its trace node, ancestry, effective deadline and defaults). Work
started through a view (``query``, ``generate``, nested ``invoke``, ``concurrent_map``) is
attributed to that invocation without any global "current action". A view stops accepting
new work once its invocation has ended.

Option precedence for model calls: model defaults → session defaults → invocation defaults
→ the options of the call itself. Nothing is mutated: each layer is a new mapping.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import json
import time
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from ..errors import ExecutionTimeoutError, RunSuspended, ToolDeniedError
from ..messages import AIMessage, Message
from ..structured.query import query as query_fn
from .budget import Budget, BudgetScope
from .clock import Clock, MonotonicClock
from .deadline import DeadlineScope
from .fanout import DEFAULT_MAX_CONCURRENCY, fan_out
from .observers import Observer, ObserverHub
from .query_node import (
    NO_RESULT,
    prompt_preview,
    query_inputs,
    query_metadata,
    query_settings,
    record_calls,
    shown_options,
    stream_response,
)
from .recording import RecordingModel
from .trace import NodeKind, NodeStatus, TraceNode, TraceStore, preview
from .usage import Price, UsageMeter, UsageSummary

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = ["Session", "Tracked"]

ItemT = TypeVar("ItemT")
R = TypeVar("R")

_INF = float("inf")
_LEVELS = frozenset({"debug", "info", "warning", "error"})


class _State:
    """What the root session and all of its views share."""

    __slots__ = (
        "clock",
        "closers",
        "created_at",
        "disposed",
        "hub",
        "max_text_chars",
        "metadata",
        "read_only",
        "store",
        "tasks",
    )

    def __init__(
        self, store: TraceStore, hub: ObserverHub, clock: Clock, metadata: dict[str, Any]
    ) -> None:
        self.store = store
        self.hub = hub
        self.clock = clock
        self.metadata = metadata
        self.max_text_chars = 4000
        self.disposed = False
        self.read_only = False
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closers: list[Callable[[], Awaitable[None]]] = []  # resources the session owns
        self.created_at = datetime.datetime.now(datetime.UTC).isoformat()


class Tracked:
    """One unit of work being recorded by ``Session.track``: its node, and the session view
    that work inside it must use so that it is attributed to this node.

    Set ``outputs`` to what the node should record when the block ends normally; call
    ``end`` to close the node earlier or with another status (a denied tool call). Once
    ended, the block's own outcome no longer changes it.
    """

    __slots__ = ("node", "outputs", "session")

    def __init__(self, node: TraceNode, session: Session) -> None:
        self.node = node
        self.session = session
        self.outputs: Any = None

    def end(
        self, status: NodeStatus, *, outputs: Any = None, error: BaseException | None = None
    ) -> None:
        """Finish the node now with ``status`` (a no-op once it has finished)."""
        self.session._state.store.finish(self.node, status, outputs=outputs, error=error)


class Session:
    """Runs share one trace, one budget of time and one model through a session.

    ``Session(lm, temperature=0.2)`` keeps ``temperature`` as a default for its queries.
    ``max_trace_nodes`` bounds the details kept (see ``trace``); ``prices`` maps model ids
    to a ``Price`` so ``usage_summary`` can report cost; ``clock`` is replaceable in tests;
    ``budget`` (``lf.Budget``) limits the tokens and cost of everything run in the session.
    ``tracer_provider`` (an OpenTelemetry ``TracerProvider``) exports the trace live as
    GenAI spans, as ``lf.otel.export(session, tracer_provider)`` does.
    """

    __slots__ = (
        "_ancestry",
        "_budget",
        "_deadline",
        "_defaults",
        "_lm",
        "_meters",
        "_node",
        "_open",
        "_state",
    )

    def __init__(
        self,
        lm: LanguageModel | None = None,
        *,
        max_trace_nodes: int = 10_000,
        metadata: Mapping[str, Any] | None = None,
        prices: Mapping[str, Price] | None = None,
        clock: Clock | None = None,
        max_text_chars: int = 4000,
        observer_queue_size: int = 10_000,
        budget: Budget | None = None,
        tracer_provider: Any = None,
        **defaults: Any,
    ) -> None:
        clock = clock or MonotonicClock()
        hub = ObserverHub(observer_queue_size)
        store = TraceStore(
            max_nodes=max_trace_nodes,
            clock_now=time.monotonic if type(clock) is MonotonicClock else clock.now,
            session_id=uuid.uuid4().hex[:12],
            prices=prices,
            hub=hub,
        )
        self._state = _State(store, hub, clock, dict(metadata or {}))
        self._state.max_text_chars = max_text_chars
        self._node = store.root
        self._lm = lm
        self._defaults: Mapping[str, Any] = MappingProxyType(dict(defaults))
        self._deadline = _INF
        self._ancestry: tuple[str, ...] = (store.root.id,)
        self._open = True
        self._budget = None if budget is None else BudgetScope(budget)
        self._meters: tuple[UsageMeter, ...] = ()
        if tracer_provider is not None:
            from .otel import export

            export(self, tracer_provider)

    # -- views ---------------------------------------------------------------------------
    def _bind(
        self,
        node: TraceNode,
        *,
        deadline: float | None = None,
        lm: LanguageModel | None = None,
        defaults: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
        meter: UsageMeter | None = None,
    ) -> Session:
        """A view for work under ``node``; it inherits everything it is not given.

        A ``budget`` opens a new scope under the inherited one (both are charged); a
        ``meter`` is charged together with the inherited ones."""
        view = object.__new__(Session)
        view._state = self._state
        view._node = node
        view._lm = lm if lm is not None else self._lm
        view._defaults = (
            MappingProxyType({**self._defaults, **defaults}) if defaults else self._defaults
        )
        view._deadline = self._deadline if deadline is None else min(deadline, self._deadline)
        view._ancestry = (*self._ancestry, node.id) if node is not self._node else self._ancestry
        view._open = True
        view._budget = self._budget if budget is None else BudgetScope(budget, self._budget)
        view._meters = self._meters if meter is None else (*self._meters, meter)
        return view

    def _close_view(self) -> None:
        self._open = False

    def _check_usable(self) -> None:
        state = self._state
        if state.read_only:
            raise RuntimeError("a loaded trace is read-only: start a new Session to run work")
        if state.disposed:
            raise RuntimeError("this session has been disposed")
        if not self._open:
            raise RuntimeError("this session view belongs to an invocation that has ended")
        if self._deadline != _INF and state.clock.now() >= self._deadline:
            raise ExecutionTimeoutError("the deadline passed before the work could start")

    def _status_for(self, exc: BaseException) -> NodeStatus:
        """The trace outcome of an exception raised under this view."""
        if isinstance(exc, ExecutionTimeoutError):
            return "timed_out"
        if isinstance(exc, asyncio.CancelledError):
            if self._deadline != _INF and self._state.clock.now() >= self._deadline:
                return "timed_out"
            return "cancelled"
        if isinstance(exc, ToolDeniedError):
            return "denied"
        if isinstance(exc, RunSuspended):
            return "suspended"
        if isinstance(exc, GeneratorExit):  # the consumer of a stream stopped early
            return "cancelled"
        return "failed"

    # -- the recorder ----------------------------------------------------------------------
    @contextlib.contextmanager
    def track(
        self,
        kind: NodeKind,
        name: str,
        *,
        inputs: Any = None,
        metadata: dict[str, Any] | None = None,
        lm: LanguageModel | None = None,
        defaults: Mapping[str, Any] | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        meter: UsageMeter | None = None,
    ) -> Iterator[Tracked]:
        """Record one unit of work as a node under this view: the one way to trace work.

        On entry a ``running`` node starts (``inputs`` previewed now) and a view bound to it
        is made, with ``lm``, ``defaults``, a ``budget`` scope and a deadline
        ``max_execution_time`` seconds from now (it can only shorten the inherited one). On
        exit the node ends ``ok`` with ``Tracked.outputs``, or with the status of what was
        raised (``failed``, ``denied``, ``cancelled``, ``timed_out``, ``suspended``) and the
        error's class and message; the view then refuses new work. When this block's own
        deadline fires, the cancellation becomes ``ExecutionTimeoutError``. With a budget,
        ``metadata.budget`` holds its limits and what was used. A ``meter``
        (``UsageMeter``) counts every model request made under the node, exactly.
        """
        self._check_usable()
        clock = self._state.clock
        own = None if max_execution_time is None else clock.now() + max_execution_time
        shown = None if inputs is None else self._preview(inputs)
        node = self._start(kind, name, shown, metadata)
        if budget is not None and budget.is_unlimited:
            budget = None
        view = self._bind(node, deadline=own, lm=lm, defaults=defaults, budget=budget, meter=meter)
        tracked = Tracked(node, view)
        store = self._state.store
        scope: DeadlineScope | None = None

        def settle() -> None:
            view._open = False
            if scope is not None:
                scope.close()
            if budget is not None and view._budget is not None:
                node.metadata["budget"] = {"limits": budget.to_json(), "used": view._budget.used()}

        try:
            if own is not None and own < self._deadline:
                if own <= clock.now():
                    raise ExecutionTimeoutError(f"{name}: no time left to start")
                scope = DeadlineScope(clock, own)
            yield tracked
        except asyncio.CancelledError as exc:
            fired = scope is not None and scope.close()
            settle()
            if fired:
                error = ExecutionTimeoutError(
                    f"{name} exceeded max_execution_time={max_execution_time}s"
                )
                store.finish(node, "timed_out", error=error)
                raise error from None
            store.finish(node, view._status_for(exc), error=exc)
            raise
        except BaseException as exc:
            settle()
            store.finish(node, view._status_for(exc), error=exc)
            raise
        settle()
        store.finish(
            node, "ok", outputs=None if tracked.outputs is None else self._preview(tracked.outputs)
        )

    def _start(
        self,
        kind: NodeKind,
        name: str,
        inputs: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> TraceNode:
        return self._state.store.start(kind, name, self._node, inputs, metadata)

    def _finish(
        self,
        node: TraceNode,
        status: NodeStatus,
        *,
        outputs: Any = None,
        error: BaseException | None = None,
    ) -> None:
        self._state.store.finish(node, status, outputs=outputs, error=error)

    def _preview(self, value: Any) -> Any:
        return preview(value, self._state.max_text_chars)

    @property
    def budget_scope(self) -> BudgetScope | None:
        """The innermost token/cost budget this view spends from (None: unlimited)."""
        return self._budget

    def _recording(self, model: LanguageModel) -> RecordingModel:
        """The recording wrapper for one traced query; with a budget it also checks each
        request before it is sent and charges each response (``BudgetExceededError``)."""
        if self._budget is None:
            return RecordingModel(model)
        return RecordingModel(
            model, budget=self._budget.meter(model.model_id, self._state.store.prices)
        )

    # -- what a view carries -------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._state.store.session_id

    @property
    def lm(self) -> LanguageModel | None:
        return self._lm

    @property
    def defaults(self) -> Mapping[str, Any]:
        """Options merged under every model call made through this view (read-only)."""
        return self._defaults

    @property
    def node(self) -> TraceNode:
        """The trace node work started here is attributed to (the root for the session)."""
        return self._node

    @property
    def ancestry(self) -> tuple[str, ...]:
        """Node ids from the root down to this view's invocation."""
        return self._ancestry

    @property
    def deadline(self) -> float | None:
        """Absolute effective deadline on the session clock, or None."""
        return None if self._deadline == _INF else self._deadline

    @property
    def remaining_time(self) -> float | None:
        if self._deadline == _INF:
            return None
        return max(0.0, self._deadline - self._state.clock.now())

    @property
    def clock(self) -> Clock:
        return self._state.clock

    @property
    def is_root(self) -> bool:
        return self._node is self._state.store.root

    # -- trace inspection ----------------------------------------------------------------
    @property
    def root(self) -> TraceNode:
        return self._state.store.root

    @property
    def all_queries(self) -> list[TraceNode]:
        """Query nodes still held by the store (see ``usage_summary`` for exact totals)."""
        return self._state.store.of_kind("query")

    @property
    def all_actions(self) -> list[TraceNode]:
        return self._state.store.of_kind("action")

    @property
    def all_tool_calls(self) -> list[TraceNode]:
        return self._state.store.of_kind("tool_call")

    @property
    def all_logs(self) -> list[TraceNode]:
        return self._state.store.of_kind("log")

    def find(self, node_id: str) -> TraceNode | None:
        return self._state.store.nodes.get(node_id)

    @property
    def prices(self) -> Mapping[str, Price]:
        """The price table cost is computed with (read-only)."""
        return MappingProxyType(self._state.store.prices)

    @property
    def usage_summary(self) -> UsageSummary:
        return self._state.store.usage_summary()

    @property
    def metadata(self) -> dict[str, Any]:
        """Free-form session metadata (shared by all views); saved with the trace."""
        return self._state.metadata

    @property
    def observer_errors(self) -> int:
        return self._state.hub.errors

    @property
    def dropped_events(self) -> int:
        return self._state.hub.dropped

    # -- progress and logs -----------------------------------------------------------------
    @property
    def progress(self) -> dict[str, Any] | None:
        """The progress last reported for this view's node."""
        return self._node.progress

    def set_progress(
        self, done: int | float, total: int | float | None = None, message: str | None = None
    ) -> None:
        progress: dict[str, Any] = {"done": done}
        if total is not None:
            progress["total"] = total
        if message is not None:
            progress["message"] = message
        self._state.store.update(self._node, progress=progress)

    def log(self, level: str, message: str, **data: Any) -> TraceNode:
        """Record a log entry under this view's node (``debug``/``info``/``warning``/``error``)."""
        if level not in _LEVELS:
            raise ValueError(f"log level must be one of {sorted(_LEVELS)}")
        if self._state.read_only:
            raise RuntimeError("a loaded trace is read-only")
        if not self._open:
            raise RuntimeError("this session view belongs to an invocation that has ended")
        return self._state.store.log(self._node, level, str(message), self._preview(data))

    # -- observers and lifetime ----------------------------------------------------------
    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Receive trace events (plain dicts, see docs/agentic.md); returns ``unsubscribe``.

        Sync observers run inline and must be cheap; async observers get a bounded queue.
        Either way, what an observer raises is counted in ``observer_errors`` and ignored.
        """
        return self._state.hub.subscribe(observer)

    async def dispose(self) -> None:
        """Cancel and settle ``concurrent_map`` branches still running, end the root node,
        stop async observers, and refuse new work from the session and all its views.

        Invocations awaited elsewhere are not cancelled (their callers own them). The model
        is not closed: it may be shared. Calling ``dispose`` again does nothing.
        """
        if not self.is_root:
            raise RuntimeError("only the root session can be disposed, not an invocation view")
        state = self._state
        if state.disposed:
            return
        state.disposed = True
        tasks = [t for t in state.tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for close in reversed(state.closers):  # e.g. MCP servers opened with open(session)
            await close()
        if not state.read_only:
            state.store.finish(state.store.root, "ok")
        await state.hub.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.dispose()

    # -- model calls ---------------------------------------------------------------------
    def _model(self, lm: LanguageModel | None) -> LanguageModel:
        model = lm if lm is not None else self._lm
        if model is None:
            raise TypeError("no model: pass Session(lm=...), invoke(lm=...) or lm=")
        return model

    async def query(
        self,
        prompt: Any,
        schema: Any = None,
        *,
        lm: LanguageModel | None = None,
        returns_message: bool = False,
        **options: Any,
    ) -> Any:
        """``lf.query`` with this session's model and defaults, recorded as a query node.

        Returns what ``lf.query`` returns: text without a schema, the validated value with
        one, the response message with ``returns_message=True``. The node holds the prompt
        and options, the rendered prompt, the response, the usage, the parsed result (with a
        schema) or the error, and the outcome (see ``_record_calls``).
        """
        self._check_usable()
        model = self._model(lm)
        merged = {**self._defaults, **options} if self._defaults else options
        node = self._start_query(prompt, schema, model, shown_options(merged))
        recording = self._recording(model)
        if merged.get("repair"):  # each attempt becomes a child node with its outcome
            merged = {**merged, "on_attempt": functools.partial(self._attempt_node, node)}
        try:
            message = await query_fn(prompt, schema, lm=recording, returns_message=True, **merged)
        except BaseException as exc:
            self._record_calls(node, recording)
            self._finish(node, self._status_for(exc), error=exc)
            raise
        # with a schema, previewed now: the result may be a mutable object
        result = self._preview(message.result) if schema is not None else NO_RESULT
        self._record_calls(node, recording, result)
        self._finish(node, "ok")
        if returns_message:
            return message
        return message.result if schema is not None else message.text

    def _attempt_node(
        self, parent: TraceNode, number: int
    ) -> Callable[[AIMessage[Any] | None, BaseException | None], None]:
        """Start the node of one repair attempt; the returned function ends it."""
        node = self._state.store.start("query", f"attempt {number}", parent, None, None)

        def done(response: AIMessage[Any] | None, error: BaseException | None) -> None:
            if response is not None:
                text = self._preview(response.text)
                node.defer("outputs", functools.partial(dict, text=text))
            status: NodeStatus = "ok" if error is None else self._status_for(error)
            self._finish(node, status, error=error)

        return done

    def query_stream(
        self,
        prompt: Any,
        schema: Any = None,
        *,
        lm: LanguageModel | None = None,
        **options: Any,
    ) -> AsyncIterator[Any]:
        """``lf.query_stream`` with this session's model and defaults, recorded as a query
        node when iteration starts, with what ``query`` records. Outcomes: ``ok`` at
        ``generation_complete`` (or the end of a text stream); ``failed`` at
        ``parsing_failed``/``generation_failed`` or an error; ``cancelled`` at a ``cancelled``
        event, when the consumer's task is cancelled (``timed_out`` past this view's
        deadline), or when the consumer stops iterating before the end.

        As with ``lf.query_stream``, setup errors raise here, before iteration. Text streams
        (no schema) also reach observers as ``node_update`` deltas.
        """
        from ..structured.query_stream import query_stream

        self._check_usable()
        model = self._model(lm)
        merged = {**self._defaults, **options} if self._defaults else options
        recording = self._recording(model)
        events = query_stream(prompt, schema, lm=recording, **merged)
        return self._recorded_stream(
            events, recording, prompt, schema, model, shown_options(merged)
        )

    async def _recorded_stream(
        self,
        events: AsyncGenerator[Any, None],
        recording: RecordingModel,
        prompt: Any,
        schema: Any,
        model: LanguageModel,
        shown: dict[str, Any] | None,
    ) -> AsyncGenerator[Any, None]:
        node = self._start_query(prompt, schema, model, shown, stream=True)
        store = self._state.store
        status: NodeStatus = "cancelled"  # unless the stream reaches its end
        error: BaseException | None = None
        result: Any = NO_RESULT
        repairing = bool(shown and shown.get("repair"))
        attempt = self._attempt_node(node, 1) if repairing else None
        try:
            async for event in events:
                if attempt is not None and event.type == "repairing":
                    attempt(AIMessage(event.text), event.error)
                    attempt = self._attempt_node(node, event.attempt + 1)
                if schema is None:
                    if store.hub.active:
                        store.update(node, delta=event)
                elif event.type == "generation_complete":
                    result = self._preview(event.value)  # now: the value may be mutable
                    status = "ok"
                elif event.type in ("parsing_failed", "generation_failed"):
                    status, error = "failed", event.error
                    if event.type == "parsing_failed":  # the text to debug the parse with
                        node.defer(
                            "outputs", functools.partial(dict, text=self._preview(event.text))
                        )
                elif event.type == "cancelled":
                    status = "cancelled"
                yield event
            if schema is None:
                status = "ok"
        except GeneratorExit:  # the consumer stopped early: the node stays "cancelled"
            raise
        except BaseException as exc:
            status, error = self._status_for(exc), exc
            raise
        finally:
            await events.aclose()
            if attempt is not None:
                attempt(None, asyncio.CancelledError() if status == "cancelled" else error)
            self._record_calls(node, recording, result)
            self._finish(node, status, error=error)

    def _record_calls(
        self,
        node: TraceNode,
        recording: RecordingModel,
        result: Any = NO_RESULT,
        *,
        rendered: bool = True,
    ) -> None:
        """Write a finished query's node from its recording (``query_node.record_calls``)."""
        limit = self._state.max_text_chars
        record_calls(self._state.store, node, recording, limit, result, rendered=rendered)
        for meter in self._meters:
            for response in recording.responses:
                provenance = response.provenance
                model_id = (provenance.model if provenance else None) or recording.model_id
                meter.add(model_id, response.usage)

    async def generate(
        self,
        prompt: str | Message[Any] | Sequence[Message[Any]],
        *,
        lm: LanguageModel | None = None,
        name: str = "generate",
        stream: bool = False,
        **options: Any,
    ) -> AIMessage[Any]:
        """One traced model call with no template rendering and no parsing.

        With ``stream=True`` the response is streamed (emulated for models that cannot) and
        each text delta reaches observers as a ``node_update`` with ``changes.delta``;
        cancelling the caller closes the stream.
        """
        self._check_usable()
        model = self._model(lm)
        merged = {**self._defaults, **options} if self._defaults else options
        inputs: dict[str, Any] = {}
        tools = merged.get("tools")
        if tools:
            inputs["tools"] = [getattr(getattr(t, "spec", t), "name", "?") for t in tools]
        plain = {k: v for k, v in merged.items() if k != "tools"}
        if plain:
            inputs["options"] = self._preview(plain)
        node = self._start("query", name, inputs=inputs, metadata=query_metadata(model))
        limit = self._state.max_text_chars
        node.defer("inputs", lambda: {"prompt": prompt_preview(prompt, limit)})
        recording = self._recording(model)
        try:
            if stream:
                response = await stream_response(self._state.store, recording, prompt, node, merged)
            else:
                response = await recording.call(prompt, **merged)
        except BaseException as exc:
            self._record_calls(node, recording, rendered=False)
            self._finish(node, self._status_for(exc), error=exc)
            raise
        self._record_calls(node, recording, rendered=False)
        self._finish(node, "ok")
        return response

    def _start_query(
        self,
        prompt: Any,
        schema: Any,
        model: LanguageModel,
        shown: dict[str, Any] | None,
        **metadata: Any,
    ) -> TraceNode:
        """A running ``query`` node: its schema and options recorded now, its prompt and
        ``vars`` previewed on first read."""
        limit = self._state.max_text_chars
        inputs = query_settings(schema, shown, limit)
        name = "query" if schema is None else f"query:{inputs['schema']}"
        node = self._start("query", name, inputs, {**query_metadata(model), **metadata})
        node.defer("inputs", lambda: query_inputs(prompt, shown, limit))
        return node

    # -- fan-out ---------------------------------------------------------------------------
    @overload
    async def concurrent_map(
        self,
        items: Iterable[ItemT],
        fn: Callable[[ItemT, Session], Awaitable[R]],
        *,
        max_concurrency: int = ...,
        on_error: Literal["fail_fast"] = ...,
    ) -> list[R]: ...

    @overload
    async def concurrent_map(
        self,
        items: Iterable[ItemT],
        fn: Callable[[ItemT, Session], Awaitable[R]],
        *,
        max_concurrency: int = ...,
        on_error: Literal["collect"],
    ) -> list[R | Exception]: ...

    async def concurrent_map(
        self,
        items: Iterable[ItemT],
        fn: Callable[[ItemT, Session], Awaitable[R]],
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        on_error: Literal["fail_fast", "collect"] = "fail_fast",
    ) -> list[Any]:
        """``await fn(item, branch)`` for every item, at most ``max_concurrency`` at a time.

        Results keep the input order. ``fail_fast``: the first exception cancels the other
        branches, waits for them to settle, then is raised. ``collect``: an item's exception
        takes its place in the results and the others go on. Each branch gets its own view
        of this session, closed when the branch finishes. Progress (done/total/failed) is
        reported on this view's node.
        """
        return await fan_out(self, items, fn, max_concurrency=max_concurrency, on_error=on_error)

    # -- saving and loading --------------------------------------------------------------
    def trace_json(self) -> dict[str, Any]:
        """The whole held trace plus exact totals, as versioned plain JSON data.

        Holds previews only: no model objects, clients, keys or closures.
        """
        state = self._state
        header = {
            "id": state.store.session_id,
            "created_at": state.created_at,
            "metadata": preview(state.metadata, state.max_text_chars),
            "max_trace_nodes": state.store.max_nodes,
            "observer_errors": state.hub.errors,
            "dropped_events": state.hub.dropped,
        }
        return state.store.to_json(header)

    def trace_json_str(self, **kwargs: Any) -> str:
        return json.dumps(self.trace_json(), ensure_ascii=False, **kwargs)

    @classmethod
    def load_trace(
        cls, data: Mapping[str, Any] | str, *, prices: Mapping[str, Price] | None = None
    ) -> Session:
        """A read-only session showing a saved trace (queries and invokes raise).

        A malformed trace raises one ``ValueError`` naming what is wrong.
        """
        loaded: Any = data
        if isinstance(data, str):
            try:
                loaded = json.loads(data)
            except ValueError as exc:
                raise ValueError(f"not a langfx_nb trace: not valid JSON ({exc})") from None
        store = TraceStore.from_json(loaded, prices)
        session = cls()
        state = session._state
        state.store = store
        store.hub = state.hub
        header = loaded.get("session") or {}  # an object: checked by TraceStore.from_json
        metadata = header.get("metadata")
        state.metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        state.created_at = str(header.get("created_at", ""))
        state.read_only = True
        state.disposed = True
        session._node = store.root
        session._ancestry = (store.root.id,)
        return session

    def __repr__(self) -> str:
        where = "root" if self.is_root else f"view of node {self._node.id}"
        return f"Session({self.id}, {where})"
