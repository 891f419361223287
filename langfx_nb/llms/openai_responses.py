"""OpenAI's Responses API: ``POST {base_url}/responses``, plain and SSE-streamed.

The second OpenAI mode, beside Chat Completions (``openai.py``), whose key handling,
endpoints, error mapping, schema rules and ``tool_choice`` mapping it shares; what differs
here is the wire form (input and output items) and the stream's events.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import (
    ContentFilteredError,
    EmptyGenerationError,
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
    StreamDecoder,
    json_object,
    load_object,
)
from ._http_errors import ErrorInfo, error_from_status, safe_code
from .base import LMRequest
from .batch_wire import Wire
from .openai import OpenAI, schema_name, strict_ok, tool_choice
from .streaming import (
    StreamAccumulator,
    StreamChunk,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    billed_answer,
)

__all__ = ["OpenAIResponses"]

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

    def batch_wire(self, read_limit: int) -> Wire | None:
        """None: the Batch API entries this library writes are Chat Completions requests."""
        return None

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
        if o.prompt_cache_key is not None:
            body["prompt_cache_key"] = o.prompt_cache_key
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
                    "strict": strict_ok(t.input_schema),
                }
                for t in request.tools
            ]
        if request.tool_choice is not None:
            body["tool_choice"] = tool_choice(request, nested=False)
        if request.response_schema is not None:
            schema = dict(request.response_schema)
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": schema_name(schema),
                    "schema": schema,
                    "strict": strict_ok(schema),
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
        with billed_answer(self.acc, _usage(response.get("usage")), response.get("status")):
            return self._checked_final(response)

    def _checked_final(self, response: dict[str, Any]) -> list[StreamChunk]:
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
            usage=_usage(usage),
            finish_reason="tool_calls" if calls else "stop",
            metadata={
                "provider_finish_reason": response.get("status"),
                "response_id": response.get("id"),
                "response_model": response.get("model"),
            },
        )


def _usage(usage: Any) -> Usage | None:
    if not usage or not isinstance(usage, dict):
        return None
    return Usage(
        prompt_tokens=usage.get("input_tokens"),
        completion_tokens=usage.get("output_tokens"),
        total_tokens=usage.get("total_tokens"),
        cached_tokens=(usage.get("input_tokens_details") or {}).get("cached_tokens"),
        reasoning_tokens=(usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
    )


_RESPONSES_ERROR_STATUS = {
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "invalid_prompt": 400,
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
}
