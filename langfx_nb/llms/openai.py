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
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
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
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResultPart,
    Usage,
    UserMessage,
)
from ..modalities import Mime
from ._http import (
    MALFORMED,
    ErrorInfo,
    HTTPModel,
    StreamDecoder,
    error_from_status,
    json_object,
    load_object,
    safe_code,
)
from .base import Capabilities, LMRequest
from .streaming import StreamAccumulator, StreamChunk, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = ["OpenAI", "OpenAIResponses"]

_OK = frozenset({"stop", "tool_calls", "function_call"})
# llama.cpp's server: {"error": {"type": "exceed_context_size_error", "message": "the request
# exceeds the available context size, ..."}}; OpenAI and vLLM: context_length_exceeded.
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
_CONTEXT_MESSAGES = ("maximum context length", "exceeds the available context size")
# A 5xx that is really a rejected request (llama-cpp-python answers a body that fails its
# pydantic validation with HTTP 500 and the validation text): retrying cannot help.
_INVALID_5XX = re.compile(r"validation error|Input should be|Field required", re.IGNORECASE)
_SECRETS = re.compile(
    r"(\bbearer\s+|(?:api[_-]?key|token|secret|password|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"(?:bearer\s+)?[^\s\"',}]+|\bsk-[A-Za-z0-9_\-]{6,}",
    re.IGNORECASE,
)


class OpenAI(HTTPModel):
    """Chat Completions models at OpenAI or any OpenAI-compatible server."""

    provider: ClassVar[str] = "openai"
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

    def _redact(self, text: str) -> str:
        """A server's error text fit to show: credentials masked, at most 300 characters."""
        key = getattr(self._key, "_value", None)
        if isinstance(key, str) and key:
            text = text.replace(key, "<redacted>")
        text = _SECRETS.sub(lambda m: f"{m.group(1) or ''}<redacted>", text)
        text = " ".join(text.split())
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
        for turn in request.messages:
            if isinstance(turn, AIMessage):
                messages.append(self._assistant(turn))
            elif isinstance(turn, ToolMessage):
                part = turn.parts[0]
                assert isinstance(part, ToolResultPart)
                messages.append(
                    {"role": "tool", "tool_call_id": part.call_id, "content": part.content}
                )
            elif isinstance(turn, UserMessage):
                messages.extend(self._user(turn))
            else:
                raise InvalidRequestError(f"openai: cannot send a {turn.role!r} turn")
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
            body["tool_choice"] = _tool_choice(request, nested=True)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            if self.schema_format == "json_object":
                body["response_format"] = {"type": "json_object", "schema": schema}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": _schema_name(schema),
                        "schema": schema,
                        "strict": _strict_ok(schema),
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
                url = p.uri if p.data is None else f"data:{p.mime_type};base64,{p.to_base64()}"
                content.append({"type": "image_url", "image_url": {"url": url}})
            elif isinstance(p, ToolResultPart):
                extra.append({"role": "tool", "tool_call_id": p.call_id, "content": p.content})
            else:
                raise InvalidRequestError(f"openai: a user turn cannot hold a {p.kind} part")
        return [*extra, {"role": "user", "content": content}] if content else extra

    # -- calls -----------------------------------------------------------------------------
    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        data = await self._post_json(f"{self.base_url}/chat/completions", self.encode(request))
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


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str) and safe_code(title) and len(title) <= 64 and "." not in title:
        return title
    return "response"


def _strict_ok(schema: Any) -> bool:
    """OpenAI strict mode: every object closed (additionalProperties false), all required."""
    if isinstance(schema, list):
        return all(_strict_ok(s) for s in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(props):
            return False
    return all(_strict_ok(v) for k, v in schema.items() if isinstance(v, (Mapping, list)))


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


# -- the Responses API ---------------------------------------------------------------------
_RESPONSE_ITEMS = frozenset({"message", "function_call", "reasoning"})


class OpenAIResponses(OpenAI):
    """OpenAI's Responses API (``POST {base_url}/responses``), the second OpenAI mode.

    Stateless by default (``store=False``). The answer's raw output items (messages,
    function calls, reasoning) are the continuation data and go back as input items on the
    next turn to the same model and endpoint; reasoning items are only sent back when they
    carry ``encrypted_content`` (ask for it with
    ``extra_body={"include": ["reasoning.encrypted_content"]}``), since a stateless server
    cannot resolve them otherwise. Streams end at ``response.completed`` (or
    ``response.incomplete`` / ``response.failed``); the final message is built from that
    terminal response, the deltas before it are for display.

    Reasoning: ``reasoning_effort=`` sends ``reasoning: {effort, summary: "auto"}`` and, when
    stateless, ``include: ["reasoning.encrypted_content"]`` so the reasoning can go back.
    Each ``reasoning`` output item becomes a ``ReasoningPart`` (its summary texts joined by a
    blank line, ``encrypted_content`` as the signature, the item id); in a stream it joins
    the message when its ``response.output_item.done`` arrives.
    """

    def __init__(self, model: str, *, store: bool = False, **kw: Any) -> None:
        super().__init__(model, **kw)
        self.store = store

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(), "api": "responses"}

    def encode(self, request: LMRequest, *, stream: bool = False) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for turn in request.messages:
            if isinstance(turn, AIMessage):
                items.extend(self._assistant_items(turn))
            elif isinstance(turn, (UserMessage, ToolMessage)):
                items.extend(self._user_items(turn))
            else:
                raise InvalidRequestError(f"openai: cannot send a {turn.role!r} turn")
        o = request.options
        body: dict[str, Any] = {"model": self.model, "input": items, "store": self.store}
        if request.system:
            body["instructions"] = request.system
        if o.max_tokens is not None:
            body["max_output_tokens"] = o.max_tokens
        for key, value in (("temperature", o.temperature), ("top_p", o.top_p)):
            if value is not None:
                body[key] = value
        if o.stop or o.seed is not None or o.top_k is not None:
            raise UnsupportedCapabilityError(
                f"{self.model_id}: the Responses API has no stop, seed or top_k option"
            )
        if o.reasoning_effort is not None:
            body["reasoning"] = {"effort": o.reasoning_effort, "summary": "auto"}
            if not self.store:
                body["include"] = ["reasoning.encrypted_content"]
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.input_schema),
                    "strict": _strict_ok(t.input_schema),
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request, nested=False)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": _schema_name(schema),
                    "schema": schema,
                    "strict": _strict_ok(schema),
                }
            }
        if stream:
            body["stream"] = True
        return body

    def _assistant_items(self, turn: Message[Any]) -> list[dict[str, Any]]:
        cont = self._own_continuation(turn)
        raw = cont.data.get("output") if cont is not None else None
        if isinstance(raw, list):
            out = []
            for item in raw:
                kind = item.get("type")
                if kind == "reasoning":
                    if self.store or item.get("encrypted_content"):
                        out.append(dict(item))
                    continue
                # ids refer to stored items; by value they are not needed
                out.append({k: v for k, v in item.items() if self.store or k != "id"})
            return out
        items: list[dict[str, Any]] = []
        for p in turn.parts:  # reasoning goes first, as the model produced it
            if not isinstance(p, ReasoningPart) or not self._own_reasoning(p):
                continue
            # a stateless server can only resolve reasoning that carries its encrypted content
            if (self.store and p.id) or p.signature:
                items.append(_reasoning_item(p))
        text = [p.text for p in turn.parts if isinstance(p, TextPart)]
        if text:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "".join(text)}],
                }
            )
        for p in turn.parts:
            if isinstance(p, ToolCall):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": p.id,
                        "name": p.name,
                        "arguments": json.dumps(p.args, ensure_ascii=False),
                    }
                )
            elif not isinstance(p, TextPart) and p.kind not in ("continuation", "reasoning"):
                raise UnsupportedCapabilityError(
                    f"openai: an assistant turn cannot hold a {p.kind} part"
                )
        return items

    def _user_items(self, turn: Message[Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                content.append({"type": "input_text", "text": p.text})
            elif isinstance(p, Mime):
                url = p.uri if p.data is None else f"data:{p.mime_type};base64,{p.to_base64()}"
                content.append({"type": "input_image", "image_url": url})
            elif isinstance(p, ToolResultPart):
                items.append(
                    {"type": "function_call_output", "call_id": p.call_id, "output": p.content}
                )
            else:
                raise InvalidRequestError(f"openai: a user turn cannot hold a {p.kind} part")
        if content:
            items.append({"role": "user", "content": content})
        return items

    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        data = await self._post_json(f"{self.base_url}/responses", self.encode(request))
        state = _ResponsesState(self)
        try:
            return state.final(data)[-1].aggregated
        except MALFORMED as exc:
            raise StreamProtocolError("openai: malformed response") from exc

    def _stream_request(self, request: LMRequest) -> tuple[str, dict[str, Any]]:
        return f"{self.base_url}/responses", self.encode(request, stream=True)

    def _stream_decoder(self) -> StreamDecoder:
        return _ResponsesState(self)


def _reasoning_item(p: ReasoningPart) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": p.text}] if p.text else [],
    }
    if p.id:
        item["id"] = p.id
    if p.signature:
        item["encrypted_content"] = p.signature
    return item


class _ResponsesState:
    """One Responses API answer. Streamed (the ``StreamDecoder`` methods), the deltas are for
    display and the final message is built from the terminal event's whole response."""

    def __init__(self, lm: OpenAIResponses) -> None:
        self.lm = lm
        self.acc = StreamAccumulator(lm.model_id)
        self.calls: dict[str, tuple[str, str]] = {}  # item id -> (call id, name)
        self.streamed_text = False
        self.terminal: dict[str, Any] | None = None
        self.reasoning_added = 0  # reasoning items already in the message (streamed)

    @property
    def done(self) -> bool:
        return self.terminal is not None

    def event(self, name: str, data: bytes) -> list[StreamChunk]:
        parsed = load_object(data)
        chunk = self.data(parsed)
        return [chunk] if chunk is not None else []

    def finish(self) -> list[StreamChunk]:
        if self.terminal is None:
            raise StreamProtocolError("openai: the stream ended before response.completed")
        return self.final(self.terminal)

    def data(self, data: dict[str, Any]) -> StreamChunk | None:
        kind = data.get("type")
        if kind == "response.output_text.delta":
            delta = str(data.get("delta") or "")
            self.streamed_text = True
            return self.acc.text(delta) if delta else None
        if kind == "response.function_call_arguments.delta":
            call = self.calls.get(str(data.get("item_id")))
            delta = str(data.get("delta") or "")
            if call is None or not delta:
                return None
            return self.acc.events(ToolCallDelta(call[0], delta))
        if kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call":
                call_id, name = str(item.get("call_id") or ""), str(item.get("name") or "")
                if not call_id or not name:
                    raise StreamProtocolError("openai: function_call item without id or name")
                self.calls[str(item.get("id"))] = (call_id, name)
                return self.acc.events(ToolCallStart(call_id, name))
            return None
        if kind == "response.output_item.done":
            item = data.get("item") or {}
            if item.get("type") == "reasoning":
                self.add_reasoning(item)
            return None
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            response = data.get("response")
            if not isinstance(response, dict):
                raise StreamProtocolError(f"openai: {kind} without a response")
            self.terminal = response
            return None
        if kind == "error":
            code = safe_code(data.get("code")) or safe_code(data.get("type"))
            raise error_from_status(
                "openai", _RESPONSES_ERROR_STATUS.get(code or "", 500), ErrorInfo(code)
            )
        # other events (created, in_progress, reasoning summary deltas, *.done...) add nothing:
        # a reasoning item joins the message whole, at its output_item.done
        return None

    def add_reasoning(self, item: dict[str, Any]) -> None:
        self.reasoning_added += 1
        item_id = item.get("id")
        texts = [str(s.get("text") or "") for s in item.get("summary") or () if isinstance(s, dict)]
        encrypted = item.get("encrypted_content")
        self.acc.add_part(
            self.lm._reasoning(
                "\n\n".join(t for t in texts if t),
                encrypted if isinstance(encrypted, str) and encrypted else None,
                id=item_id if isinstance(item_id, str) and item_id else None,
            )
        )

    def final(self, response: Any) -> list[StreamChunk]:
        """The closing chunks (completed tool calls, then the final marker)."""
        if not isinstance(response, dict):
            raise StreamProtocolError("openai: response is not a JSON object")
        status = response.get("status")
        if status == "failed" or isinstance(response.get("error"), dict):
            err = response.get("error") or {}
            code = safe_code(err.get("code"))
            raise error_from_status(
                "openai", _RESPONSES_ERROR_STATUS.get(code or "", 500), ErrorInfo(code)
            )
        output = response.get("output") or []
        reasoning_index = 0
        refused = False
        text_parts: list[str] = []
        calls: list[ToolCall] = []
        for item in output:
            kind = item.get("type")
            if kind not in _RESPONSE_ITEMS:
                name = safe_code(kind) or "unknown"
                raise StreamProtocolError(f"openai: unsupported output item type {name!r}")
            if kind == "message":
                for part in item.get("content") or ():
                    ptype = part.get("type")
                    if ptype == "output_text":
                        text_parts.append(str(part.get("text") or ""))
                    elif ptype == "refusal":
                        refused = True
                    else:
                        name = safe_code(ptype) or "unknown"
                        raise StreamProtocolError(f"openai: unsupported content type {name!r}")
            elif kind == "reasoning":
                reasoning_index += 1
                if reasoning_index > self.reasoning_added:  # not yet added from the stream
                    self.add_reasoning(item)
            elif kind == "function_call":
                args = json_object(str(item.get("arguments") or ""), "openai function arguments")
                calls.append(ToolCall(str(item["call_id"]), str(item["name"]), args))
        if refused:
            raise ContentFilteredError("openai: the model refused (refusal)")
        if status == "incomplete":
            reason = safe_code((response.get("incomplete_details") or {}).get("reason"))
            if reason == "content_filter":
                raise ContentFilteredError("openai: response blocked (content_filter)")
            raise IncompleteGenerationError(f"openai: output truncated ({reason or 'unknown'})")
        text = "".join(text_parts)
        if not self.streamed_text and text:
            self.acc.text(text)
        out = [self.acc.events(ToolCallEnd(call)) for call in calls]
        if not calls and not text:
            raise EmptyGenerationError("openai: the model returned no text and no tool calls")
        self.acc.add_part(
            self.lm._continuation({"id": response.get("id"), "api": "responses", "output": output})
        )
        usage = response.get("usage") or {}
        out.append(self._finish(response, usage, calls))
        return out

    def _finish(self, response: dict[str, Any], usage: Any, calls: list[ToolCall]) -> StreamChunk:
        return self.acc.finish(
            usage=Usage(
                prompt_tokens=usage.get("input_tokens"),
                completion_tokens=usage.get("output_tokens"),
                total_tokens=usage.get("total_tokens"),
                cached_tokens=(usage.get("input_tokens_details") or {}).get("cached_tokens"),
                reasoning_tokens=(usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
            )
            if usage
            else None,
            finish_reason="tool_calls" if calls else "stop",
            metadata={
                "provider_finish_reason": response.get("status"),
                "response_id": response.get("id"),
            },
        )


_RESPONSES_ERROR_STATUS = {
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "invalid_prompt": 400,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
}


def _tool_choice(request: LMRequest, *, nested: bool) -> Any:
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
