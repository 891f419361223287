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
import errno
import json
import os
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from ..errors import ExecutionTimeoutError
from ..llms.default import default_lm
from ..messages import AIMessage, Message, Usage
from ..structured.query import query as query_fn
from . import model_calls
from .budget import Budget, BudgetScope
from .clock import Clock, MonotonicClock
from .fanout import DEFAULT_MAX_CONCURRENCY, check_fan_out, fan_out
from .observers import Observer, ObserverHub
from .preview import preview
from .query_node import NO_RESULT, record_calls
from .recorder import Tracked
from .trace import MAX_TRACE_NODES, NodeKind, TraceNode, TraceStore
from .trace_json import naming, parse_trace, regular_file
from .trace_reader import is_store
from .usage import Price, UsageMeter, UsageSummary

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = ["Session", "Tracked"]

ItemT = TypeVar("ItemT")
R = TypeVar("R")

_INF = float("inf")
_LEVELS = frozenset({"debug", "info", "warning", "error"})
_PATH_CHARS = 4096  # a longer str given for a trace is not a path


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


class Session:
    """Runs share one trace, one budget of time and one model through a session.

    ``Session(lm, temperature=0.2)`` keeps ``temperature`` as a default for its queries.
    ``max_trace_nodes`` bounds the details kept (see ``trace``); ``prices`` maps model ids
    to a ``Price`` (or is an ``lf.Prices``), overriding the default table (``genai-prices``,
    the ``prices`` extra) so every query node and ``usage_summary`` carry their cost
    (unknown, ``None``, for an unpriced model); ``clock`` is replaceable in tests;
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
        max_trace_nodes: int = MAX_TRACE_NODES,
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
            clock_now=_clock_now(clock),
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

    # -- the recorder ----------------------------------------------------------------------
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
        previewed: bool = False,
        meter: UsageMeter | None = None,
    ) -> Tracked[Session]:
        """Record one unit of work as a node under this view: the one way to trace work.

        ``with session.track(...) as tracked:`` — a ``running`` node starts (``inputs``
        previewed now, unless ``previewed``: already a preview) and a view bound to it is
        made, with ``lm``, ``defaults``, a ``budget`` scope and a deadline
        ``max_execution_time`` seconds from now (it can only shorten the inherited one). On
        exit the node ends ``ok`` with ``Tracked.outputs``, or with the status of what was
        raised (``failed``, ``denied``, ``cancelled``, ``timed_out``, ``suspended``) and the
        error's class and message; the view then refuses new work. When this block's own
        deadline fires, the cancellation becomes ``ExecutionTimeoutError``. With a budget,
        ``metadata.budget`` holds its limits and what was used. The node starts at this
        call: work decided before it runs (a tool call's approval) may enter the block later.
        A ``meter`` (``UsageMeter``) counts every model request made under the node, exactly.
        """
        self._check_usable()
        own = None
        if max_execution_time is not None:
            own = self._state.clock.now() + max_execution_time
        shown = inputs if previewed or inputs is None else self._preview(inputs)
        store = self._state.store
        node = store.start(kind, name, self._node, shown, metadata)
        if budget is not None and budget.is_unlimited:
            budget = None
        if own is None and budget is None and meter is None and lm is None and not defaults:
            return Tracked(node, self, store, self._bind)  # most nodes: the view inherits all
        view = self._bind(node, deadline=own, lm=lm, defaults=defaults, budget=budget, meter=meter)
        tightens = own if own is not None and own < self._deadline else None
        return Tracked(node, view, store, None, tightens, budget, max_execution_time)

    def end_view(self) -> None:
        """Refuse new work through this view from now on (``RuntimeError``). The recorder
        calls it when the view's node ends; a root session is ended by ``dispose``."""
        if self._node is not self._state.store.root:
            self._open = False

    @contextlib.contextmanager
    def _branch(self) -> Iterator[Session]:
        """A view for one branch of ``concurrent_map``: same node, closed when it ends."""
        view = self._bind(self._node)
        try:
            yield view
        finally:
            view.end_view()

    def _preview(self, value: Any) -> Any:
        return preview(value, self._state.max_text_chars)

    @property
    def budget_scope(self) -> BudgetScope | None:
        """The innermost token/cost budget this view spends from (None: unlimited)."""
        return self._budget

    @property
    def meters(self) -> tuple[UsageMeter, ...]:
        """The ``UsageMeter``s each model request made through this view is charged to
        (``track(meter=...)``, outermost first)."""
        return self._meters

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

    @property
    def run_node(self) -> TraceNode:
        """The innermost ``action`` node at or above this view's node — for the view an
        ``allow_tool`` policy receives (bound to the tool call), the agent run the call
        belongs to; the root when no action is running here."""
        nodes = self._state.store.nodes
        for node_id in reversed(self._ancestry):
            node = nodes.get(node_id)
            if node is not None and node.kind == "action":
                return node
        return self._state.store.root

    @property
    def max_text_chars(self) -> int:
        """Where the trace's previews cut strings (``Session(max_text_chars=...)``)."""
        return self._state.max_text_chars

    @property
    def trace_store(self) -> TraceStore:
        """The store that holds this session's nodes: read it (``nodes``, ``time()``,
        ``node_hooks``); nodes are written through ``track`` only."""
        return self._state.store

    @property
    def created_at(self) -> str:
        """When the session (or the saved one it shows) was created: ISO 8601, UTC."""
        return self._state.created_at

    @property
    def read_only(self) -> bool:
        """True for a loaded trace (``load_trace``): it shows work and runs none."""
        return self._state.read_only

    def on_dispose(self, close: Callable[[], Awaitable[None]]) -> None:
        """Have ``dispose`` await ``close()`` (resources the session owns, such as an MCP
        server opened with ``open(session)``), last registered first."""
        self._state.closers.append(close)

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
        return self._state.store.prices

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

    def rename(self, name: str, *, inputs: Any = None) -> None:
        """Name this view's running node ``name`` and, with ``inputs``, show those (previewed)
        as its inputs: for a node whose work knows itself better than the code that started
        it (``lf.eval.run`` names each batch item by its trial, ``case_id#repeat``, with the
        case's inputs instead of the item's index). Observers get a ``node_update``."""
        self._check_usable()
        changes: dict[str, Any] = {"name": str(name)}
        if inputs is not None:
            changes["inputs"] = self._preview(inputs)
        self._state.store.update(self._node, **changes)

    def adopt(
        self,
        nodes: Sequence[Mapping[str, Any]],
        requests: Sequence[tuple[str, Usage | None, float | None]] = (),
    ) -> TraceNode:
        """Add a finished subtree recorded by another session (another process's, as
        ``TraceNode.to_json()`` forms, its top first) under this view's node, with the model
        requests made under it (model id, usage, cost); see ``TraceStore.adopt``. The meters
        of this view are not charged: the caller knows what it counts. The top node."""
        self._check_usable()
        return self._state.store.adopt(self._node, nodes, requests)

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

    # -- model calls (model_calls.py) -------------------------------------------------------
    def _model(self, lm: LanguageModel | None) -> LanguageModel:
        """The model a call uses; without one, ``TypeError`` — after the errors of a view
        that cannot run work (``_check_usable``), which come first."""
        model = lm if lm is not None else self._lm
        if model is None:
            model = default_lm()
        if model is None:
            self._check_usable()
            raise TypeError(
                "no model: pass Session(lm=...), invoke(lm=...) or lm=, "
                "or set a default with lf.set_default_lm(lm)"
            )
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
        schema) or the error, and the outcome (see ``query_node.record_calls``).
        """
        model = self._model(lm)  # whether this view can run work is checked by ``track``
        state = self._state
        limit = state.max_text_chars
        merged = {**self._defaults, **options} if self._defaults else options
        recording = model_calls.recording_for(model, self._budget, state.store.prices)
        with model_calls.track_query(self, prompt, schema, model, merged, limit) as tracked:
            if merged.get("repair"):  # each attempt becomes a child node with its outcome
                merged = {**merged, "on_attempt": model_calls.attempt_hook(tracked)}
            try:
                message = await query_fn(
                    prompt, schema, lm=recording, returns_message=True, **merged
                )
            except BaseException:  # the node shows what the failed call sent and got
                record_calls(state.store, tracked.node, recording, limit, meters=self._meters)
                raise
            # with a schema, previewed now: the result may be a mutable object
            result = NO_RESULT if schema is None else preview(message.result, limit)
            record_calls(state.store, tracked.node, recording, limit, result, meters=self._meters)
        return message if returns_message else message.result  # without a schema: the text

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
        self._check_usable()
        return model_calls.query_stream(self, self._model(lm), prompt, schema, options)

    async def generate(
        self,
        prompt: str | Message[Any] | Sequence[Message[Any]],
        *,
        lm: LanguageModel | None = None,
        name: str = "generate",
        stream: bool = False,
        shown_prompt: Any = None,
        **options: Any,
    ) -> AIMessage[Any]:
        """One traced model call with no template rendering and no parsing.

        With ``stream=True`` the response is streamed (emulated for models that cannot) and
        each text delta reaches observers as a ``node_update`` with ``changes.delta``;
        cancelling the caller closes the stream. ``shown_prompt`` is the prompt as its node
        shows it, when the caller has it already (``query_node.TranscriptPreview``: an
        agent's transcript); by default the prompt is previewed here.
        """
        model = self._model(lm)  # whether this view can run work is checked by ``track``
        return await model_calls.generate(self, model, prompt, name, stream, shown_prompt, options)

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
        check_fan_out(max_concurrency, on_error)
        self._check_usable()
        store, node = self._state.store, self._node
        return await fan_out(
            items,
            fn,
            branch=self._branch,
            report=lambda progress: store.update(node, progress=progress),
            tasks=self._state.tasks,
            max_concurrency=max_concurrency,
            on_error=on_error,
        )

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
        cls,
        data: Mapping[str, Any] | str | os.PathLike[str],
        *,
        prices: Mapping[str, Price] | None = None,
    ) -> Session:
        """A read-only session showing a saved trace (queries and invokes raise): its data,
        JSON text, or the path of a trace file (a stored trace written by ``save_trace`` or
        a batch, or trace JSON).

        A malformed trace raises one ``ValueError`` naming what is wrong.
        """
        loaded = _trace_data(data)
        session = cls()
        state = session._state
        with _naming(data):
            session._adopt(TraceStore.from_json(loaded, prices, hub=state.hub), loaded)
        state.created_at = str((loaded.get("session") or {}).get("created_at", ""))
        state.read_only = True
        state.disposed = True
        return session

    @classmethod
    def restore(
        cls,
        data: Mapping[str, Any] | str | os.PathLike[str],
        lm: LanguageModel | None = None,
        *,
        prices: Mapping[str, Price] | None = None,
        clock: Clock | None = None,
        tracer_provider: Any = None,
    ) -> Session:
        """A live session that continues a saved trace: same session id and root node, the
        saved nodes kept, new nodes numbered after them and timed after the last saved one
        (``TraceStore.from_json(..., live=True)``). With ``tracer_provider`` its new nodes
        are exported as OpenTelemetry spans (the saved ones were exported where they ran).
        A malformed trace raises one ``ValueError`` naming what is wrong."""
        loaded = _trace_data(data)
        session = cls(lm, prices=prices, clock=clock)
        state = session._state
        now = _clock_now(state.clock)
        with _naming(data):
            store = TraceStore.from_json(loaded, prices, clock_now=now, hub=state.hub, live=True)
        session._adopt(store, loaded)
        if tracer_provider is not None:
            from .otel import export

            export(session, tracer_provider, backfill=False)
        return session

    def _adopt(self, store: TraceStore, loaded: Mapping[str, Any]) -> None:
        """Show ``store`` (a saved trace) through this root session."""
        state = self._state
        state.store = store
        metadata = (loaded.get("session") or {}).get("metadata")  # checked by from_json
        state.metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
        self._node = store.root
        self._ancestry = (store.root.id,)

    def __repr__(self) -> str:
        where = "root" if self.is_root else f"view of node {self._node.id}"
        return f"Session({self.id}, {where})"


def _trace_data(data: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """Saved-trace data from data, JSON text, or the path of a stored trace (``save_trace``,
    a run manifest) or of a trace JSON file. A path that is not a regular file (a pipe, a
    device) is ``ValueError`` before it is opened. A ``str`` that names a file is its path
    (even ``{run}.json``); one that is neither JSON nor a file, and does not begin as JSON of
    an object or a list, is ``FileNotFoundError``."""
    if isinstance(data, str) and _path_like(data) and os.path.lexists(data):
        data = Path(data)
    if isinstance(data, os.PathLike):
        path = Path(data)
        regular_file(path)
        if is_store(path):  # a stored trace, or a run manifest
            from ..batch.run_trace import open_trace

            with _naming(path):
                store = open_trace(path)
                try:
                    return store.trace_json()
                finally:
                    store.close()
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not a langfx_nb trace: not valid UTF-8") from exc
    elif isinstance(data, str):
        text = data
    else:
        return data
    try:
        loaded: Any = parse_trace(text)
    except ValueError as exc:
        if isinstance(data, str) and _path_like(data) and data.lstrip()[:1] not in "{[":
            raise FileNotFoundError(errno.ENOENT, "no such trace file", data) from exc
        raise
    return loaded  # its shape is checked by TraceStore.from_json


def _naming(source: Any) -> contextlib.AbstractContextManager[None]:
    """A plain ``ValueError`` about a saved trace read from a file names the file (not
    a trace given as data or JSON text)."""
    if isinstance(source, str) and not (_path_like(source) and os.path.lexists(source)):
        return contextlib.nullcontext()
    return naming(str(source) if isinstance(source, os.PathLike | str) else "")


def _path_like(text: str) -> bool:
    """Whether ``text`` given for a trace may be a path (one line, not too long)."""
    return len(text) <= _PATH_CHARS and "\n" not in text and text.strip() != ""


def _clock_now(clock: Clock) -> Callable[[], float]:
    """What the trace store reads the time with (``time.monotonic`` itself when it can)."""
    return time.monotonic if type(clock) is MonotonicClock else clock.now
