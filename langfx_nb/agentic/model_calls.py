"""The traced model calls of a session view: ``query_stream`` and ``generate`` here, and
the pieces ``Session.query`` runs its call with.

``Session.query``, ``Session.query_stream`` and ``Session.generate`` resolve the model (the
call's ``lm``, else the view's) and run the call under the view. ``Session.query`` runs its
few steps itself, with ``recording_for``, ``track_query`` and ``attempt_hook`` from here.
What a caller may rely on, for each of the three:

- the view's ``defaults`` are merged under the call's options into a new mapping (nothing
  is mutated);
- the requests go through a ``RecordingModel``: under a budget scope it checks each request
  before it is sent and charges each response (``BudgetExceededError``);
- the call is one ``query`` node under the view, started with ``view.track`` (which checks
  that the view can still run work and arms its deadline) and written when the call ends by
  ``query_node.record_calls``: requests, usage and cost (charged to the view's ``meters``),
  rendered prompt, response, parsed result, or the error, and the outcome;
- with ``repair``, each attempt is a child ``query`` node ``attempt N`` ended with its own
  outcome and text.

The functions take the view as a ``CallView``, the public members of ``lf.Session`` they
use, so this module does not depend on the session module.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..messages import AIMessage, Message
from ..structured.mapping import AttemptHook
from .preview import preview
from .query_node import (
    NO_RESULT,
    prompt_preview,
    query_inputs,
    query_metadata,
    record_calls,
    stream_response,
)
from .recorder import Tracked, View
from .recording import RecordingModel
from .trace import NodeKind, NodeStatus, TraceStore
from .usage import UsageMeter

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .budget import BudgetScope
    from .prices import Prices

__all__ = ["CallView", "attempt_hook", "generate", "query_stream", "recording_for", "track_query"]


class CallView(View, Protocol):
    """What a traced model call uses of the session view it runs under (``lf.Session`` is
    one)."""

    @property
    def defaults(self) -> Mapping[str, Any]: ...
    @property
    def trace_store(self) -> TraceStore: ...
    @property
    def meters(self) -> tuple[UsageMeter, ...]: ...
    def track(
        self,
        kind: NodeKind,
        name: str,
        *,
        inputs: Any = None,
        metadata: dict[str, Any] | None = None,
        previewed: bool = False,
    ) -> Tracked[Any]: ...


def query_stream(
    view: CallView,
    model: LanguageModel,
    prompt: Any,
    schema: Any,
    options: dict[str, Any],
) -> AsyncIterator[Any]:
    """``Session.query_stream``: ``lf.query_stream``'s events through ``model``, recorded as
    a query node when iteration starts. Setup errors raise here, before iteration."""
    from ..structured.query_stream import query_stream as stream_events

    defaults = view.defaults
    merged = {**defaults, **options} if defaults else options
    recording = recording_for(model, view.budget_scope, view.trace_store.prices)
    hook: list[Tracked[Any]] = []  # the query's record, once iteration has started it
    if merged.get("repair") and schema is not None:
        merged = {**merged, "on_attempt": lambda n: attempt_hook(hook[0])(n)}
    events = stream_events(prompt, schema, lm=recording, **merged)
    return _recorded_stream(view, events, recording, prompt, schema, model, merged, hook)


async def _recorded_stream(
    view: CallView,
    events: AsyncGenerator[Any, None],
    recording: RecordingModel,
    prompt: Any,
    schema: Any,
    model: LanguageModel,
    merged: dict[str, Any],
    hook: list[Tracked[Any]],
) -> AsyncGenerator[Any, None]:
    store = view.trace_store
    limit = view.max_text_chars
    result: Any = NO_RESULT
    status: NodeStatus | None = None  # a schema stream's outcome, from its terminal event
    error: BaseException | None = None
    failed_text: str | None = None
    with track_query(view, prompt, schema, model, merged, limit, stream=True) as tracked:
        hook.append(tracked)
        node = tracked.node
        try:
            async for event in events:
                if schema is None:
                    if store.hub.active:
                        store.update(node, delta=event)
                elif event.type == "generation_complete":
                    result = preview(event.value, limit)  # now: the value may be mutable
                    status = "ok"
                elif event.type in ("parsing_failed", "generation_failed"):
                    status, error = "failed", event.error
                    if event.type == "parsing_failed":  # the text to debug the parse with
                        failed_text = event.text
                elif event.type == "cancelled":
                    status = "cancelled"
                yield event
            status = "ok" if schema is None else status or "cancelled"
        except GeneratorExit:  # the consumer stopped early: "cancelled" unless it had ended
            status = status or "cancelled"
            raise
        except BaseException:
            status = None  # the recorder maps what was raised
            raise
        finally:
            await events.aclose()
            record_calls(store, node, recording, limit, result, meters=view.meters)
            if failed_text is not None:
                node.outputs = {**(node.outputs or {}), "text": preview(failed_text, limit)}
            if status is not None:
                tracked.end(status, error=error)


async def generate(
    view: CallView,
    model: LanguageModel,
    prompt: str | Message[Any] | Sequence[Message[Any]],
    name: str,
    stream: bool,
    shown_prompt: Any,
    options: dict[str, Any],
) -> AIMessage[Any]:
    """``Session.generate``: one call of ``model`` (streamed with ``stream``) under ``view``,
    recorded as a query node named ``name`` showing ``shown_prompt`` (by default the prompt,
    previewed here), the tool names and the other options."""
    defaults = view.defaults
    merged = {**defaults, **options} if defaults else options
    limit = view.max_text_chars
    shown = prompt_preview(prompt, limit) if shown_prompt is None else shown_prompt
    inputs: dict[str, Any] = {"prompt": shown}
    tools = merged.get("tools")
    if tools:
        inputs["tools"] = [getattr(getattr(t, "spec", t), "name", "?") for t in tools]
    plain = {k: v for k, v in merged.items() if k != "tools"}
    if plain:
        inputs["options"] = preview(plain, limit)
    store = view.trace_store
    recording = recording_for(model, view.budget_scope, store.prices)
    with view.track(
        "query", name, inputs=inputs, metadata=query_metadata(model), previewed=True
    ) as tracked:
        try:
            if stream:
                response = await stream_response(store, recording, prompt, tracked.node, merged)
            else:
                response = await recording.call(prompt, **merged)
        finally:
            node = tracked.node
            record_calls(store, node, recording, limit, rendered=False, meters=view.meters)
    return response


def recording_for(
    model: LanguageModel, scope: BudgetScope | None, prices: Prices
) -> RecordingModel:
    """The recording wrapper for one traced call; under a budget ``scope`` (a view's
    ``budget_scope``) it also checks each request before it is sent and charges each
    response, priced with ``prices`` (``BudgetExceededError``)."""
    if scope is None:
        return RecordingModel(model)
    return RecordingModel(model, budget=scope.meter(model.model_id, prices))


def attempt_hook(tracked: Tracked[Any]) -> AttemptHook:
    """The repair loop's hook: each attempt a child ``query`` node ``attempt N`` of the
    query, ended with its outcome and the attempt's text."""
    view: CallView = tracked.session

    def start(number: int) -> Callable[[AIMessage[Any] | None, BaseException | None], None]:
        attempt = view.track("query", f"attempt {number}")

        def done(response: AIMessage[Any] | None, error: BaseException | None) -> None:
            outputs = None if response is None else {"text": response.text}
            if error is None:
                attempt.end("ok", outputs=outputs)
            else:
                attempt.fail(error, outputs=outputs)

        return done

    return start


def track_query(
    view: CallView,
    prompt: Any,
    schema: Any,
    model: LanguageModel,
    merged: dict[str, Any],
    limit: int,
    **metadata: Any,
) -> Tracked[Any]:
    """The record of one ``query``/``query_stream``: a ``query`` node with its schema,
    options, prompt and ``vars`` previewed now (the caller may mutate ``vars`` later), cut
    at ``limit`` characters (the view's ``max_text_chars``)."""
    inputs = query_inputs(prompt, schema, merged, limit)
    name = "query" if schema is None else f"query:{inputs['schema']}"
    meta = query_metadata(model)
    if metadata:
        meta.update(metadata)
    return view.track("query", name, inputs=inputs, metadata=meta, previewed=True)
