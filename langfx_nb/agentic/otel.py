"""OpenTelemetry export of a session's trace, following the GenAI semantic conventions.

``lf.otel.export(session, tracer_provider)`` (or ``Session(..., tracer_provider=...)``)
turns every trace node into a span *as it happens*: a span starts when its node starts and
is handed to the provider's span processors when the node ends, so a batch processor ships
each finished call while the run goes on. Spans are built in a ``TraceStore.node_hooks``
entry, on the run's thread, as the node changes; the SDK's ``BatchSpanProcessor`` already
encodes and sends them on its own thread.

Mapping (what a caller may rely on):

- The session root is not a span. Every span carries the session id as
  ``gen_ai.conversation.id`` (Phoenix shows it as the session), and every *top-level* node
  (a child of the root) starts a new trace — under the caller's current OpenTelemetry span
  when there is one. A notebook session lives for hours; one trace per run keeps each run
  complete and visible in the backend as soon as it ends.
- ``action`` → INTERNAL span named after the action. An Agent (its node carries
  ``metadata.steps``) becomes ``invoke_agent {name}`` with ``gen_ai.operation.name`` and
  ``gen_ai.agent.name``. A run resumed after a suspension (``metadata.resumed_from``)
  continues the suspended run's trace, as a child of its span: one this export saw end, or
  the ``traceparent`` a ``RunState`` carried from another process.
- ``query`` (``session.query``, ``query_stream``, ``generate``, each agent step) → CLIENT
  span ``chat {model}`` with ``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.request.model`` and the request options the conventions name (of the registry's
  types: ``top_k`` is a double), ``gen_ai.response.model`` (the model the server says
  answered; absent when it names none), ``gen_ai.response.id``, ``gen_ai.response.finish_reasons``,
  ``server.address``/``server.port`` and ``gen_ai.usage.*`` tokens (summed over retries,
  as the node is).
- ``tool_call`` → INTERNAL span ``execute_tool {name}`` with ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id`` and ``gen_ai.tool.type``; the approval decision (outcome, who,
  when) is a ``langfx.approval`` event on it, stamped at the decision's time.
- An ``lf.eval`` trial (an ``item`` node whose ``metadata.evaluations`` lists its scores) →
  one ``gen_ai.evaluation.result`` event per score on the trial's span, with
  ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value`` (a pass is 1.0),
  ``gen_ai.evaluation.score.label``, ``error.type`` when the evaluator raised, and
  ``gen_ai.evaluation.explanation`` (a judge's reason) only with ``capture_content=True``.
- ``log`` → a ``langfx.log`` event on its parent's span (a log on the root gets a
  zero-length span of its own).
- Every span has ``langfx.node.id``; ``langfx.status`` when the node's outcome is not
  ``ok``; actions ``langfx.node.kind``; queries ``langfx.node.name`` ("step 2"). Each
  attribute costs the OTLP encoder ~4 µs per span, so none repeats what the span name or
  a convention attribute already says. ``failed``, ``timed_out`` and a ``denied`` node that
  carries an error set the span status to ERROR with ``error.type`` and an ``exception``
  event; ``cancelled`` and a plain Deny leave it UNSET.

Content — prompts, responses, tool arguments and results, log messages and data, and the
messages of errors (which can quote any of those) — is recorded only with
``capture_content=True`` (off by default, as the conventions advise); with it off a span
holds no model, tool or log text (an error keeps its class: ``error.type``, the status
description and ``exception.type``). Captured content goes in the conventions'
JSON attributes (``gen_ai.system_instructions`` — the prompt's leading system turns —,
``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.definitions``,
``gen_ai.tool.call.arguments``, and ``gen_ai.tool.call.result`` for a call that ran and
succeeded), from the trace's previews (credential-like keys already redacted) with
credential-looking strings (API keys, bearer tokens) replaced by ``<redacted>``. Each is at
most ``max_content_chars``: a JSON attribute is cut inside its strings (each cut one ends in
``CUT_MARK``), so it stays valid JSON of the shape the conventions' schemas give.

opentelemetry is imported on first use only; without a tracer provider (none passed and no
global one set) spans go to OpenTelemetry's no-op tracer and nothing is exported.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..llms.registry import provider_class
from ..redact import redact_secrets
from .trace import Decision, TraceNode, TraceStore

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider

__all__ = ["CUT_MARK", "SpanExport", "Traced", "export", "flush", "redact_secrets", "traceparent"]

_log = logging.getLogger("langfx_nb.otel")

#: Request options recorded as ``gen_ai.request.*`` (they are settings, not content).
_REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
}
#: Options the registry types as double: an int given (``top_k=40``) is exported as a float.
_DOUBLE_OPTIONS = frozenset(
    {"temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty"}
)
#: What ends a string cut to fit ``max_content_chars`` (inside a JSON attribute, the cut is
#: made in its strings, so the attribute stays JSON of the same shape).
CUT_MARK = "…[cut]"
_USAGE = (
    ("prompt_tokens", "gen_ai.usage.input_tokens"),
    ("completion_tokens", "gen_ai.usage.output_tokens"),
    ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoning_tokens", "gen_ai.usage.reasoning.output_tokens"),
)
_ROLES = {"ai": "assistant", "user": "user", "system": "system", "tool": "tool"}


class Traced(Protocol):
    """What the export reads of a session (``lf.Session`` is one)."""

    @property
    def id(self) -> str: ...
    @property
    def root(self) -> TraceNode: ...
    @property
    def trace_store(self) -> TraceStore: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def created_at(self) -> str: ...


class SpanExport:
    """The subscription ``export`` made.

    A span reaches the tracer provider's processors when its node ends. ``close()`` stops
    exporting; spans of nodes still running are ended at once (marked
    ``langfx.export_closed``) so none is lost."""

    def __init__(self, exporter: _Exporter, unsubscribe: Callable[[], None]) -> None:
        self._exporter = exporter
        self._unsubscribe = unsubscribe

    @property
    def open_spans(self) -> int:
        """Spans started for nodes that have not ended yet."""
        return len(self._exporter.open)

    def close(self) -> None:
        self._unsubscribe()
        self._exporter.close_all()

    def traceparent(self, node_id: str) -> str | None:
        """The W3C ``traceparent`` of node ``node_id``'s span (an action's, also once ended;
        None when this export has none): what a run resumed in another process continues."""
        return self._exporter.traceparent(node_id)


def export(
    session: Traced,
    tracer_provider: TracerProvider | None = None,
    *,
    capture_content: bool = False,
    max_content_chars: int = 4000,
    backfill: bool = True,
) -> SpanExport:
    """Export ``session``'s trace as OpenTelemetry spans from now on, live.

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace``); when none was
    set, OpenTelemetry's no-op tracer receives the spans and nothing leaves the process.
    Nodes the session already holds are exported too (finished ones as complete spans,
    running ones as spans that end with their node), so calling this after a run exports
    that run; ``backfill=False`` exports only what happens from now on. Needs the ``otel``
    extra (``pip install 'langfx_nb[otel]'``).
    """
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("lf.otel needs OpenTelemetry: pip install 'langfx_nb[otel]'") from exc
    if max_content_chars < 1:
        raise ValueError("max_content_chars must be at least 1")
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    tracer = provider.get_tracer("langfx_nb", _version())
    exporter = _Exporter(session, tracer, capture_content, max_content_chars)
    store = session.trace_store
    if backfill:
        exporter.backfill([n for n in store.root.walk() if n is not store.root])
    store.node_hooks.append(exporter.hook)
    handle = SpanExport(exporter, lambda: _remove(store.node_hooks, exporter.hook))
    _EXPORTS.setdefault(store, []).append(handle)
    return handle


def flush(timeout: float | None = 10.0) -> bool:
    """Spans are handed to their tracer provider's span processors as nodes end, so there
    is nothing to wait for here (kept for callers written against a queued export); a
    batch processor still ships them on its own schedule: the provider's
    ``force_flush()`` does that. Always True."""
    return True


def traceparent(session: Traced, node_id: str) -> str | None:
    """The W3C ``traceparent`` of node ``node_id``'s span in the first export of
    ``session`` that has one; None when the session is not exported."""
    for handle in _EXPORTS.get(session.trace_store, ()):
        found = handle.traceparent(node_id)
        if found is not None:
            return found
    return None


def _remove(hooks: list[Callable[[str, TraceNode], None]], hook: Any) -> None:
    if hook in hooks:
        hooks.remove(hook)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("langfx_nb")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


#: The exports of each live trace store (for ``traceparent``); gone with the store.
_EXPORTS: weakref.WeakKeyDictionary[TraceStore, list[SpanExport]] = weakref.WeakKeyDictionary()


class _Open:
    """The span of a running node (or, for an action, what is needed to start it)."""

    __slots__ = ("child_context", "decided", "model", "node", "pending", "span")

    def __init__(
        self,
        node: TraceNode,
        span: Span | None,
        pending: tuple[str, dict[str, Any], int, Context | None] | None = None,
    ) -> None:
        self.node = node
        self.span = span
        #: an action's span is started on first need, with its node's own start time: by
        #: then the run has said whether it resumes a suspended one (metadata.resumed_from)
        self.pending = pending
        self.child_context: Context | None = None
        self.decided = False
        #: (provider, model) of the first model call below this node (for an agent's span)
        self.model: tuple[str, str] | None = None


class _Exporter:
    """Node events in, spans out, on the thread that changes the nodes."""

    def __init__(
        self, session: Traced, tracer: Tracer, capture_content: bool, max_chars: int
    ) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._trace = trace
        self._current = context.get_current
        self._kinds = {"query": SpanKind.CLIENT}
        self._internal = SpanKind.INTERNAL
        self._error = (Status, StatusCode.ERROR)
        self.tracer = tracer
        self.content = capture_content
        self.max_chars = max_chars
        self.conversation = session.id
        self.root_id = session.root.id
        self._base = _epoch_base(session)
        self.open: dict[str, _Open] = {}
        #: span contexts of ended actions, so a resumed run joins the suspended run's trace
        self.ended: dict[str, SpanContext] = {}

    def hook(self, what: str, node: TraceNode) -> None:
        """A node event (a ``TraceStore.node_hooks`` entry). A top-level node's span starts
        under the caller's current OpenTelemetry span; the root's end (the session disposed)
        ends every span still open. Never raises: a failed export is logged, the run goes
        on."""
        try:
            if what == "start":
                self.start(node, self._current())
            elif what == "end":
                if node.id == self.root_id:
                    self.close_all()
                else:
                    self.end(node)
            elif what == "decision":
                entry = self.open.get(node.id)
                decision = node.decision
                if entry is not None and decision is not None and decision.outcome != "waiting":
                    self._decision(entry, decision)
            elif what == "log":
                self.log(node)
        except Exception:
            _log.warning("OpenTelemetry export: one trace event was not exported", exc_info=True)

    def backfill(self, held: list[TraceNode]) -> None:
        """Spans for what the session held when the export began: started parents first,
        logs as events on them, then the finished ones ended children first."""
        for node in held:
            if node.kind != "log":
                self.start(node, None)
        for node in held:
            if node.kind == "log":
                self.log(node)
        for node in reversed(held):
            if node.kind != "log" and node.status != "running":
                self.end(node)

    def close_all(self) -> None:
        for node_id in list(self.open):
            span = self._span(self.open.pop(node_id))
            span.set_attribute("langfx.export_closed", True)
            span.end()

    def traceparent(self, node_id: str) -> str | None:
        entry = self.open.get(node_id)
        ctx = self._span(entry).get_span_context() if entry is not None else self.ended.get(node_id)
        if ctx is None:
            return None
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        span = self._trace.NonRecordingSpan(ctx)
        TraceContextTextMapPropagator().inject(carrier, self._trace.set_span_in_context(span))
        return carrier.get("traceparent")

    # -- spans -------------------------------------------------------------------------
    def _ns(self, seconds: float) -> int:
        return self._base + int(seconds * 1e9)

    def _context(self, node: TraceNode, current: Context | None) -> Context | None:
        """The context ``node``'s span starts in: its parent's span, or the caller's
        context when its parent has no span (top-level nodes, and parents never seen)."""
        entry = self.open.get(node.parent_id) if node.parent_id is not None else None
        if entry is None:
            return current
        if entry.child_context is None:
            entry.child_context = self._trace.set_span_in_context(self._span(entry))
        return entry.child_context

    def _span(self, entry: _Open) -> Span:
        span = entry.span
        if span is None:
            assert entry.pending is not None
            name, attributes, start, context = entry.pending
            metadata = entry.node.metadata
            prior = metadata.get("resumed_from")
            if prior is not None:  # a resumed run continues the suspended run's trace
                attributes["langfx.resumed_from"] = str(prior)
                context = self._resumed_context(str(prior), metadata) or context
            span = entry.span = self.tracer.start_span(
                name, context=context, kind=self._internal, attributes=attributes, start_time=start
            )
            entry.pending = None
        return span

    def _resumed_context(self, prior: str, metadata: Mapping[str, Any]) -> Context | None:
        """The suspended run's span as a parent: seen ending here, or (a run resumed in
        another process) from the ``traceparent`` its saved state carried."""
        earlier = self.ended.get(prior)
        if earlier is not None:
            return self._trace.set_span_in_context(self._trace.NonRecordingSpan(earlier))
        carried = metadata.get("resumed_traceparent")
        if isinstance(carried, str):
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )

            context = TraceContextTextMapPropagator().extract({"traceparent": carried})
            if self._trace.get_current_span(context).get_span_context().is_valid:
                return context
        return None

    def start(self, node: TraceNode, context: Context | None) -> None:
        kind = node.kind
        name = node.name
        attributes: dict[str, Any] = {
            "gen_ai.conversation.id": self.conversation,
            "langfx.node.id": node.id,
        }
        span_name = name
        parent_id = node.parent_id
        if kind == "query":
            model_id = node.metadata.get("model") or ""
            provider, _, model = str(model_id).partition(":")
            provider = _provider_name(provider)
            attributes["gen_ai.operation.name"] = "chat"
            attributes["gen_ai.provider.name"] = provider
            if model:
                attributes["gen_ai.request.model"] = model
            attributes["langfx.node.name"] = name  # "step 2", "query:Fact": not in the span name
            span_name = f"chat {model or provider}"
            parent = self.open.get(parent_id) if parent_id is not None else None
            if parent is not None and parent.model is None:
                parent.model = (provider, model)
        elif kind == "tool_call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.tool.type"] = "function"
            call_id = (node.inputs or {}).get("call_id")
            if call_id is not None:
                attributes["gen_ai.tool.call.id"] = str(call_id)
            step = node.metadata.get("step")
            if isinstance(step, int):  # ids are unique per model step only: (step, id) is
                attributes["langfx.tool.step"] = step
            span_name = f"execute_tool {name}"
        else:
            attributes["langfx.node.kind"] = kind
            pending = (span_name, attributes, self._ns(node.start), self._context(node, context))
            self.open[node.id] = _Open(node, None, pending)
            return
        span = self.tracer.start_span(
            span_name,
            context=self._context(node, context),
            kind=self._kinds.get(kind, self._internal),
            attributes=attributes,
            start_time=self._ns(node.start),
        )
        self.open[node.id] = _Open(node, span)

    def end(self, node: TraceNode) -> None:
        entry = self.open.pop(node.id, None)
        if entry is None:
            return
        span = self._span(entry)
        kind = node.kind
        status = node.status
        metadata = node.metadata
        attributes: dict[str, Any] = {} if status == "ok" else {"langfx.status": status}
        if kind == "item":  # its work may have named it since it started (Session.rename)
            span.update_name(node.name)
        if kind == "query":
            self._query_end(node, metadata, attributes)
        elif kind == "tool_call":
            if metadata.get("executed") is False:
                attributes["langfx.tool.executed"] = False
            decision = node.decision
            if not entry.decided and decision is not None and decision.outcome != "waiting":
                self._decision(entry, decision)
            if self.content:
                self._tool_content(node, attributes)
        elif kind == "action":
            if "steps" in metadata:  # an Agent run
                attributes["gen_ai.operation.name"] = "invoke_agent"
                attributes["gen_ai.agent.name"] = node.name
                attributes["langfx.agent.steps"] = metadata["steps"]
                if "tool_calls" in metadata:
                    attributes["langfx.agent.tool_calls"] = metadata["tool_calls"]
                if entry.model is not None:
                    attributes["gen_ai.provider.name"] = entry.model[0]
                    if entry.model[1]:
                        attributes["gen_ai.request.model"] = entry.model[1]
                span.update_name(f"invoke_agent {node.name}")
            if self.content:
                self._content(attributes, "langfx.action.inputs", node.inputs)
                self._content(attributes, "langfx.action.output", node.outputs)
        evaluations = metadata.get("evaluations")
        if evaluations:
            self._evaluations(span, evaluations, node.end)
        progress = node.progress
        if progress:
            for key in ("done", "total", "failed"):
                if key in progress:
                    attributes[f"langfx.progress.{key}"] = progress[key]
        if node.error:
            self._fail(span, node.error, attributes)
        span.set_attributes(attributes)
        span.end(end_time=self._ns(node.end) if node.end is not None else None)
        if kind == "action":
            ended = self.ended
            ended[node.id] = span.get_span_context()
            if len(ended) > 1_000:  # bounded: resumes refer to recent runs
                del ended[next(iter(ended))]

    def _fail(self, span: Span, error: Mapping[str, Any], attributes: dict[str, Any]) -> None:
        if error.get("type") == "CancelledError":
            return  # cancellation is an outcome (langfx.status), not an error
        status_cls, code = self._error
        error_type = str(error.get("type", "Exception"))
        attributes["error.type"] = error_type
        event = {"exception.type": error_type}
        # an error's message can quote a tool's exception, a model's answer or a prompt:
        # content, so only the class is exported unless content is captured
        message = self._text(str(error.get("message", ""))) if self.content else ""
        if self.content:
            event["exception.message"] = message
        span.set_status(status_cls(code, f"{error_type}: {message}" if message else error_type))
        span.add_event("exception", event)

    def _query_end(
        self, node: TraceNode, metadata: Mapping[str, Any], attributes: dict[str, Any]
    ) -> None:
        outputs = node.outputs or {}
        inputs = node.inputs or {}
        usage = node.usage
        if usage is not None:
            for field, key in _USAGE:
                value = getattr(usage, field)
                if value is not None:
                    attributes[key] = value
        response_model = outputs.get("response_model")
        if response_model is not None:  # the model the server says answered, when it says
            attributes["gen_ai.response.model"] = str(response_model)
        finish = outputs.get("finish_reason")
        if finish is not None:
            attributes["gen_ai.response.finish_reasons"] = (str(finish),)
        response_id = outputs.get("response_id")
        if response_id is not None:
            attributes["gen_ai.response.id"] = str(response_id)
        server = metadata.get("server")
        if isinstance(server, str) and server:
            host, _, port = server.rpartition(":")
            attributes["server.address"] = host or server
            if port.isdigit() and host:
                attributes["server.port"] = int(port)
        if metadata.get("stream"):
            attributes["gen_ai.request.stream"] = True
        if metadata.get("attempts", 1) > 1:  # retried
            attributes["langfx.query.attempts"] = metadata["attempts"]
        if outputs.get("cache_hit"):
            attributes["langfx.cache_hit"] = True
        if "schema" in inputs:
            attributes["gen_ai.output.type"] = "json"
            attributes["langfx.query.schema"] = str(inputs["schema"])
        options = inputs.get("options")
        if isinstance(options, Mapping):
            for option, key in _REQUEST_OPTIONS.items():
                value = options.get(option)
                if option in _DOUBLE_OPTIONS and isinstance(value, (int, float)):
                    attributes[key] = value if isinstance(value, bool) else float(value)
                elif isinstance(value, (bool, int, float, str)):
                    attributes[key] = (value,) if option == "stop" else value
                elif option == "stop" and isinstance(value, list):
                    attributes[key] = tuple(str(v) for v in value)
        if self.content:
            prompt = inputs.get("rendered_prompt", inputs.get("prompt"))
            if prompt is not None:
                system, messages = _input_messages(prompt)
                if system:
                    attributes["gen_ai.system_instructions"] = self._json(system)
                attributes["gen_ai.input.messages"] = self._json(messages)
            if outputs:
                attributes["gen_ai.output.messages"] = self._json(_output_messages(outputs))
            tools = inputs.get("tools")
            if isinstance(tools, list) and tools:
                definitions = [{"type": "function", "name": str(name)} for name in tools]
                attributes["gen_ai.tool.definitions"] = self._json(definitions)

    def _tool_content(self, node: TraceNode, attributes: dict[str, Any]) -> None:
        args = (node.inputs or {}).get("args")
        if args is not None:
            attributes["gen_ai.tool.call.arguments"] = self._json(args)
        if node.status != "ok":  # a Deny's note or an error is not a result (the approval
            return  # event and error.type say what happened)
        outputs = node.outputs or {}
        if "json" in outputs:
            try:
                value = json.loads(str(outputs["json"]))
            except ValueError:  # a preview cut in the trace
                attributes["gen_ai.tool.call.result"] = self._text(str(outputs["json"]))
            else:
                attributes["gen_ai.tool.call.result"] = self._json(value)
        elif outputs.get("message") is not None:
            attributes["gen_ai.tool.call.result"] = self._text(str(outputs["message"]))

    def _evaluations(self, span: Span, evaluations: Any, at: float | None) -> None:
        """The scores ``lf.eval`` wrote on a trial's node (``metadata.evaluations``), each a
        ``gen_ai.evaluation.result`` event; an evaluator's explanation is content (a judge's
        words about the answer), so it is recorded only with ``capture_content``."""
        stamp = self._ns(at) if at is not None else None
        for entry in evaluations if isinstance(evaluations, list) else ():
            if not isinstance(entry, Mapping):
                continue
            attributes: dict[str, Any] = {"gen_ai.evaluation.name": str(entry.get("name"))}
            score = entry.get("score")
            if isinstance(score, (int, float)):
                attributes["gen_ai.evaluation.score.value"] = float(score)
            if entry.get("label") is not None:
                attributes["gen_ai.evaluation.score.label"] = str(entry["label"])
            if entry.get("reason") is not None and self.content:
                attributes["gen_ai.evaluation.explanation"] = self._text(str(entry["reason"]))
            error = entry.get("error")
            if isinstance(error, Mapping):
                attributes["error.type"] = str(error.get("type"))
            span.add_event("gen_ai.evaluation.result", attributes, timestamp=stamp)

    def _decision(self, entry: _Open, decision: Decision) -> None:
        """The ``langfx.approval`` event, from the node's decision record, stamped when
        the decision was made."""
        entry.decided = True
        attributes: dict[str, Any] = {
            "langfx.approval.outcome": decision.outcome,
            "langfx.approval.by": str(decision.by),
        }
        at = decision.decided_at
        if decision.args is not None:
            attributes["langfx.approval.edited_args"] = True
            if self.content:
                attributes["langfx.approval.args"] = self._json(decision.args)
        if decision.note is not None:  # a Deny's reason (written by the app), or why it stopped
            attributes["langfx.approval.message"] = self._text(decision.note)
        stamp = self._ns(at) if at is not None else None
        self._span(entry).add_event("langfx.approval", attributes, timestamp=stamp)

    def log(self, node: TraceNode) -> None:
        inputs = dict(node.inputs or {})
        message = inputs.pop("message", "")
        attributes: dict[str, Any] = {"langfx.log.level": node.name, "langfx.node.id": node.id}
        if self.content:  # a log's message and data are the app's text: content
            attributes["langfx.log.message"] = self._text(str(message))
            if inputs:
                attributes["langfx.log.data"] = self._json(inputs)
        stamp = self._ns(node.start)
        entry = self.open.get(node.parent_id or "")
        if entry is not None:
            self._span(entry).add_event("langfx.log", attributes, timestamp=stamp)
            return
        span = self.tracer.start_span(
            f"log {node.name}",
            context=None,
            attributes={"gen_ai.conversation.id": self.conversation, "langfx.node.kind": "log"},
            start_time=stamp,
        )
        span.add_event("langfx.log", attributes, timestamp=stamp)
        span.end(end_time=stamp)

    # -- content -----------------------------------------------------------------------
    def _text(self, text: str) -> str:
        text = redact_secrets(text)
        if len(text) > self.max_chars:
            keep = self.max_chars - len(CUT_MARK)
            return text[:keep] + CUT_MARK if keep > 0 else text[: self.max_chars]
        return text

    def _json(self, value: Any) -> str:
        """``value`` as JSON of at most ``max_chars`` (when its shape fits at all): the
        strings in it are cut, each ending in ``CUT_MARK``, so the attribute stays valid
        JSON of the same shape; an array that does not fit even so loses its first items."""
        value = _redacted(value)
        text = _dumps(value)
        limit = self.max_chars
        if len(text) <= limit:
            return text
        while True:
            low, high = 0, _longest(value)
            best = None
            while low <= high:  # the longest per-string length that fits
                middle = (low + high) // 2
                cut = _dumps(_cut(value, middle))
                if len(cut) <= limit:
                    best, low = cut, middle + 1
                else:
                    high = middle - 1
            if best is not None:
                return best
            if not (isinstance(value, list) and len(value) > 1):
                return _dumps(type(value)()) if isinstance(value, (list, dict)) else '""'
            value = value[1:]  # the oldest messages go first

    def _content(self, attributes: dict[str, Any], key: str, value: Any) -> None:
        if value is not None:
            attributes[key] = self._json(value)


def _epoch_base(session: Traced) -> int:
    """Epoch nanoseconds of session time 0: node times are seconds since then. A saved trace
    (``Session.load_trace``) keeps its original wall-clock time, from ``created_at``."""
    if session.read_only:
        try:
            created = datetime.datetime.fromisoformat(session.created_at)
        except ValueError:
            pass
        else:
            if created.tzinfo is not None:
                return int(created.timestamp() * 1e6) * 1000
    return time.time_ns() - int(session.trace_store.time() * 1e9)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _redacted(value: Any) -> Any:
    """``value`` as plain JSON data, credential-looking strings replaced (keys too; see
    ``redact_secrets``); anything else JSON has no type for becomes its redacted ``str``."""
    if isinstance(value, str):
        return redact_secrets(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {redact_secrets(str(k)): _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return redact_secrets(str(value))


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return max((_longest(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    return 0


def _cut(value: Any, chars: int) -> Any:
    """``value`` with every string longer than ``chars`` cut to ``chars`` and marked."""
    if isinstance(value, str):
        return value if len(value) <= chars else value[:chars] + CUT_MARK
    if isinstance(value, Mapping):
        return {k: _cut(v, chars) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, chars) for v in value]
    return value


def _turns(preview: Any) -> list[Mapping[str, Any]]:
    """The turns of a trace message preview (one turn, a list, or a cut transcript)."""
    if isinstance(preview, Mapping):
        if "turns" in preview:
            return list(preview["turns"])
        return [preview]
    if isinstance(preview, list):
        return [t for t in preview if isinstance(t, Mapping)]
    return [{"role": "user", "text": str(preview)}]


def _input_messages(preview: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Trace previews → the conventions' ``gen_ai.system_instructions`` (the leading system
    turns: langfx_nb takes instructions apart from the conversation) and
    ``gen_ai.input.messages`` (the rest)."""
    turns = _turns(preview)
    system: list[dict[str, Any]] = []
    while turns and turns[0].get("role") == "system":
        text = turns.pop(0).get("text")
        if text:
            system.append({"type": "text", "content": str(text)})
    messages = []
    for turn in turns:
        role = _ROLES.get(str(turn.get("role")), str(turn.get("role")))
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": turn.get("call_id"),
                    "response": turn.get("text"),
                }
            )
        else:
            if turn.get("text"):
                parts.append({"type": "text", "content": turn["text"]})
            parts.extend(_tool_call_part(call) for call in turn.get("tool_calls") or ())
        messages.append({"role": role, "parts": parts})
    return system, messages


def _tool_call_part(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": call.get("id"),
        "name": call.get("name"),
        "arguments": call.get("args"),
    }


def _output_messages(outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [
        {"type": "reasoning", "content": r["text"]}
        for r in outputs.get("reasoning") or ()
        if isinstance(r, Mapping) and r.get("text")  # redacted thinking has no text to send
    ]
    if outputs.get("text"):
        parts.append({"type": "text", "content": outputs["text"]})
    parts.extend(_tool_call_part(call) for call in outputs.get("tool_calls") or ())
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if outputs.get("finish_reason") is not None:
        message["finish_reason"] = outputs["finish_reason"]
    return [message]


def _provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a langfx_nb provider: the conventions' well-known value
    its model class names (``LanguageModel.otel_provider``), else its own name."""
    cls = provider_class(provider)
    return (cls.otel_provider if cls is not None else None) or provider
