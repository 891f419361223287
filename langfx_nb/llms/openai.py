"""OpenAI Chat Completions: ``POST {base_url}/chat/completions``, plain and SSE-streamed.

Works with OpenAI-compatible servers (vLLM, llama.cpp server, Ollama, gateways) through
``base_url``: a custom ``base_url`` needs no key, and never receives ``OPENAI_API_KEY`` from
the environment (pass ``api_key=`` explicitly if the server wants one). The key goes in the
``Authorization: Bearer`` header.

Differences by endpoint: the default endpoint gets ``max_completion_tokens`` (what current
OpenAI models require); other servers get the older ``max_tokens`` that they understand.
Streams ask for usage with ``stream_options.include_usage`` (turn off with
``stream_usage=False`` for servers that reject it) and end at ``data: [DONE]``; tool-call
fragments are matched by ``index``. Native structured output uses ``response_format``
``json_schema``, with ``strict`` on exactly when the schema meets OpenAI's strict rules;
``schema_format="json_object"`` sends ``{"type": "json_object", "schema": ...}`` instead, the
only form llama-cpp-python's server accepts.

What compatible servers taught us (see docs/providers.md): an assistant turn that holds only
tool calls is sent with ``"content": ""`` (llama-cpp-python rejects ``null``; pass
``tool_call_content=None`` for gateways that reject an empty string); a stream that ends
without a finish reason is an ``IncompleteGenerationError`` (llama-cpp-python ends an
interrupted stream with a bare ``[DONE]``); llama.cpp's ``exceed_context_size_error`` is a
``ContextLengthError``; a 5xx whose body says the request failed validation is an
``InvalidRequestError`` (not retried), and its message quotes the server, redacted.

Reasoning: ``reasoning_effort=`` is sent as is (``thinking_budget`` is rejected before
sending). Compatible servers that return the model's thinking as ``reasoning_content`` (or
``reasoning``) in messages or stream deltas (DeepSeek, vLLM, llama.cpp server) give a
``ReasoningPart``; Chat Completions never sends reasoning back (the API has no standard input
field for it). ``completion_tokens_details.reasoning_tokens`` is counted as ``reasoning_tokens``.

Rate limits: ``x-ratelimit-*`` headers pace the account's limiter (``rate_limits``); a 429's
``retry-after-ms`` wins over ``Retry-After``. The Batch API (``lf.engines.ProviderBatch``)
is ``OpenAIWire``, at the end of this module.

The Responses API model, ``OpenAIResponses`` (``lf.llms.OpenAIResponses``), lives in
``openai_responses.py``, which builds on this module (never the other way round).
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from ..errors import (
    ContentFilteredError,
    EmptyGenerationError,
    GenerationError,
    IncompleteGenerationError,
    InvalidRequestError,
    StreamProtocolError,
    UnsupportedCapabilityError,
)
from ..messages import (
    AIMessage,
    Message,
    Part,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)
from ..modalities import Mime
from ..redact import REDACTED, redact_secrets
from ._http import (
    MALFORMED,
    HTTPModel,
    StreamDecoder,
    json_object,
    load_object,
)
from ._http_errors import ErrorInfo, safe_code
from .base import Capabilities, LMRequest
from .batch_wire import (
    FIND_SKEW_S,
    MB,
    Outcome,
    Polled,
    Wire,
    counts,
    obj,
    outcomes,
)
from .ratelimit import Limits, header_limit, parse_retry_after
from .streaming import (
    StreamAccumulator,
    StreamChunk,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    billed_answer,
)

__all__ = ["OpenAI", "OpenAIWire", "rate_limits"]

_OK = frozenset({"stop", "tool_calls", "function_call"})
# llama.cpp's server: {"error": {"type": "exceed_context_size_error", "message": "the request
# exceeds the available context size, ..."}}; OpenAI and vLLM: context_length_exceeded.
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_MESSAGES = ("maximum context length", "exceeds the available context size")
# A 5xx that is really a rejected request (llama-cpp-python answers a body that fails its
# pydantic validation with HTTP 500 and the validation text): retrying cannot help.
_INVALID_5XX = re.compile(r"validation error|Input should be|Field required", re.IGNORECASE)


class OpenAI(HTTPModel):
    """Chat Completions models at OpenAI or any OpenAI-compatible server."""

    provider: ClassVar[str] = "openai"
    otel_provider: ClassVar[str | None] = "openai"
    genai_prices_provider: ClassVar[str | None] = "openai"
    capabilities: ClassVar[Capabilities] = Capabilities(
        modalities=frozenset({"image"}),
        tools=True,
        native_schema=True,
        reasoning=frozenset({"reasoning_effort"}),
    )
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    env_vars: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def __init__(
        self,
        model: str,
        *,
        stream_usage: bool = True,
        schema_format: Literal["json_schema", "json_object"] = "json_schema",
        tool_call_content: Literal[""] | None = "",
        **kw: Any,
    ) -> None:
        super().__init__(model, **kw)
        if schema_format not in ("json_schema", "json_object"):
            raise ValueError("schema_format must be 'json_schema' or 'json_object'")
        if tool_call_content not in ("", None):
            raise ValueError("tool_call_content must be '' or None")
        self.stream_usage = stream_usage
        self.schema_format = schema_format
        self.tool_call_content = tool_call_content

    def cache_identity(self) -> dict[str, Any]:
        out = super().cache_identity()
        if self.schema_format != "json_schema":
            out["schema_format"] = self.schema_format
        return out

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def _error_info(self, status: int, body: Any) -> ErrorInfo:
        err = body.get("error")
        if not isinstance(err, dict):
            return ErrorInfo()
        code = safe_code(err.get("code")) or safe_code(err.get("type"))
        text = str(err.get("message", ""))
        message = text.lower()
        context = code in _CONTEXT_CODES or any(m in message for m in _CONTEXT_MESSAGES)
        auth = code in ("invalid_api_key", "invalid_authentication")
        if status >= 500 and _INVALID_5XX.search(text):
            return ErrorInfo(code, invalid=True, detail=self._redact(text))
        return ErrorInfo(code, context_length=context, auth=auth)

    def _rate_limits(self, headers: Mapping[str, str]) -> Limits:
        return rate_limits(headers)

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        return parse_retry_after(headers, ms="retry-after-ms")

    def batch_wire(self, read_limit: int) -> Wire | None:
        """The Batch API of this model's account (``lf.engines.ProviderBatch``)."""
        return OpenAIWire(self, read_limit)

    def _redact(self, text: str) -> str:
        """A server's error text fit to show: credentials masked, at most 300 characters."""
        key = getattr(self._key, "_value", None)
        if isinstance(key, str) and key:
            text = text.replace(key, REDACTED)
        text = " ".join(redact_secrets(text).split())
        return text if len(text) <= 300 else text[:299] + "…"

    def check_capabilities(self, request: LMRequest) -> None:
        super().check_capabilities(request)
        if request.options.top_k is not None and self.uses_default_endpoint:
            raise UnsupportedCapabilityError(f"{self.model_id}: OpenAI has no top_k option")

    # -- encoding --------------------------------------------------------------------------
    def encode(self, request: LMRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body for a request (no I/O; raises before sending on bad input)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        # A tool message holds text only: images a tool returned follow the batch's last tool
        # message in one user message (one in between would split the batch, which OpenAI
        # refuses), each introduced by the call it came from.
        tool_images: list[dict[str, Any]] = []
        for turn in request.messages:
            if isinstance(turn, ToolMessage):
                part = turn.parts[0]
                assert isinstance(part, ToolResultPart)
                messages.append(
                    {"role": "tool", "tool_call_id": part.call_id, "content": part.content}
                )
                tool_images.extend(_tool_images(part, turn.parts[1:]))
                continue
            if tool_images:
                messages.append({"role": "user", "content": tool_images})
                tool_images = []
            if isinstance(turn, AIMessage):
                messages.append(self._assistant(turn))
            elif isinstance(turn, UserMessage):
                messages.extend(self._user(turn))
            else:
                raise InvalidRequestError(f"openai: cannot send a {turn.role!r} turn")
        if tool_images:
            messages.append({"role": "user", "content": tool_images})
        o = request.options
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if o.max_tokens is not None:
            key = "max_completion_tokens" if self.uses_default_endpoint else "max_tokens"
            body[key] = o.max_tokens
        for key, value in (
            ("temperature", o.temperature),
            ("top_p", o.top_p),
            ("top_k", o.top_k),
            ("seed", o.seed),
        ):
            if value is not None:
                body[key] = value
        if o.stop:
            body["stop"] = list(o.stop)
        if o.reasoning_effort is not None:
            body["reasoning_effort"] = o.reasoning_effort
        if o.prompt_cache_key is not None:
            body["prompt_cache_key"] = o.prompt_cache_key
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.input_schema),
                    },
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = tool_choice(request, nested=True)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            if self.schema_format == "json_object":
                body["response_format"] = {"type": "json_object", "schema": schema}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": schema_name(schema),
                        "schema": schema,
                        "strict": strict_ok(schema),
                    },
                }
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _assistant(self, turn: Message[Any]) -> dict[str, Any]:
        self._own_continuation(turn)  # rejects another model's data; OpenAI needs none back
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                text.append(p.text)
            elif isinstance(p, ToolCall):
                calls.append(
                    {
                        "id": p.id,
                        "type": "function",
                        "function": {
                            "name": p.name,
                            "arguments": json.dumps(p.args, ensure_ascii=False),
                        },
                    }
                )
            elif p.kind not in ("continuation", "reasoning"):  # reasoning is never sent back
                raise UnsupportedCapabilityError(
                    f"openai: an assistant turn cannot hold a {p.kind} part"
                )
        content = "".join(text) if text else None
        if content is None and calls:
            content = self.tool_call_content
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            out["tool_calls"] = calls
        return out

    def _user(self, turn: Message[Any]) -> list[dict[str, Any]]:
        if all(isinstance(p, TextPart) for p in turn.parts):
            return [{"role": "user", "content": turn.text}]
        content: list[dict[str, Any]] = []
        extra: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                content.append({"type": "text", "text": p.text})
            elif isinstance(p, Mime):
                content.append(_image_url(p))
            elif isinstance(p, ToolResultPart):
                extra.append({"role": "tool", "tool_call_id": p.call_id, "content": p.content})
            else:
                raise InvalidRequestError(f"openai: a user turn cannot hold a {p.kind} part")
        return [*extra, {"role": "user", "content": content}] if content else extra

    # -- calls -----------------------------------------------------------------------------
    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        data = await self._post_json(f"{self.base_url}/chat/completions", self.encode(request))
        return self.decode(data)

    def decode(self, data: Any) -> AIMessage[Any]:
        """The message of a parsed (non-streamed) chat completion, checked as an online
        answer is (finish reason, refusal); a provider batch's answers go through here."""
        if not isinstance(data, dict):
            raise StreamProtocolError("openai: response is not a JSON object")
        state = _State(self)
        try:
            state.meta(data)
            choices = data.get("choices") or []
            choice = next((c for c in choices if c.get("index", 0) == 0), None)
            if choice is not None:
                message = choice.get("message") or {}
                if message.get("refusal"):
                    state.refused = True
                state.reasoning_delta(message)
                state.close_reasoning()
                if message.get("content"):
                    state.acc.text(str(message["content"]))
                for i, call in enumerate(message.get("tool_calls") or ()):
                    state.tool_delta({**call, "index": i})
                state.close_calls()
                state.finish_reason = choice.get("finish_reason")
            return _final(state).aggregated
        except MALFORMED as exc:
            raise StreamProtocolError("openai: malformed response") from exc

    def _stream_request(self, request: LMRequest) -> tuple[str, dict[str, Any]]:
        return f"{self.base_url}/chat/completions", self.encode(request, stream=True)

    def _stream_decoder(self) -> StreamDecoder:
        return _State(self)


def rate_limits(headers: Mapping[str, str]) -> Limits:
    """``x-ratelimit-{remaining,reset,limit}-{requests,tokens}``: what remains of each
    limit, when it resets (a duration: ``1s``, ``6m0s``, ``20ms``) and its size."""
    return {
        kind: header_limit(
            headers,
            f"x-ratelimit-remaining-{kind}",
            f"x-ratelimit-reset-{kind}",
            f"x-ratelimit-limit-{kind}",
        )
        for kind in ("requests", "tokens")
    }


def schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str) and safe_code(title) and len(title) <= 64 and "." not in title:
        return title
    return "response"


def strict_ok(schema: Any) -> bool:
    """OpenAI strict mode: every object closed (additionalProperties false), all required."""
    if isinstance(schema, list):
        return all(strict_ok(s) for s in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(props):
            return False
    return all(strict_ok(v) for k, v in schema.items() if isinstance(v, (Mapping, list)))


class _State:
    """One Chat Completions answer: chunks from a streamed response (the ``StreamDecoder``
    methods ``event``/``done``/``finish``) or from a whole one (``_sample``)."""

    def __init__(self, lm: OpenAI) -> None:
        self.lm = lm
        self.done = False  # [DONE] arrived
        self.acc = StreamAccumulator(lm.model_id)
        self.calls: dict[int, dict[str, Any]] = {}  # index -> {id, name, args: [str], started}
        self.finish_reason: str | None = None
        self.refused = False
        self.refusal_pieces = 0
        self.usage: dict[str, Any] | None = None
        self.id: str | None = None
        self.model: str | None = None  # the model the server answered with
        self.fingerprint: str | None = None
        self.reasoning: list[str] = []  # pieces of reasoning_content not yet in a part

    def reasoning_delta(self, delta: dict[str, Any]) -> None:
        """Collect a compatible server's ``reasoning_content`` (or ``reasoning``) text."""
        piece = delta.get("reasoning_content")
        if piece is None:
            piece = delta.get("reasoning")
        if isinstance(piece, str) and piece:
            self.reasoning.append(piece)

    def close_reasoning(self) -> None:
        if self.reasoning:
            self.acc.add_part(self.lm._reasoning("".join(self.reasoning)))
            self.reasoning = []

    def meta(self, data: dict[str, Any]) -> None:
        if self.id is None and data.get("id"):
            self.id = str(data["id"])
        if self.model is None and data.get("model"):
            self.model = str(data["model"])
        if data.get("system_fingerprint"):
            self.fingerprint = str(data["system_fingerprint"])
        if isinstance(data.get("usage"), dict):
            self.usage = data["usage"]

    def event(self, name: str, data: bytes) -> list[StreamChunk]:
        if data == b"[DONE]":
            self.done = True
            return []
        parsed = load_object(data)
        return self.chunk(parsed)

    def finish(self) -> list[StreamChunk]:
        if not self.done and self.finish_reason is None:
            raise StreamProtocolError("openai: the stream ended before [DONE]")
        self.close_reasoning()
        return [*self.close_calls(), _final(self)]

    def chunk(self, data: dict[str, Any]) -> list[StreamChunk]:
        if "error" in data:  # compatible servers report failures in-stream this way
            self.lm._raise_in_stream_error(data)
        self.meta(data)
        out: list[StreamChunk] = []
        for choice in data.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("refusal"):
                self.refused = True
            self.reasoning_delta(delta)
            text = delta.get("content")
            if text or delta.get("tool_calls"):
                self.close_reasoning()
            if text:
                out.append(self.acc.text(str(text)))
            for call in delta.get("tool_calls") or ():
                chunk = self.tool_delta(call)
                if chunk is not None:
                    out.append(chunk)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def tool_delta(self, call: dict[str, Any]) -> StreamChunk | None:
        index = call.get("index", 0)
        if not isinstance(index, int):
            raise StreamProtocolError("openai: tool call delta without an index")
        fn = call.get("function") or {}
        state = self.calls.get(index)
        if state is None:
            state = self.calls[index] = {"id": None, "name": None, "args": [], "started": False}
        if call.get("id") and state["id"] is None:
            state["id"] = str(call["id"])
        if fn.get("name") and state["name"] is None:
            state["name"] = str(fn["name"])
        events: list[Any] = []
        if not state["started"] and state["name"] is not None:
            if state["id"] is None:  # some compatible servers send no id
                state["id"] = f"call_{uuid.uuid4().hex[:16]}"
            state["started"] = True
            events.append(ToolCallStart(state["id"], state["name"]))
            if state["args"]:
                events.append(ToolCallDelta(state["id"], "".join(state["args"])))
        fragment = fn.get("arguments")
        if fragment:
            state["args"].append(str(fragment))
            if state["started"]:
                events.append(ToolCallDelta(state["id"], str(fragment)))
        return self.acc.events(*events) if events else None

    def close_calls(self) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        for index in sorted(self.calls):
            state = self.calls.pop(index)
            if not state["started"]:
                raise StreamProtocolError("openai: a tool call arrived without a name")
            args = json_object("".join(state["args"]), "openai tool call arguments")
            out.append(self.acc.events(ToolCallEnd(ToolCall(state["id"], state["name"], args))))
        return out


def _final(state: _State) -> StreamChunk:
    with billed_answer(state.acc, _usage(state.usage), state.finish_reason):
        return _checked_final(state)


def _checked_final(state: _State) -> StreamChunk:
    reason = state.finish_reason
    code = safe_code(reason) or "unknown"
    if state.refused:
        raise ContentFilteredError("openai: the model refused (refusal)")
    if reason is None:  # e.g. llama-cpp-python ends a stream it interrupts with a bare [DONE]
        raise IncompleteGenerationError("openai: the answer ended without a finish reason")
    if reason == "length":
        raise IncompleteGenerationError("openai: output truncated (length)")
    if reason == "content_filter":
        raise ContentFilteredError("openai: response blocked (content_filter)")
    if reason not in _OK:
        raise GenerationError(f"openai: generation stopped ({code})")
    calls = state.acc.tool_calls
    if not calls and not state.acc.has_text:
        raise EmptyGenerationError("openai: the model returned no text and no tool calls")
    data: dict[str, Any] = {"id": state.id}
    if state.fingerprint:
        data["system_fingerprint"] = state.fingerprint
    state.acc.add_part(state.lm._continuation(data))
    metadata: dict[str, Any] = {"provider_finish_reason": reason}
    if state.id:
        metadata["response_id"] = state.id
    if state.model:
        metadata["response_model"] = state.model
    return state.acc.finish(
        usage=_usage(state.usage),
        finish_reason="tool_calls" if calls else "stop",
        metadata=metadata,
    )


def _usage(u: dict[str, Any] | None) -> Usage | None:
    if not u:
        return None
    prompt_details = u.get("prompt_tokens_details") or {}
    completion_details = u.get("completion_tokens_details") or {}
    return Usage(
        prompt_tokens=u.get("prompt_tokens"),
        completion_tokens=u.get("completion_tokens"),
        total_tokens=u.get("total_tokens"),
        cached_tokens=prompt_details.get("cached_tokens"),
        reasoning_tokens=completion_details.get("reasoning_tokens"),
    )


def tool_choice(request: LMRequest, *, nested: bool) -> Any:
    """OpenAI's ``tool_choice``; Chat Completions nests a named tool under ``function``, the
    Responses API does not."""
    choice = request.tool_choice
    if choice in ("auto", "none"):
        return choice
    if choice == "any":
        return "required"
    if choice in {t.name for t in request.tools}:
        return (
            {"type": "function", "function": {"name": choice}}
            if nested
            else {"type": "function", "name": choice}
        )
    raise InvalidRequestError(f"openai: tool_choice names unknown tool {choice!r}")


def _image_url(p: Mime) -> dict[str, Any]:
    url = p.uri if p.data is None else f"data:{p.mime_type};base64,{p.to_base64()}"
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_images(result: ToolResultPart, parts: Sequence[Part]) -> list[dict[str, Any]]:
    """The images among a tool message's extra parts, as user content introduced by the call
    they came from (other media stay described in the tool's text)."""
    images = [_image_url(p) for p in parts if isinstance(p, Mime) and p.kind == "image"]
    if not images:
        return []
    intro = f"Image{'s' if len(images) > 1 else ''} returned by tool call {result.call_id}"
    intro += f" ({result.name}):" if result.name else ":"
    return [{"type": "text", "text": intro}, *images]


# -- the Batch API ---------------------------------------------------------------------------
#: The member of a batch's ``metadata`` holding its create's marker.
MARKER_KEY = "langfx_nb_batch"

#: A succeeded result line, by its start: ``{"id": "...", "custom_id": "...",
#: "response": {"status_code": 200`` (the members in the Batch API's order; group 1 is the
#: custom id). Anchored at the line's first brace, it can only match top-level members.
_OK_LINE = re.compile(
    rb'\s*\{\s*"id"\s*:\s*"[^"\\]*"\s*,\s*"custom_id"\s*:\s*"([^"\\]*)"\s*,'
    rb'\s*"response"\s*:\s*\{\s*"status_code"\s*:\s*200\s*[,}]'
)


class OpenAIWire(Wire):
    """The OpenAI Batch API (see ``llms/batch_wire.py`` for what every wire keeps to).

    A JSONL file (``{custom_id, method: "POST", url: "/v1/chat/completions", body}`` per
    line) uploaded to ``POST /files`` with ``purpose=batch``; ``POST /batches
    {input_file_id, endpoint, completion_window: "24h", metadata}`` (the create's marker in
    ``metadata``, ``MARKER_KEY``); ``GET /batches/{id}`` until ``status`` is
    ``completed``/``failed``/``expired``/``cancelled``; ``GET
    /files/{output_file_id|error_file_id}/content`` (either may be null);
    ``POST /batches/{id}/cancel``. At most 50,000 requests and 200 MB per batch. A
    succeeded result line is known by its start (``_OK_LINE``) and parsed when read."""

    model: OpenAI
    name = "openai"
    max_requests = 50_000
    max_bytes = 200 * MB
    endpoint = "/v1/chat/completions"

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        row = {"custom_id": custom_id, "method": "POST", "url": self.endpoint}
        row["body"] = self.body(request)  # type: ignore[assignment]
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes], marker: str) -> str:
        base = self.model.base_url
        with tempfile.TemporaryFile() as data:  # the JSONL streams from disk, 64 KiB at a time
            for entry in entries:
                data.write(entry)
                data.write(b"\n")
            data.seek(0)
            file = await self._json(
                "POST",
                f"{base}/files",
                files={"file": ("batch.jsonl", data, "application/jsonl")},
                data={"purpose": "batch"},
                resend=False,
            )
        created = await self._json(
            "POST",
            f"{base}/batches",
            body={
                "input_file_id": file["id"],
                "endpoint": self.endpoint,
                "completion_window": "24h",
                "metadata": {MARKER_KEY: marker},
            },
            resend=False,
        )
        return str(created["id"])

    async def find(self, marker: str, requests: int, since: float) -> list[str]:
        found: list[str] = []
        async for batch in self._listing(f"{self.model.base_url}/batches", "last_id", "after"):
            if obj(batch.get("metadata")).get(MARKER_KEY) == marker:
                found.append(str(batch.get("id")))
            created = batch.get("created_at")
            if isinstance(created, (int, float)) and created < since - FIND_SKEW_S:
                break
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/batches/{batch_id}")
        status = str(data.get("status"))
        said = counts(data.get("request_counts"))
        ended = status in ("completed", "failed", "expired", "cancelled")
        return Polled(ended, status, said, data)

    def progress(self, counts: dict[str, int], n: int) -> dict[str, int]:
        done, failed = counts.get("completed", 0), counts.get("failed", 0)
        return {"succeeded": done, "errored": failed, "processing": max(0, n - done - failed)}

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        if polled.status == "failed":  # the whole batch was refused (validation)
            errors = obj(polled.raw.get("errors")).get("data")
            first = obj(errors[0]) if isinstance(errors, list) and errors else {}
            message = str(first.get("message") or "the batch failed validation")
            return {"*": self.failed("errored", message)}
        for key in ("output_file_id", "error_file_id"):
            file_id = polled.raw.get(key)
            if not file_id or not isinstance(file_id, str):
                continue
            raw = await self._request("GET", f"{self.model.base_url}/files/{file_id}/content")
            out.update(outcomes(raw, _OK_LINE, ("response", "body"), self._outcome))
        # a request with no line in either file: in an expired or cancelled batch it never
        # ran (the Batch API writes no line for some of them); else see provider._batch
        if polled.status == "expired":
            out.setdefault("*", Outcome(failure="expired", message="the batch expired"))
        elif polled.status == "cancelled":
            out.setdefault("*", Outcome(failure="canceled", message="the batch was cancelled"))
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._json("POST", f"{self.model.base_url}/batches/{batch_id}/cancel", body={})

    def _outcome(self, row: dict[str, Any], raw: bytes) -> Outcome:
        response = row.get("response")
        if response is not None and not isinstance(response, dict):
            raise TypeError("response is not an object")
        if response and response.get("status_code") == 200:
            return Outcome(raw=raw, path=("response", "body"))
        error = obj(row.get("error"))
        code = str(error.get("code") or "")
        if response:
            detail = obj(obj(response.get("body")).get("error"))
            message = f"HTTP {response.get('status_code')}: {detail.get('message') or ''}"
            return self.failed("errored", message)
        if code == "batch_expired":
            return Outcome(failure="expired", message="the batch expired before this request ran")
        if code == "batch_cancelled":
            return Outcome(failure="canceled", message="the batch was cancelled")
        return self.failed("errored", str(error.get("message") or code))
