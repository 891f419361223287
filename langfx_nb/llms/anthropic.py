"""Anthropic Messages API: ``POST {base_url}/messages``, plain and SSE-streamed.

The key goes in ``x-api-key`` with ``anthropic-version: 2023-06-01``. ``max_tokens`` is
required by the API and defaults to 4096 here. Leading system turns become the top-level
``system`` field; tool results become ``tool_result`` blocks in the following user turn.

The stream's event order is checked: nothing but ``ping`` before ``message_start``, deltas
only for open blocks, all blocks closed before ``message_stop``, and ``message_stop`` is
required for success. Unknown event types are ignored (the API reserves the right to add
them); unknown content-block or delta types are a ``StreamProtocolError`` rather than
silently lost output.

Reasoning: ``thinking_budget=N`` sends ``thinking: {type: enabled, budget_tokens: N}`` (at
least 1024; ``max_tokens`` defaults to N + 4096 and must exceed N; thinking excludes
``temperature``, ``top_k`` and forcing a tool, which fail before sending). ``thinking`` and
``redacted_thinking`` blocks become ``ReasoningPart``s (the signature, or the redacted
block's encrypted ``data``, kept opaque) and stay in the continuation so they go back intact.

Native structured output is not implemented: a ``response_schema`` raises
``UnsupportedCapabilityError`` before sending (use prompt-based JSON).

Rate limits: ``anthropic-ratelimit-*`` headers pace the account's limiter (``rate_limits``);
a 429's ``retry-after-ms`` wins over ``Retry-After``. Message Batches
(``lf.engines.ProviderBatch``) are ``AnthropicWire``, at the end of this module.
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

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
    HTTPModel,
    StreamDecoder,
    json_object,
    load_object,
)
from ._http_errors import ErrorInfo, error_from_status, safe_code
from .base import Capabilities, LMRequest
from .batch_wire import FIND_SKEW_S, MB, Outcome, Polled, Wire, counts, obj, outcomes, same_origin
from .ratelimit import Limits, Reading, header_limit, parse_retry_after
from .streaming import (
    StreamAccumulator,
    StreamChunk,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    billed_answer,
)

__all__ = ["Anthropic", "AnthropicWire", "rate_limits"]

API_VERSION = "2023-06-01"
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
_OK = frozenset({"end_turn", "stop_sequence", "tool_use"})
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded", "pause_turn"})
_STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class Anthropic(HTTPModel):
    """Claude models through the Anthropic Messages API."""

    provider: ClassVar[str] = "anthropic"
    otel_provider: ClassVar[str | None] = "anthropic"
    genai_prices_provider: ClassVar[str | None] = "anthropic"
    capabilities: ClassVar[Capabilities] = Capabilities(
        modalities=frozenset({"image", "pdf"}),
        tools=True,
        native_schema=False,
        reasoning=frozenset({"thinking_budget"}),
    )
    default_base_url: ClassVar[str] = "https://api.anthropic.com/v1"
    env_vars: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    default_max_tokens: ClassVar[int] = 4096

    def _auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _error_info(self, status: int, body: Any) -> ErrorInfo:
        err = body.get("error") or {}
        code = safe_code(err.get("type"))
        message = str(err.get("message", "")).lower()
        context = "prompt is too long" in message or "context window" in message
        return ErrorInfo(code, context_length=context)

    def _rate_limits(self, headers: Mapping[str, str]) -> Limits:
        return rate_limits(headers)

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        return parse_retry_after(headers, ms="retry-after-ms")

    def batch_wire(self, read_limit: int) -> Wire | None:
        """The Message Batches API of this model's account (``lf.engines.ProviderBatch``)."""
        return AnthropicWire(self, read_limit)

    def check_capabilities(self, request: LMRequest) -> None:
        if request.response_schema is not None:
            raise UnsupportedCapabilityError(
                f"{self.model_id}: native structured output is not implemented for Anthropic; "
                "use prompt-based JSON (native_structured_output=False)"
            )
        super().check_capabilities(request)
        o = request.options
        if o.seed is not None:
            raise UnsupportedCapabilityError(f"{self.model_id}: the Messages API has no seed")
        if o.thinking_budget is not None:
            if o.thinking_budget < 1024:
                raise InvalidRequestError(
                    f"{self.model_id}: thinking_budget must be at least 1024 tokens"
                )
            if o.max_tokens is not None and o.max_tokens <= o.thinking_budget:
                raise InvalidRequestError(
                    f"{self.model_id}: max_tokens must exceed thinking_budget"
                )
            if o.temperature is not None or o.top_k is not None:
                raise UnsupportedCapabilityError(
                    f"{self.model_id}: extended thinking does not allow temperature or top_k"
                )
            if request.tool_choice not in (None, "auto", "none"):
                raise UnsupportedCapabilityError(
                    f"{self.model_id}: extended thinking only allows tool_choice auto or none"
                )
        for turn in request.messages:
            for p in turn.parts:
                if isinstance(p, Mime) and p.kind == "image" and p.mime_type not in _IMAGE_TYPES:
                    raise UnsupportedCapabilityError(
                        f"{self.model_id}: image type {p.mime_type} is not accepted "
                        "(png, jpeg, gif, webp)"
                    )

    # -- encoding --------------------------------------------------------------------------
    def encode(self, request: LMRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body for a request (no I/O; raises before sending on bad input)."""
        messages: list[dict[str, Any]] = []
        for turn in request.messages:
            if isinstance(turn, AIMessage):
                role, blocks = "assistant", self._assistant_blocks(turn)
            elif isinstance(turn, (UserMessage, ToolMessage)):
                role, blocks = "user", self._user_blocks(turn)
            else:
                raise InvalidRequestError(f"anthropic: cannot send a {turn.role!r} turn")
            if not blocks:
                continue
            if turn.metadata.get(CACHE):
                blocks[-1]["cache_control"] = dict(_EPHEMERAL)
            if messages and messages[-1]["role"] == role:
                messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": role, "content": blocks})
        o = request.options
        max_tokens = o.max_tokens or self.default_max_tokens
        if o.thinking_budget is not None and not o.max_tokens:
            max_tokens = o.thinking_budget + self.default_max_tokens
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": messages,
        }
        if o.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": o.thinking_budget}
        if request.system:
            body["system"] = request.system
        for key, value in (("temperature", o.temperature), ("top_p", o.top_p), ("top_k", o.top_k)):
            if value is not None:
                body[key] = value
        if o.stop:
            body["stop_sequences"] = list(o.stop)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
                for t in request.tools
            ]
        if request.tool_choice is not None:
            choice = request.tool_choice
            if choice in ("auto", "any", "none"):
                body["tool_choice"] = {"type": choice}
            elif choice in {t.name for t in request.tools}:
                body["tool_choice"] = {"type": "tool", "name": choice}
            else:
                raise InvalidRequestError(f"anthropic: tool_choice names unknown tool {choice!r}")
        mark_cache_breakpoints(body, o.prompt_cache)
        if stream:
            body["stream"] = True
        return body

    def _assistant_blocks(self, turn: Message[Any]) -> list[dict[str, Any]]:
        cont = self._own_continuation(turn)
        if cont is not None:
            return [dict(b) for b in cont.data.get("content") or ()]
        blocks: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ToolCall):
                blocks.append({"type": "tool_use", "id": p.id, "name": p.name, "input": p.args})
            elif isinstance(p, ReasoningPart):
                if self._own_reasoning(p) and p.signature:  # unsigned thinking is rejected
                    blocks.append(_thinking_block(p))
            else:
                raise UnsupportedCapabilityError(
                    f"anthropic: an assistant turn cannot hold a {p.kind} part"
                )
        return blocks

    def _user_blocks(self, turn: Message[Any]) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ToolResultPart):
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": p.call_id,
                    "content": p.content,
                }
                if p.is_error:
                    block["is_error"] = True
                blocks.append(block)
            elif isinstance(p, Mime):
                blocks.append(_media_block(p))
            else:
                raise InvalidRequestError(f"anthropic: a user turn cannot hold a {p.kind} part")
        return blocks

    # -- calls -----------------------------------------------------------------------------
    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        data = await self._post_json(f"{self.base_url}/messages", self.encode(request))
        return self.decode(data)

    def decode(self, data: Any) -> AIMessage[Any]:
        """The message of a parsed (non-streamed) Messages API answer, checked as an online
        answer is (stop reason, refusal); a provider batch's answers go through here."""
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise StreamProtocolError("anthropic: response is not a message")
        state = _State(self)
        try:
            state.message_start(data)
            for index, block in enumerate(data["content"]):
                state.block_start(index, block, whole=True)
                state.block_stop(index)
            state.stopped = True
            state.final()
        except MALFORMED as exc:
            raise StreamProtocolError("anthropic: malformed response") from exc
        return state.acc.message()

    def _stream_request(self, request: LMRequest) -> tuple[str, dict[str, Any]]:
        return f"{self.base_url}/messages", self.encode(request, stream=True)

    def _stream_decoder(self) -> StreamDecoder:
        return _State(self)


def rate_limits(headers: Mapping[str, str]) -> Limits:
    """``anthropic-ratelimit-{requests,tokens}-{remaining,reset,limit}`` (the reset an RFC
    3339 time); without a ``tokens`` limit, the tighter of the ``input-tokens`` and
    ``output-tokens`` ones (the later reset)."""
    out: Limits = {}
    for kind in ("requests", "tokens"):
        found = _limit(headers, kind)
        if found[0] is None and kind == "tokens":  # the input/output split
            parts = [_limit(headers, f"{p}-tokens") for p in ("input", "output")]
            parts = [part for part in parts if part[0] is not None]
            if parts:
                tightest = min(parts, key=lambda part: part[0] or 0.0)
                resets = [r for _, r, _ in parts if r is not None]
                found = (tightest[0], max(resets) if resets else None, tightest[2])
        out[kind] = found
    return out


def _limit(headers: Mapping[str, str], kind: str) -> Reading:
    prefix = f"anthropic-ratelimit-{kind}-"
    return header_limit(headers, f"{prefix}remaining", f"{prefix}reset", f"{prefix}limit")


#: A message whose ``metadata[CACHE]`` is true ends a prompt-cache breakpoint (its last block
#: gets ``cache_control``): ``lf.UserMessage(long_document, metadata={"cache": True})``.
CACHE = "cache"
#: Automatic breakpoints only for a prefix of at least this many characters: Anthropic caches
#: nothing under 1,024 tokens (2,048 on Haiku), and a token is rarely under one character.
AUTO_CACHE_MIN_CHARS = 1024
MAX_CACHE_BREAKPOINTS = 4  # the Messages API refuses a request with more
_EPHEMERAL = {"type": "ephemeral"}


def mark_cache_breakpoints(body: dict[str, Any], prompt_cache: bool | None) -> None:
    """Add ``cache_control`` breakpoints to a Messages API ``body``: after the tool list and
    after the system prompt (automatic when they are long enough, always with
    ``prompt_cache=True``, never with ``False``). With those ``encode`` put after each message
    marked ``metadata["cache"]``, more than ``MAX_CACHE_BREAKPOINTS`` fails before sending."""
    marks = 0
    if prompt_cache is not False:
        tools = body.get("tools") or []
        tool_chars = len(json.dumps(tools)) if tools else 0
        system = body.get("system")
        if tools and (prompt_cache or tool_chars >= AUTO_CACHE_MIN_CHARS):
            tools[-1]["cache_control"] = dict(_EPHEMERAL)
            marks += 1
        if system and (prompt_cache or tool_chars + len(system) >= AUTO_CACHE_MIN_CHARS):
            body["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
            marks += 1
    marks += sum(
        1 for turn in body["messages"] for block in turn["content"] if "cache_control" in block
    )
    if marks > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequestError(
            f"anthropic: {marks} prompt-cache breakpoints; the API allows at most "
            f"{MAX_CACHE_BREAKPOINTS} (pass prompt_cache=False or mark fewer messages)"
        )


def _thinking_block(p: ReasoningPart) -> dict[str, Any]:
    if p.redacted:
        return {"type": "redacted_thinking", "data": p.signature}
    return {"type": "thinking", "thinking": p.text, "signature": p.signature}


def _media_block(p: Mime) -> dict[str, Any]:
    kind = "image" if p.kind == "image" else "document"
    if p.data is not None:
        source = {"type": "base64", "media_type": p.mime_type, "data": p.to_base64()}
    elif p.uri is not None and p.uri.startswith(("https://", "http://")):
        source = {"type": "url", "url": p.uri}
    else:
        raise UnsupportedCapabilityError("anthropic: media URIs must be http(s) URLs")
    return {"type": kind, "source": source}


class _State:
    """The Messages protocol state machine, shared by plain and streamed responses (for the
    latter it is the ``StreamDecoder``: ``event``/``done``/``finish``)."""

    # The stream is read to its end, so an event after message_stop is caught as an error.
    done = False

    def __init__(self, lm: Anthropic) -> None:
        self.lm = lm
        self.acc = StreamAccumulator(lm.model_id)
        self.started = False
        self.stopped = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}
        self.open: set[int] = set()
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.message_id: str | None = None
        self.response_model: str | None = None

    def event(self, name: str, data: bytes) -> list[StreamChunk]:
        if name == "ping":
            return []
        parsed = load_object(data)
        if name == "message" and isinstance(parsed.get("type"), str):
            name = parsed["type"]  # tolerate servers that omit the event: line
        chunk = self.handle(name, parsed)
        return [chunk] if chunk is not None else []

    def finish(self) -> list[StreamChunk]:
        if not self.stopped:
            raise StreamProtocolError("anthropic: the stream ended before message_stop")
        return [self.final()]

    def handle(self, kind: str, data: dict[str, Any]) -> StreamChunk | None:
        if kind == "error":
            err = data.get("error") if isinstance(data.get("error"), dict) else {}
            code = safe_code((err or {}).get("type"))
            status = _STREAM_ERROR_STATUS.get(code or "", 500)
            raise error_from_status("anthropic", status, ErrorInfo(code))
        if not self.started and kind != "message_start":
            raise StreamProtocolError(
                f"anthropic: {safe_code(kind) or 'event'} before message_start"
            )
        if self.stopped and kind in _KNOWN_EVENTS:
            raise StreamProtocolError(f"anthropic: {kind} after message_stop")
        if kind == "content_block_delta":  # nearly every event
            return self.block_delta(_index(data), data.get("delta"))
        if kind == "message_start":
            if self.started:
                raise StreamProtocolError("anthropic: a second message_start")
            message = data.get("message")
            if not isinstance(message, dict):
                raise StreamProtocolError("anthropic: message_start without a message")
            self.message_start(message)
            return None
        if kind == "content_block_start":
            return self.block_start(_index(data), data.get("content_block"), whole=False)
        if kind == "content_block_stop":
            return self.block_stop(_index(data))
        if kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self.stop_reason = str(delta["stop_reason"])
            if isinstance(data.get("usage"), dict):
                self.usage.update(data["usage"])
            return None
        if kind == "message_stop":
            if self.open:
                raise StreamProtocolError("anthropic: message_stop with content blocks still open")
            self.stopped = True
            return None
        return None  # unknown event types may be added by the API: ignored

    def message_start(self, message: dict[str, Any]) -> None:
        self.started = True
        self.message_id = message.get("id")
        if message.get("model"):
            self.response_model = str(message["model"])
        if isinstance(message.get("usage"), dict):
            self.usage.update(message["usage"])
        if message.get("stop_reason") is not None:
            self.stop_reason = str(message["stop_reason"])

    def block_start(self, index: int, block: Any, *, whole: bool) -> StreamChunk | None:
        if index in self.blocks:
            raise StreamProtocolError(f"anthropic: content block {index} started twice")
        if not isinstance(block, dict):
            raise StreamProtocolError("anthropic: content_block_start without a block")
        kind = block.get("type")
        if kind not in _BLOCKS:
            name = safe_code(kind) or "unknown"
            raise StreamProtocolError(f"anthropic: unsupported content block type {name!r}")
        block = dict(block)
        self.blocks[index] = block
        self.open.add(index)
        if kind == "text":
            text = str(block.get("text") or "")
            self.pieces[index] = [text]
            return self.acc.text(text) if text else None
        if kind == "tool_use":
            if not block.get("id") or not block.get("name"):
                raise StreamProtocolError("anthropic: tool_use block without id or name")
            if whole:
                if not isinstance(block.get("input"), dict):
                    raise StreamProtocolError("anthropic: tool_use input is not an object")
                self.pieces[index] = [json.dumps(block["input"], ensure_ascii=False)]
            else:
                self.pieces[index] = []
            return self.acc.events(ToolCallStart(str(block["id"]), str(block["name"])))
        if kind == "thinking":
            self.pieces[index] = [str(block.get("thinking") or "")]
        return None

    def block_delta(self, index: int, delta: Any) -> StreamChunk | None:
        if index not in self.open:
            raise StreamProtocolError(f"anthropic: delta for content block {index} not open")
        if not isinstance(delta, dict):
            raise StreamProtocolError("anthropic: content_block_delta without a delta")
        block = self.blocks[index]
        kind = delta.get("type")
        btype = block["type"]
        if kind == "text_delta" and btype == "text":
            text = str(delta.get("text", ""))
            self.pieces[index].append(text)
            return self.acc.text(text) if text else None
        if kind == "input_json_delta" and btype == "tool_use":
            fragment = str(delta.get("partial_json", ""))
            if not fragment:
                return None
            self.pieces[index].append(fragment)
            return self.acc.events(ToolCallDelta(str(block["id"]), fragment))
        if kind == "thinking_delta" and btype == "thinking":
            self.pieces[index].append(str(delta.get("thinking", "")))
            return None
        if kind == "signature_delta" and btype == "thinking":
            block["signature"] = delta.get("signature")
            return None
        if kind == "citations_delta" and btype == "text":
            block.setdefault("citations", []).append(delta.get("citation"))
            return None
        name = safe_code(kind) or "unknown"
        raise StreamProtocolError(f"anthropic: unsupported delta {name!r} for a {btype} block")

    def block_stop(self, index: int) -> StreamChunk | None:
        if index not in self.open:
            raise StreamProtocolError(f"anthropic: stop for content block {index} not open")
        self.open.discard(index)
        block = self.blocks[index]
        kind = block["type"]
        if kind == "text":
            block["text"] = "".join(self.pieces.pop(index))
        elif kind == "thinking":
            block["thinking"] = text = "".join(self.pieces.pop(index))
            signature = block.get("signature")
            signature = signature if isinstance(signature, str) and signature else None
            self.acc.add_part(self.lm._reasoning(text, signature))
        elif kind == "redacted_thinking":
            data = block.get("data")
            if not isinstance(data, str) or not data:
                raise StreamProtocolError("anthropic: redacted_thinking block without data")
            self.acc.add_part(self.lm._reasoning("", data, redacted=True))
        elif kind == "tool_use":
            args = json_object("".join(self.pieces.pop(index)), "anthropic tool_use input")
            block["input"] = args
            call = ToolCall(str(block["id"]), str(block["name"]), args)
            return self.acc.events(ToolCallEnd(call))
        return None

    def final(self) -> StreamChunk:
        with billed_answer(self.acc, _usage(self.usage), self.stop_reason):
            return self._checked_final()

    def _checked_final(self) -> StreamChunk:
        reason = self.stop_reason
        code = safe_code(reason) or "unknown"
        if reason in _TRUNCATED:
            raise IncompleteGenerationError(f"anthropic: output truncated ({code})")
        if reason == "refusal":
            raise ContentFilteredError("anthropic: the model refused (refusal)")
        if reason is not None and reason not in _OK:
            raise GenerationError(f"anthropic: generation stopped ({code})")
        calls = self.acc.tool_calls
        if not calls and not self.acc.has_text:
            raise EmptyGenerationError("anthropic: the model returned no text and no tool calls")
        content = [self.blocks[i] for i in sorted(self.blocks)]
        self.acc.add_part(self.lm._continuation({"id": self.message_id, "content": content}))
        metadata: dict[str, Any] = {"provider_finish_reason": reason}
        if self.message_id:
            metadata["response_id"] = self.message_id
        if self.response_model:
            metadata["response_model"] = self.response_model
        return self.acc.finish(
            usage=_usage(self.usage),
            finish_reason="tool_calls" if calls else "stop",
            metadata=metadata,
        )


_KNOWN_EVENTS = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    }
)


def _index(data: dict[str, Any]) -> int:
    index = data.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise StreamProtocolError("anthropic: content block event without an index")
    return index


def _usage(u: dict[str, Any]) -> Usage | None:
    if not u:
        return None
    inp = u.get("input_tokens")
    created = u.get("cache_creation_input_tokens")
    read = u.get("cache_read_input_tokens")
    prompt = None if inp is None else inp + (created or 0) + (read or 0)
    out = u.get("output_tokens")
    total = None if prompt is None or out is None else prompt + out
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=out,
        total_tokens=total,
        cached_tokens=read,
        cache_write_tokens=created,
    )


# -- Message Batches -------------------------------------------------------------------------
#: A succeeded result line: ``{"custom_id": "...", "result": {"type": "succeeded"`` (the
#: members in the order the API writes them; group 1 is the custom id).
_OK_LINE = re.compile(
    rb'\s*\{\s*"custom_id"\s*:\s*"([^"\\]*)"\s*,'
    rb'\s*"result"\s*:\s*\{\s*"type"\s*:\s*"succeeded"\s*[,}]'
)


class AnthropicWire(Wire):
    """Anthropic Message Batches (see ``llms/batch_wire.py`` for what every wire keeps to).

    ``POST /messages/batches {requests: [{custom_id, params}]}``; ``GET
    /messages/batches/{id}`` until ``processing_status`` is ``ended``; the JSONL at
    ``results_url`` (``{custom_id, result: {type: succeeded|errored|canceled|expired}}``;
    read from the documented path under the model's ``base_url`` when the URL is on another
    host: the key stays home); ``POST /messages/batches/{id}/cancel``. At most 100,000
    requests and 256 MB. A request with ``temperature``, ``top_p`` or ``top_k`` is refused
    before anything is sent. Message batches keep no metadata: a create whose answer was
    lost is looked for as a batch created since, with as many requests."""

    model: Anthropic
    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * MB

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        """``InvalidRequestError`` for a sampling option the Messages API no longer lists:
        newer models reject it, and in a batch that refusal would come per request after
        the batch has run, so the whole batch is refused before anything is sent."""
        o = request.options
        sampling = {"temperature": o.temperature, "top_p": o.top_p, "top_k": o.top_k}
        given = [name for name, value in sampling.items() if value is not None]
        if given:
            raise InvalidRequestError(
                f"{self.model.model_id}: an Anthropic provider batch refuses {', '.join(given)}"
                " (no longer among the Messages API's parameters; newer models reject them, "
                "and in a batch each request would fail after the batch has run); remove "
                "it from the call, the session and the model's defaults, or run these "
                "requests online (engine=None)"
            )
        row = {"custom_id": custom_id, "params": self.body(request)}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes], marker: str) -> str:
        content = b'{"requests":[' + b",".join(entries) + b"]}"
        created = await self._json(
            "POST", f"{self.model.base_url}/messages/batches", content=content, resend=False
        )
        return str(created["id"])

    async def find(self, marker: str, requests: int, since: float) -> list[str]:
        """A batch created since ``since`` (less the clock skew allowed) with ``requests``
        requests."""
        found: list[str] = []
        url = f"{self.model.base_url}/messages/batches"
        async for batch in self._listing(url, "last_id", "after_id"):
            created = _epoch(batch.get("created_at"))
            if created is not None and created < since - FIND_SKEW_S:
                break
            if sum(counts(batch.get("request_counts")).values()) == requests:
                found.append(str(batch.get("id")))
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/messages/batches/{batch_id}")
        status = str(data.get("processing_status"))
        return Polled(status == "ended", status, counts(data.get("request_counts")), data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        url = polled.raw.get("results_url")
        if not isinstance(url, str) or not same_origin(url, self.model.base_url):
            url = f"{self.model.base_url}/messages/batches/{batch_id}/results"  # the key stays
        raw = await self._request("GET", url)
        return dict(outcomes(raw, _OK_LINE, ("result", "message"), self._outcome))

    def _outcome(self, row: dict[str, Any], raw: bytes) -> Outcome:
        result = row.get("result")
        if not isinstance(result, dict):
            raise TypeError("result is not an object")
        kind = result.get("type")
        if kind == "succeeded":
            return Outcome(raw=raw, path=("result", "message"))
        if kind in ("expired", "canceled"):
            return Outcome(failure=str(kind), message=f"the request was {kind}")
        error = obj(obj(result.get("error")).get("error"))
        return self.failed(
            "errored", f"{error.get('type') or 'error'}: {error.get('message') or ''}"
        )

    async def cancel(self, batch_id: str) -> None:
        await self._json(
            "POST", f"{self.model.base_url}/messages/batches/{batch_id}/cancel", body={}
        )


def _epoch(value: Any) -> float | None:
    """An RFC 3339 time (``2026-12-03T00:00:00Z``, fractions and offsets allowed) as
    epoch seconds; ``None`` when it is not one."""
    if not isinstance(value, str):
        return None
    m = re.fullmatch(
        r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)", value
    )
    if m is None:
        return None
    fields = tuple(int(g) for g in m.groups()[:6])
    try:
        seconds = float(calendar.timegm((*fields, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    zone = m.group(7)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return seconds
