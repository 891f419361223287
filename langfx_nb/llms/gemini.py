"""Google Gemini (Developer API): ``generateContent`` and ``streamGenerateContent?alt=sse``.

Requests go to ``{base_url}/models/{model}:generateContent`` with the key in the
``x-goog-api-key`` header (never in the URL). Tools are declared with
``parametersJsonSchema``; native structured output uses ``responseJsonSchema`` within a
conservative keyword subset (``GEMINI_SCHEMA_KEYWORDS``) checked before sending.

Continuation: the raw response parts (with thought signatures, thought parts and provider
call ids) are kept in a ``ContinuationPart`` and sent back verbatim on later turns to the same
model and endpoint; another model or endpoint rejects them before sending. Calls without a
provider id get a local ``call_...`` id, which is never sent back.

Reasoning: ``thinking_budget=N`` sends ``generationConfig.thinkingConfig`` with
``thinkingBudget: N`` and ``includeThoughts: true`` (``0`` turns thinking off and asks for no
thoughts; ``-1`` lets the model decide). Thought-summary parts (``thought: true``) become
``ReasoningPart``s, with the part's ``thoughtSignature`` when it has one; usage counts
``thoughtsTokenCount`` as ``reasoning_tokens``.

Rate limits: Gemini sends no rate-limit headers; a 429's wait is its error's ``RetryInfo``
(``parse_google_duration``), used by the model's ``RetryPolicy`` (``rate_limit=`` shares one
pace and one pause across requests). Batch mode (``lf.engines.ProviderBatch``) is
``GeminiWire``, at the end of this module.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
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
    loads,
    tool_result_value,
)
from ._http_errors import ErrorInfo, safe_code
from .base import Capabilities, LMRequest
from .batch_wire import FIND_MAX_PAGES, MB, Outcome, Polled, Wire, counts, line_id, malformed, obj
from .ratelimit import checked_wait, header_number
from .streaming import (
    StreamAccumulator,
    StreamChunk,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    billed_answer,
)

__all__ = [
    "GEMINI_SCHEMA_KEYWORDS",
    "Gemini",
    "GeminiWire",
    "GoogleGenAI",
    "gemini_schema",
    "parse_google_duration",
]

GEMINI_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "title",
        "description",
        "enum",
        "const",
        "anyOf",
        "$defs",
        "$ref",
        "$schema",
        "default",
    }
)
_TRUNCATED = frozenset({"MAX_TOKENS"})
_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_OK = frozenset({"STOP", "FINISH_REASON_UNSPECIFIED"})
_TEXT_KEYS = frozenset({"text", "thought", "thoughtSignature"})


def parse_google_duration(value: Any) -> float | None:
    """A protobuf ``Duration`` in JSON form (``"37s"``, ``"1.5s"``: a ``RetryInfo``'s
    ``retryDelay``) as seconds (``None``, with a ``RateLimitWarning``, when it is not a
    finite number)."""
    if isinstance(value, str) and value.endswith("s"):
        return checked_wait(header_number(value[:-1]), "a RetryInfo delay", value)
    return None


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema rewritten for ``responseJsonSchema``: local ``$ref``s inlined, ``const``
    as a one-value ``enum``, ``$schema``/``default`` dropped. Any keyword outside
    ``GEMINI_SCHEMA_KEYWORDS`` (formats, patterns, recursion...) raises
    ``UnsupportedCapabilityError`` so nothing is silently relaxed."""
    defs = schema.get("$defs", {})

    def walk(node: Any, path: str, seen: tuple[str, ...]) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, Mapping):
            raise UnsupportedCapabilityError(f"gemini: schema at {path} is not an object")
        unknown = set(node) - GEMINI_SCHEMA_KEYWORDS
        if unknown:
            raise UnsupportedCapabilityError(
                f"gemini: responseJsonSchema does not support {', '.join(sorted(unknown))} "
                f"(at {path}); use prompt-based JSON instead"
            )
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
                raise UnsupportedCapabilityError(f"gemini: unsupported $ref {ref!r} at {path}")
            name = ref[len("#/$defs/") :]
            if name in seen:
                raise UnsupportedCapabilityError(f"gemini: recursive schema {name!r} at {path}")
            if name not in defs:
                raise UnsupportedCapabilityError(f"gemini: unknown $ref {ref!r} at {path}")
            merged = {k: v for k, v in node.items() if k != "$ref"}
            target = walk(defs[name], ref, (*seen, name))
            return {**target, **{k: walk_value(k, v, path, seen) for k, v in merged.items()}}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$schema", "$defs", "default"):
                continue
            if key == "const":
                out["enum"] = [value]
                continue
            out[key] = walk_value(key, value, path, seen)
        if "enum" in out and not all(isinstance(v, (str, int, float)) for v in out["enum"]):
            raise UnsupportedCapabilityError(f"gemini: enum values at {path} must be str/number")
        return out

    def walk_value(key: str, value: Any, path: str, seen: tuple[str, ...]) -> Any:
        if key == "properties":
            return {k: walk(v, f"{path}.{k}", seen) for k, v in dict(value).items()}
        if key in ("items", "additionalProperties"):
            return walk(value, f"{path}[]", seen)
        if key == "anyOf":
            return [walk(v, f"{path}|{i}", seen) for i, v in enumerate(value)]
        return value

    return walk(schema, "$", ())


class Gemini(HTTPModel):
    """Gemini through the Generative Language API (``v1beta``)."""

    provider: ClassVar[str] = "gemini"
    otel_provider: ClassVar[str | None] = "gcp.gemini"
    genai_prices_provider: ClassVar[str | None] = "google"
    capabilities: ClassVar[Capabilities] = Capabilities(
        modalities=frozenset({"image", "audio", "video", "pdf"}),
        tools=True,
        native_schema=True,
        reasoning=frozenset({"thinking_budget"}),
    )
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com/v1beta"
    env_vars: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    # -- wire details --------------------------------------------------------------------
    def _auth_headers(self, key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def _error_info(self, status: int, body: Any) -> ErrorInfo:
        err = body.get("error") or {}
        code = safe_code(err.get("status"))
        retry_after = None
        auth = False
        for detail in err.get("details") or ():
            if not isinstance(detail, dict):
                continue
            kind = str(detail.get("@type", ""))
            if kind.endswith("google.rpc.RetryInfo"):
                retry_after = parse_google_duration(detail.get("retryDelay"))
            elif kind.endswith("google.rpc.ErrorInfo"):
                reason = safe_code(detail.get("reason"))
                if reason in ("API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED"):
                    auth = True
                    code = reason
        message = str(err.get("message", "")).lower()
        context = "token count" in message and ("exceed" in message or "maximum" in message)
        return ErrorInfo(code, retry_after, context_length=context, auth=auth)

    def _url(self, method: str) -> str:
        model = self.model or ""
        path = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        return f"{self.base_url}/{path}:{method}"

    def check_capabilities(self, request: LMRequest) -> None:
        super().check_capabilities(request)
        if request.response_schema is not None:
            gemini_schema(request.response_schema)
        budget = request.options.thinking_budget
        if budget is not None and budget < -1:
            raise InvalidRequestError(
                f"{self.model_id}: thinking_budget must be -1 (dynamic), 0 (off) or positive"
            )

    # -- encoding --------------------------------------------------------------------------
    def encode(self, request: LMRequest) -> dict[str, Any]:
        """The JSON body for a request (no I/O; raises before sending on bad input)."""
        provider_ids: set[str] = set()
        names = {c.id: c.name for m in request.messages for c in m.tool_calls}
        contents: list[dict[str, Any]] = []

        def add(role: str, parts: list[dict[str, Any]]) -> None:
            if not parts:
                return
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})

        for turn in request.messages:
            if isinstance(turn, AIMessage):
                add("model", self._model_parts(turn, provider_ids))
            elif isinstance(turn, (UserMessage, ToolMessage)):
                add("user", self._user_parts(turn, provider_ids, names))
            else:
                raise InvalidRequestError(f"gemini: cannot send a {turn.role!r} turn")
        body: dict[str, Any] = {"contents": contents}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "parametersJsonSchema": dict(t.input_schema),
                        }
                        for t in request.tools
                    ]
                }
            ]
        if request.tool_choice is not None:
            choice = request.tool_choice
            mode = {"auto": "AUTO", "any": "ANY", "none": "NONE"}.get(choice)
            config: dict[str, Any] = {"mode": mode or "ANY"}
            if mode is None:
                if choice not in {t.name for t in request.tools}:
                    raise InvalidRequestError(f"gemini: tool_choice names unknown tool {choice!r}")
                config["allowedFunctionNames"] = [choice]
            body["toolConfig"] = {"functionCallingConfig": config}
        gen: dict[str, Any] = {}
        o = request.options
        for key, value in (
            ("temperature", o.temperature),
            ("topP", o.top_p),
            ("topK", o.top_k),
            ("maxOutputTokens", o.max_tokens),
            ("seed", o.seed),
        ):
            if value is not None:
                gen[key] = value
        if o.stop:
            gen["stopSequences"] = list(o.stop)
        if o.thinking_budget is not None:
            gen["thinkingConfig"] = {
                "thinkingBudget": o.thinking_budget,
                "includeThoughts": o.thinking_budget != 0,
            }
        if request.response_schema is not None:
            gen["responseMimeType"] = "application/json"
            gen["responseJsonSchema"] = gemini_schema(request.response_schema)
        if gen:
            body["generationConfig"] = gen
        return body

    def _model_parts(self, turn: Message[Any], provider_ids: set[str]) -> list[dict[str, Any]]:
        cont = self._own_continuation(turn)
        if cont is not None:
            raw = list(cont.data.get("parts") or ())
            for p in raw:
                call = p.get("functionCall") if isinstance(p, dict) else None
                if isinstance(call, dict) and call.get("id"):
                    provider_ids.add(str(call["id"]))
            return raw
        parts: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                parts.append({"text": p.text})
            elif isinstance(p, ToolCall):
                parts.append({"functionCall": {"name": p.name, "args": p.args}})
            elif isinstance(p, Mime):
                parts.append(_media(p))
            elif isinstance(p, ReasoningPart):
                if self._own_reasoning(p):
                    part: dict[str, Any] = {"text": p.text, "thought": True}
                    if p.signature:
                        part["thoughtSignature"] = p.signature
                    parts.append(part)
            else:
                raise InvalidRequestError(f"gemini: a model turn cannot hold a {p.kind} part")
        return parts

    def _user_parts(
        self, turn: Message[Any], provider_ids: set[str], names: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        for p in turn.parts:
            if isinstance(p, TextPart):
                parts.append({"text": p.text})
            elif isinstance(p, Mime):
                parts.append(_media(p))
            elif isinstance(p, ToolResultPart):
                value = tool_result_value(p.content)
                if p.is_error:
                    response = {"error": value}
                elif isinstance(value, dict):
                    response = value
                else:
                    response = {"result": value}
                name = p.name or names.get(p.call_id)  # Gemini matches results by name
                if not name:
                    raise InvalidRequestError(
                        "gemini: a tool result needs the tool's name (or its call earlier in "
                        "the transcript)"
                    )
                fr: dict[str, Any] = {"name": name, "response": response}
                if p.call_id in provider_ids:
                    fr["id"] = p.call_id
                parts.append({"functionResponse": fr})
            else:
                raise InvalidRequestError(f"gemini: a user turn cannot hold a {p.kind} part")
        return parts

    # -- calls -----------------------------------------------------------------------------
    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        data = await self._post_json(self._url("generateContent"), self.encode(request))
        return self.decode(data)

    def method_url(self, method: str) -> str:
        """``{base_url}/models/{model}:{method}`` (``batchGenerateContent``, ...)."""
        return self._url(method)

    def batch_wire(self, read_limit: int) -> Wire | None:
        """The batch mode of this model's account (``lf.engines.ProviderBatch``)."""
        return GeminiWire(self, read_limit)

    def decode(self, data: Any) -> AIMessage[Any]:
        """The message of a parsed ``GenerateContentResponse``, checked as an online answer
        is (finish reason, safety); a provider batch's answers go through here."""
        decoder = _Decoder(self)
        try:
            decoder.feed(data)
            decoder.final()
        except MALFORMED as exc:
            raise StreamProtocolError("gemini: malformed response") from exc
        return decoder.acc.message()

    def _stream_request(self, request: LMRequest) -> tuple[str, dict[str, Any]]:
        return self._url("streamGenerateContent") + "?alt=sse", self.encode(request)

    def _stream_decoder(self) -> StreamDecoder:
        return _Decoder(self)


GoogleGenAI = Gemini  # the name Python users of Google's SDK know


def _media(p: Mime) -> dict[str, Any]:
    if p.data is not None:
        return {"inlineData": {"mimeType": p.mime_type, "data": p.to_base64()}}
    return {"fileData": {"mimeType": p.mime_type, "fileUri": p.uri}}


class _Decoder:
    """Turns ``GenerateContentResponse`` objects (one, or one per stream event) into chunks;
    for a stream it is the ``StreamDecoder`` (``event``/``done``/``finish``)."""

    done = False  # the stream simply ends; ``finish`` checks that it ended well

    def __init__(self, lm: Gemini) -> None:
        self.lm = lm
        self.acc = StreamAccumulator(lm.model_id)
        self.raw: list[dict[str, Any]] = []
        self._text: list[str] | None = None  # pieces of the open plain-text raw part
        self._thought = False
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.block_reason: str | None = None
        self.has_output = False
        self.response_id: str | None = None
        self.response_model: str | None = None

    def event(self, name: str, data: bytes) -> list[StreamChunk]:
        return self.feed(loads(data))

    def finish(self) -> list[StreamChunk]:
        return [self.final()]

    def feed(self, data: Any) -> list[StreamChunk]:
        if not isinstance(data, dict):
            raise StreamProtocolError("gemini: response is not a JSON object")
        if "error" in data:
            self.lm._raise_in_stream_error(data)
        get = data.get
        if (usage := get("usageMetadata")) is not None:
            self.usage = usage
        if (rid := get("responseId")) is not None:
            self.response_id = rid
        if (version := get("modelVersion")) is not None:
            self.response_model = str(version)
        if (feedback := get("promptFeedback")) and feedback.get("blockReason"):
            self.block_reason = safe_code(feedback["blockReason"]) or "BLOCKED"
        chunks: list[StreamChunk] = []
        for cand in get("candidates") or ():
            if cand.get("index", 0) != 0:
                continue
            content = cand.get("content")
            for part in (content.get("parts") if content else None) or ():
                text = part.get("text")
                if (
                    text  # the common case: a plain answer-text fragment
                    and len(part) == 1
                    and self._text is not None
                    and not self._thought
                    and type(text) is str
                ):
                    self._text.append(text)
                    self.has_output = True
                    chunks.append(self.acc.text(text))
                    continue
                chunk = self._part(part)
                if chunk is not None:
                    chunks.append(chunk)
            if reason := cand.get("finishReason"):
                self.finish_reason = str(reason)
        return chunks

    def _part(self, part: dict[str, Any]) -> StreamChunk | None:
        sig = part.get("thoughtSignature")
        if "text" in part or (sig is not None and set(part) <= _TEXT_KEYS):
            text = str(part.get("text", ""))
            thought = bool(part.get("thought"))
            if self._text is None or self._thought != thought:
                self._close_text()
                self._text = []
                self._thought = thought
            self._text.append(text)
            if sig is not None:
                self._close_text(sig)
            if thought or not text:
                return None
            self.has_output = True
            return self.acc.text(text)
        if "functionCall" in part:
            self._close_text()
            fc = part["functionCall"]
            if not isinstance(fc, dict) or not fc.get("name"):
                raise StreamProtocolError("gemini: malformed functionCall part")
            args = fc.get("args") or {}
            if not isinstance(args, dict):
                raise StreamProtocolError("gemini: functionCall args is not an object")
            call_id = fc.get("id") or f"call_{uuid.uuid4().hex[:16]}"
            self.raw.append(dict(part))
            call = ToolCall(str(call_id), str(fc["name"]), args)
            self.has_output = True
            return self.acc.events(
                ToolCallStart(call.id, call.name),
                ToolCallDelta(call.id, json.dumps(args, ensure_ascii=False)),
                ToolCallEnd(call),
            )
        kinds = ", ".join(sorted(k for k in part if k not in _TEXT_KEYS)) or "empty"
        raise StreamProtocolError(f"gemini: unsupported response part type ({kinds})")

    def _close_text(self, signature: str | None = None) -> None:
        if self._text is None:
            return
        part: dict[str, Any] = {"text": "".join(self._text)}
        if self._thought:
            part["thought"] = True
        if signature is not None:
            part["thoughtSignature"] = signature
        self.raw.append(part)
        self._text = None
        if self._thought:
            sig = signature if isinstance(signature, str) and signature else None
            self.acc.add_part(self.lm._reasoning(part["text"], sig))

    def final(self) -> StreamChunk:
        with billed_answer(self.acc, _usage(self.usage), self.finish_reason):
            return self._checked_final()

    def _checked_final(self) -> StreamChunk:
        self._close_text()
        if self.block_reason and not self.has_output:
            raise ContentFilteredError(f"gemini: the prompt was blocked ({self.block_reason})")
        reason = self.finish_reason
        if reason is None:
            if not self.has_output:
                raise EmptyGenerationError("gemini: the response has no candidates")
            raise StreamProtocolError("gemini: the response ended without a finish reason")
        code = safe_code(reason) or "unknown"
        if reason in _TRUNCATED:
            raise IncompleteGenerationError(f"gemini: output truncated ({code})")
        if reason in _FILTERED:
            raise ContentFilteredError(f"gemini: response blocked ({code})")
        if reason not in _OK:
            raise GenerationError(f"gemini: generation stopped ({code})")
        if not self.has_output:
            raise EmptyGenerationError("gemini: the model returned no text and no tool calls")
        self.acc.add_part(self.lm._continuation({"parts": self.raw}))
        has_calls = bool(self.acc.tool_calls)
        metadata: dict[str, Any] = {"provider_finish_reason": reason}
        if self.response_id:
            metadata["response_id"] = self.response_id
        if self.response_model:
            metadata["response_model"] = self.response_model
        return self.acc.finish(
            usage=_usage(self.usage),
            finish_reason="tool_calls" if has_calls else "stop",
            metadata=metadata,
        )


def _usage(u: dict[str, Any] | None) -> Usage | None:
    if not u:
        return None
    prompt = u.get("promptTokenCount")
    cands = u.get("candidatesTokenCount")
    thoughts = u.get("thoughtsTokenCount")
    completion = cands if thoughts is None or cands is None else cands + thoughts
    if completion is None and thoughts is not None:
        completion = thoughts
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=u.get("totalTokenCount"),
        cached_tokens=u.get("cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


# -- batch mode ------------------------------------------------------------------------------
class GeminiWire(Wire):
    """Gemini batch mode (see ``llms/batch_wire.py`` for what every wire keeps to).

    ``POST /models/{model}:batchGenerateContent`` with inline requests (``{request,
    metadata: {key}}``), under 20 MB per batch, its ``display_name`` holding the create's
    marker; ``GET /batches/{id}`` (a long-running operation: ``done``, ``metadata.state``
    (``BATCH_STATE_*`` in the API reference, ``JOB_STATE_*`` in the batch guide: both
    read), ``metadata.batchStats``, then ``response.inlinedResponses``, or a
    ``responsesFile`` read from the download endpoint); ``POST /batches/{id}:cancel``."""

    model: Gemini
    name = "gemini"
    max_requests = 100_000
    max_bytes = 20 * MB  # inline requests; larger runs are split into several batches
    overhead = 160

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        row = {"request": self.body(request), "metadata": {"key": custom_id}}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes], marker: str) -> str:
        content = (
            b'{"batch":{"display_name":"'
            + _display_name(marker).encode()
            + b'","input_config":{"requests":{"requests":['
            + b",".join(entries)
            + b"]}}}}"
        )
        created = await self._json(
            "POST", self.model.method_url("batchGenerateContent"), content=content, resend=False
        )
        return str(created["name"])  # "batches/..."

    async def find(self, marker: str, requests: int, since: float) -> list[str]:
        found: list[str] = []
        token = ""
        for _ in range(FIND_MAX_PAGES):
            page = await self._json("GET", f"{self.model.base_url}/batches?pageSize=100{token}")
            operations = page.get("operations")
            for op in operations if isinstance(operations, list) else ():
                meta = obj(obj(op).get("metadata"))
                if meta.get("displayName") == _display_name(marker):
                    found.append(str(obj(op).get("name")))
            nxt = page.get("nextPageToken")
            if not isinstance(nxt, str) or not nxt:
                break
            token = f"&pageToken={nxt}"
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/{batch_id}")
        meta = obj(data.get("metadata"))
        said = counts(meta.get("batchStats") or data.get("batchStats"))
        status = str(meta.get("state") or data.get("state") or "")
        ended = bool(data.get("done")) or _state(status) in _ENDED
        return Polled(ended, status, said, data)

    def progress(self, counts: dict[str, int], n: int) -> dict[str, int]:
        done = counts.get("successfulRequestCount", 0)
        failed = counts.get("failedRequestCount", 0)
        pending = counts.get("pendingRequestCount", max(0, n - done - failed))
        return {"succeeded": done, "errored": failed, "processing": pending}

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        data = polled.raw
        if _output(data) is None and not data.get("error"):
            data = await self._json("GET", f"{self.model.base_url}/{batch_id}")
        state = _state(polled.status)
        if data.get("error"):
            message = str(obj(data["error"]).get("message") or "the batch failed")
            kind = {"CANCELLED": "canceled", "EXPIRED": "expired"}.get(state, "errored")
            return {"*": self.failed(kind, message)}
        output = _output(data) or {}
        rows: list[tuple[Any, Any]] = []  # (key, row)
        inlined = output.get("inlinedResponses")
        if isinstance(inlined, dict):  # the reference: InlinedResponses {inlinedResponses: []}
            inlined = inlined.get("inlinedResponses")
        if isinstance(inlined, list):  # (the SDKs flatten it to the list itself)
            rows = [(obj(obj(r).get("metadata")).get("key"), r) for r in inlined]
        elif isinstance(output.get("responsesFile"), str):
            base = self.model.base_url.rsplit("/v1beta", 1)[0]
            name = output["responsesFile"]
            raw = await self._request("GET", f"{base}/download/v1beta/{name}:download?alt=media")
            rows = list(_file_rows(raw))
        out: dict[str, Outcome] = {}
        for key, row in rows:
            if not isinstance(key, str):  # names no request: that request has no result
                continue
            if not isinstance(row, dict):
                out[key] = malformed("is not a JSON object")
            elif row.get("response") is not None:
                out[key] = Outcome(row["response"])
            else:
                error = obj(row.get("error"))
                kind = "expired" if state == "EXPIRED" else "errored"
                message = f"{error.get('code', '')}: {error.get('message', '')}"
                out[key] = self.failed(kind, message)
        # a request with no response in a batch that did not succeed never ran
        missing = {"FAILED": "errored", "CANCELLED": "canceled", "EXPIRED": "expired"}.get(state)
        if missing is not None:
            message = f"the batch ended {polled.status} without an answer for this request"
            out.setdefault("*", Outcome(failure=missing, message=message))
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._json("POST", f"{self.model.base_url}/{batch_id}:cancel", body={})


#: The terminal batch states, without their prefix: the API reference's ``BatchState`` is
#: ``BATCH_STATE_SUCCEEDED`` ..., the batch guide's examples compare ``metadata.state``
#: with ``JOB_STATE_SUCCEEDED`` ...; either is read.
_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})


def _display_name(marker: str) -> str:
    return f"langfx_nb-{marker}"


def _file_rows(raw: bytes) -> Iterator[tuple[Any, Any]]:
    """A responses file's lines as ``(key, row)``: a line that cannot be read gives its key
    when one can be found in it, with ``None`` as its row."""
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            yield line_id(line), None
            continue
        yield (row.get("key"), row) if isinstance(row, dict) else (None, None)


def _state(state: str) -> str:
    """``BATCH_STATE_RUNNING`` or ``JOB_STATE_RUNNING`` as ``RUNNING``."""
    for prefix in ("BATCH_STATE_", "JOB_STATE_"):
        if state.startswith(prefix):
            return state[len(prefix) :]
    return state


def _output(data: dict[str, Any]) -> dict[str, Any] | None:
    """A finished batch's ``GenerateContentBatchOutput``: the operation's ``response``, or
    the batch resource's ``output`` (in the operation's ``metadata``, or at the top when
    the batch itself was returned)."""
    output = obj(data.get("metadata")).get("output")
    for found in (data.get("response"), output, data.get("output")):
        if isinstance(found, dict) and ("inlinedResponses" in found or "responsesFile" in found):
            return found
    return None
