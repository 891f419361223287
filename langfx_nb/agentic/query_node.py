"""What a traced model call writes on its ``query`` node.

``Session.query``, ``Session.query_stream`` and ``Session.generate`` start a ``query`` node,
run the call through a ``RecordingModel`` and, when the call ends, write the node from what
the wrapper kept with ``record_calls``. The helpers here build the node's fields: the
``inputs`` (prompt, schema name, ``vars``, options) and ``outputs`` (text, reasoning, tool
calls, finish reason, cache hit, parsed result), all as bounded previews (``agentic/preview.py``)
computed when the node is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import AIMessage, ComplexMessage, Message, TextPart
from .preview import MAX_PREVIEW_TURNS, message_preview, preview, turn_preview, turns_preview
from .recording import RecordingModel
from .trace import TraceNode, TraceStore
from .usage import UsageMeter

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = [
    "NO_RESULT",
    "TranscriptPreview",
    "prompt_preview",
    "query_inputs",
    "query_metadata",
    "record_calls",
    "schema_name",
    "stream_response",
]

NO_RESULT: Any = object()  # ``record_calls`` without a parsed result to show


def record_calls(
    store: TraceStore,
    node: TraceNode,
    recording: RecordingModel,
    max_chars: int,
    result: Any = NO_RESULT,
    *,
    rendered: bool = True,
    meters: tuple[UsageMeter, ...] = (),
) -> None:
    """Write what the model calls of a query saw onto its node: one counted request with
    its usage per response, ``attempts``, the rendered prompt of the first request (unless
    ``rendered=False``: ``generate`` sends its prompt as given and shows it as ``prompt``),
    and the last response (and ``result``, a preview, when given) as outputs; a stream
    that stopped before its final chunk shows what it had received, with ``partial: True``.
    Each request is also charged to ``meters`` (the view's ``UsageMeter``s). ``query``,
    ``query_stream`` and ``generate`` all record through here."""
    responses = recording.responses
    prices = store.prices
    for response in responses:
        provenance = response.provenance
        model_id = (provenance.model if provenance else None) or recording.model_id
        usage = response.usage
        cost = prices.request_cost(model_id, response)
        store.record_usage(node, model_id, usage, cost)
        for meter in meters:
            meter.add(model_id, usage, cost)
    prompts = recording.prompts
    if prompts and rendered:
        node.metadata["attempts"] = len(prompts)
        first = prompts[0]  # a message (``lf.query`` renders its template to one)
        rendered_prompt = (
            message_preview(first, max_chars)
            if isinstance(first, Message)
            else prompt_preview(first, max_chars)
        )
        node.inputs = {**(node.inputs or {}), "rendered_prompt": rendered_prompt}
    last = responses[-1] if responses else None
    partial = recording.partial  # the last stream stopped before its final chunk
    if partial is not None:
        last = partial
    if last is None and result is NO_RESULT:
        return
    out = _response_preview(last, max_chars) if last is not None else {}
    if partial is not None:
        out["partial"] = True
    if result is not NO_RESULT:
        out["result"] = result
    node.outputs = {**node.outputs, **out} if isinstance(node.outputs, dict) else out


async def stream_response(
    store: TraceStore,
    model: LanguageModel,
    prompt: Any,
    node: TraceNode,
    options: dict[str, Any],
) -> AIMessage[Any]:
    """The final message of ``model.stream`` (emulated for models that cannot stream); each
    text delta reaches observers as a ``node_update`` of ``node``. The stream is closed
    however this ends, so cancelling the caller closes it."""
    final: AIMessage[Any] | None = None
    agen = model.stream(prompt, emulate=True, **options)
    try:
        async for chunk in agen:
            if chunk.delta and store.hub.active:
                store.update(node, delta=chunk.delta)
            if chunk.final:
                final = chunk.aggregated
    finally:
        await agen.aclose()  # type: ignore[attr-defined]
    if final is None:
        from ..errors import StreamProtocolError

        raise StreamProtocolError("the model stream ended without a final chunk")
    return final


def query_metadata(model: LanguageModel) -> dict[str, Any]:
    """A query node's first metadata: the model's id and, for a model behind HTTP, the
    ``host:port`` it talks to (never the URL: it may carry credentials)."""
    server = model.server
    return (
        {"model": model.model_id} if server is None else {"model": model.model_id, "server": server}
    )


def query_inputs(
    prompt: Any, schema: Any, options: dict[str, Any] | None, max_chars: int
) -> dict[str, Any]:
    """A query node's ``inputs`` when it starts: the schema's name, the request options, the
    prompt and ``vars`` (user data of any size), previewed now."""
    inputs: dict[str, Any] = {}
    if schema is not None:
        inputs["schema"] = schema_name(schema)
    if options:
        for key in options:
            if key != "vars" and key != "on_attempt":  # some request option: show them all
                settings = {k: v for k, v in options.items() if k != "vars" and k != "on_attempt"}
                inputs["options"] = preview(settings, max_chars)
                break
    if type(prompt) is str:  # a template before rendering: the common case
        inputs["prompt"] = prompt if len(prompt) <= max_chars else prompt[:max_chars] + "…"
    else:
        inputs["prompt"] = prompt_preview(prompt, max_chars)
    if options and "vars" in options:
        inputs["vars"] = preview(options["vars"], max_chars)
    return inputs


def prompt_preview(prompt: Any, max_chars: int) -> Any:
    """A prompt as the trace shows it: messages turn by turn, anything else as text."""
    if type(prompt) is str:  # a template before rendering
        return preview(prompt, max_chars)
    if isinstance(prompt, Message):
        return message_preview(prompt, max_chars)
    if isinstance(prompt, (list, tuple)) and all(isinstance(m, Message) for m in prompt):
        return message_preview(ComplexMessage(prompt), max_chars)
    return preview(prompt if isinstance(prompt, str) else str(prompt), max_chars)


class TranscriptPreview:
    """What ``prompt_preview`` shows of a growing transcript (an agent's prompt at every
    step), each of its last turns previewed once rather than at every step it is shown in
    (benchmarks/otel_export.py (c)). A turn is known by identity: the transcript's messages
    are not changed once sent."""

    __slots__ = ("_max_chars", "_shown")

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        self._shown: dict[int, tuple[Message[Any], dict[str, Any]]] = {}

    def __call__(self, prompt: ComplexMessage[Any]) -> Any:
        turns = prompt.messages
        known = self._shown
        shown: dict[int, tuple[Message[Any], dict[str, Any]]] = {}
        entries = []
        for turn in turns[-MAX_PREVIEW_TURNS:]:
            hit = known.get(id(turn))
            if hit is not None and hit[0] is turn:
                entry = hit[1]
            else:
                entry = turn_preview(turn, self._max_chars)
            shown[id(turn)] = (turn, entry)
            entries.append(entry)
        self._shown = shown  # the last turns only: held messages stay few
        return turns_preview(len(turns), entries)


def schema_name(schema: Any) -> str:
    name = getattr(schema, "__qualname__", None) or getattr(schema, "__name__", None)
    return str(name) if name else repr(schema)[:80]


def _response_preview(response: AIMessage[Any], max_chars: int) -> dict[str, Any]:
    parts = response.parts
    if len(parts) == 1 and type(parts[0]) is TextPart:  # most answers: one text part
        text = parts[0].text
        outputs: dict[str, Any] = {
            "text": text if len(text) <= max_chars else text[:max_chars] + "…"
        }
        calls = None
    else:
        outputs = {"text": preview(response.text, max_chars)}
        if reasoning := response.reasoning:  # text only: signatures are opaque, long, useless
            outputs["reasoning"] = [
                {"redacted": True} if r.redacted else {"text": preview(r.text, max_chars)}
                for r in reasoning
            ]
        calls = response.tool_calls
    if calls:
        outputs["tool_calls"] = [
            {"id": c.id, "name": c.name, "args": preview(c.args, max_chars)} for c in calls
        ]
    metadata = response.metadata
    if metadata:
        finish = metadata.get("finish_reason")
        if finish is not None:
            outputs["finish_reason"] = finish
        if metadata.get("cache_hit"):
            outputs["cache_hit"] = True
        response_id = metadata.get("response_id")
        if response_id is not None:
            outputs["response_id"] = response_id
        response_model = metadata.get("response_model")
        if response_model is not None:
            outputs["response_model"] = response_model
    return outputs
