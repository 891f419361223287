"""A real HTTP server on 127.0.0.1 speaking OpenAI, Anthropic and Gemini: online calls that
report prompt caching as each provider does, and each provider's batch API.

Base URLs: ``{url}/openai/v1``, ``{url}/anthropic/v1``, ``{url}/gemini/v1beta``. It runs its
own asyncio loop in a daemon thread, so a test may run batches in a subprocess against it.

Tokens are counted as 4 characters of a canonical text of the request (tools, system, then
the turns), so a shared system prompt is a shared token prefix. Caching, per provider:

- OpenAI: automatic for prompts of 1,024 tokens or more, in 128-token increments; reported
  as ``usage.prompt_tokens_details.cached_tokens``; ``prompt_cache_key`` scopes the cache.
- Anthropic: only at ``cache_control`` breakpoints (tools, system blocks, message blocks) of
  at least 1,024 tokens: a prefix seen before is read (``cache_read_input_tokens``), the
  longest new one written (``cache_creation_input_tokens``); ``input_tokens`` is the rest.
- Gemini: implicit, like OpenAI's (``usageMetadata.cachedContentTokenCount``).

Each prompt carries ``item=<id>``; the answer is JSON ``{"item": id, "label": "label-<id>"}``
and ``answered[(provider, id)]`` counts online answers, ``batched`` batch answers. Items
whose id is in ``fail_items`` get a 400 error inside a batch; with ``expire_items`` a batch
ends with those items expired. A batch advances one step per status poll:
``steps_to_finish`` polls after creation it has ended.

Batch wire formats (from the public API references):

- OpenAI: ``POST /files`` (multipart, ``purpose=batch``, a JSONL of ``{custom_id, method,
  url, body}``), ``POST /batches`` ``{input_file_id, endpoint, completion_window}``,
  ``GET /batches/{id}`` (``status`` validating → in_progress → finalizing → completed,
  ``request_counts {total, completed, failed}``, ``output_file_id``, ``error_file_id``),
  ``GET /files/{id}/content`` (JSONL lines ``{id, custom_id, response: {status_code,
  request_id, body}, error}``), ``POST /batches/{id}/cancel``. A file object carries its
  ``status`` (``processed``). Limits: 50,000 requests and 200 MB per input file.
- Anthropic: ``POST /messages/batches`` ``{requests: [{custom_id, params}]}``,
  ``GET /messages/batches/{id}`` (``processing_status`` in_progress → ended,
  ``request_counts {processing, succeeded, errored, canceled, expired}``, ``results_url``),
  ``GET /messages/batches/{id}/results`` (JSONL ``{custom_id, result: {type: succeeded,
  message} | {type: errored, error} | {type: expired} | {type: canceled}}``),
  ``POST /messages/batches/{id}/cancel`` (``cancel_initiated_at`` set from then on). Limits:
  100,000 requests, 256 MB.
- Gemini: ``POST /models/{model}:batchGenerateContent`` ``{batch: {display_name,
  input_config: {requests: {requests: [{request, metadata: {key}}]}}}}`` (either spelling
  of a field name, ``inputConfig`` as google-genai sends it; ``metadata`` optional) → an
  operation ``{name: "batches/…", metadata: {state, batchStats}}``; ``GET /batches/{id}`` (``done``,
  ``metadata.state`` BATCH_STATE_PENDING → RUNNING → SUCCEEDED, ``metadata.batchStats
  {requestCount, successfulRequestCount, failedRequestCount, pendingRequestCount}``,
  the batch's output ``{inlinedResponses: {inlinedResponses: [{response | error, metadata:
  {key}}]}}`` as ``metadata.output`` (where google-genai reads it) and as ``response``),
  ``POST /batches/{id}:cancel``. Inline requests up to 20 MB.

Listing, as the references page it: OpenAI ``GET /batches?limit&after`` (``{data,
has_more, last_id}``, newest first, each batch with the ``metadata`` it was created with),
Anthropic ``GET /messages/batches?limit&after_id`` (``{data, has_more, last_id}``, newest
first; ``created_at`` RFC 3339), Gemini ``GET /batches?pageSize&pageToken``
(``{operations, nextPageToken}``, the batch's ``displayName`` in each operation's metadata).

Faults a test may ask for: ``drop_creates`` / ``drop_uploads``: that many batch creates
(file uploads) are carried out, then the connection is closed without an answer (the
client cannot know whether the batch exists); ``poll_error``: every status poll and
download answered with that ``(status, body)``; ``result_rows(provider, rows)``: the rows
of a result file or of Gemini's inlined responses replaced (a row that is ``bytes`` is
written as it is: a line that is not JSON); ``results_body()``: a result file's download
answered with that ``(headers, chunks)`` instead, sent chunked as it is produced (an
endless file, a gzip bomb); ``echo_key``: an errored request's message quotes the key the
batch was created with.

``variant=True`` keeps to the same references where they leave room, but not the way the
default does (what a fake written by someone else from the same pages may do): result files
list the requests in reverse order (OpenAI, Anthropic: "not guaranteed to be in the same
order as requests"), with ``\r\n`` line ends and no final newline, unknown members first
on every line and object, gzip-encoded when the client accepts it; Anthropic's
``results_url`` points at another listener (``results_host``, another port) that requires
a key (``x-api-key``, or ``Authorization: Bearer`` as the official SDK sends it) and
``anthropic-version`` (the library must not send them there: the key goes only to the API
host, which serves the results too); Gemini's output only as ``metadata.output``; the
first status poll of every batch fails with the provider's documented overload error
(OpenAI 503, Anthropic 529 ``overloaded_error``, Gemini 503 ``UNAVAILABLE``); Gemini
reports states as its batch guide's examples do (``JOB_STATE_RUNNING`` ...). In every
mode the create requests refuse members the references do not list, as the real APIs do.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any, Self
from urllib.parse import parse_qsl

import httpx

from langfx_nb.llms.openai import OpenAI
from tests.http_server import Request, ThreadedServer, response_head, send

_ITEM = re.compile(r"item=(\w+)")
OPENAI_MAX_REQUESTS, OPENAI_MAX_BYTES = 50_000, 200 * 1024 * 1024
ANTHROPIC_MAX_REQUESTS, ANTHROPIC_MAX_BYTES = 100_000, 256 * 1024 * 1024
GEMINI_MAX_INLINE_BYTES = 20 * 1024 * 1024
MIN_CACHE_TOKENS = 1024
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _tokens(chars: int) -> int:
    return -(-chars // 4)


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class ProviderServer(ThreadedServer):
    limit = 2**20  # request heads up to 1 MiB

    def __init__(
        self,
        *,
        steps_to_finish: int = 2,
        fail_items: frozenset[str] = frozenset(),
        expire_items: frozenset[str] = frozenset(),
        completion_tokens: int = 12,
        variant: bool = False,
        drop_creates: int = 0,
        drop_uploads: int = 0,
    ) -> None:
        super().__init__()
        self.drop_creates = drop_creates
        self.drop_uploads = drop_uploads
        self.poll_error: tuple[int, bytes] | None = None
        self.result_rows: Callable[[str, list[Any]], list[Any]] | None = None
        self.results_body: Callable[[], tuple[dict[str, str], AsyncIterator[bytes]]] | None = None
        self.echo_key = False
        self.variant = variant
        #: with ``variant``: where Anthropic's ``results_url`` points
        self.results_host = _ResultsHost(self) if variant else None
        self.gzipped = 0  # responses sent gzip-encoded
        self.poll_errors = 0  # polls answered with an overload error (``variant``)
        self.headers: list[dict[str, str]] = []  # the headers of every request, in order
        self.posted: list[tuple[str, bytes]] = []  # (path, body) of every POST, in order
        self.steps_to_finish = steps_to_finish
        self.fail_items = fail_items
        self.expire_items = expire_items
        self.completion_tokens = completion_tokens
        self.answered: Counter[tuple[str, str]] = Counter()
        self.batched: Counter[tuple[str, str]] = Counter()
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.batches: dict[str, dict[str, Any]] = {}  # id -> state, every provider
        self.files: dict[str, bytes] = {}
        self.uploaded_bytes = 0
        self.query: dict[str, str] = {}  # the query parameters of the request being answered
        self._prefixes: set[tuple[str, str]] = set()
        self._next = 0
        self._lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        super().start()
        if self.results_host is not None:
            self.results_host.start()
        return self

    def stop(self) -> None:
        if self.results_host is not None:
            self.results_host.stop()
        super().stop()

    def create_requests(self, provider: str) -> int:
        """How many batches were asked for (create requests received, accepted or not)."""
        path = {
            "openai": "/openai/v1/batches",
            "anthropic": "/anthropic/v1/messages/batches",
        }.get(provider)
        if path is None:
            return sum(1 for m, p in self.requests if p.endswith(":batchGenerateContent"))
        return sum(1 for m, p in self.requests if m == "POST" and p == path)

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._next += 1
            return f"{prefix}{self._next:06d}"

    # -- HTTP -----------------------------------------------------------------------------------
    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        method, path = request.method, request.path.split("?", 1)[0]
        self.query = dict(parse_qsl(request.path.partition("?")[2]))
        with self._lock:
            self.requests.append((method, path))
            self.headers.append(dict(request.headers))
            if method == "POST":
                self.posted.append((path, request.body))
        if self.results_body is not None and _is_download(method, path):
            await _send_chunked(writer, *self.results_body())
            return False
        if self.poll_error is not None and method == "GET" and "/batches/" in path:
            status, body = self.poll_error
            await send(writer, status, {"content-type": "application/json"}, body)
            return True
        try:
            status, ctype, payload = self._route(method, path, request.headers, request.body)
        except Exception as exc:  # a bug here must show as a 500, not a hang
            status, ctype = 500, "application/json"
            payload = json.dumps({"error": {"message": repr(exc)}}).encode()
        if status == 200 and self._drop(method, path):
            writer.close()  # carried out; the answer is lost with the connection
            return False
        await send(writer, status, *self._encoded(request, ctype, payload))
        return True

    def _drop(self, method: str, path: str) -> bool:
        """Whether this (carried out) create or upload loses its answer (``drop_*``)."""
        if method != "POST":
            return False
        if path.endswith("/files") and self.drop_uploads:
            self.drop_uploads -= 1
            return True
        creates = ("/openai/v1/batches", "/anthropic/v1/messages/batches")
        if (path in creates or path.endswith(":batchGenerateContent")) and self.drop_creates:
            self.drop_creates -= 1
            return True
        return False

    def _encoded(
        self, request: Request, ctype: str, payload: bytes
    ) -> tuple[dict[str, str], bytes]:
        """``variant``: result files gzip-encoded when the client accepts it."""
        headers = {"content-type": ctype}
        accepts = request.headers.get("accept-encoding", "")
        if self.variant and "jsonl" in ctype and "gzip" in accepts:
            with self._lock:
                self.gzipped += 1
            return {**headers, "content-encoding": "gzip"}, gzip.compress(payload)
        return headers, payload

    def _overloaded(self, batch: dict[str, Any]) -> tuple[int, str, bytes] | None:
        """``variant``: the first status poll of each batch fails as the provider documents
        an overloaded or unavailable service; the poll does not count."""
        if not self.variant or batch.get("poll_failed"):
            return None
        batch["poll_failed"] = True
        with self._lock:
            self.poll_errors += 1
        js = "application/json"
        provider = batch["provider"]
        if provider == "openai":
            body = {"error": {"message": "overloaded", "type": "server_error", "code": None}}
            return 503, js, _dump(body)
        if provider == "anthropic":
            body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
            return 529, js, _dump(body)
        return 503, js, _gemini_error(503, "UNAVAILABLE", "The service is currently unavailable.")

    def _file(self, provider: str, rows: list[dict[str, Any]]) -> bytes:
        """A JSONL result file: in order, ``\n`` after each line; ``variant``: reversed,
        ``\r\n`` between lines, none after the last, an unknown member first."""
        if self.variant:
            rows = [{"x_unknown": {"note": "ignore me"}, **r} for r in reversed(rows)]
        lines: list[Any] = rows if self.result_rows is None else self.result_rows(provider, rows)
        out = [r if isinstance(r, bytes) else json.dumps(r).encode() for r in lines]
        if not self.variant:
            return b"".join(line + b"\n" for line in out)
        return b"\r\n".join(out)

    def _error_message(self, batch: dict[str, Any]) -> str:
        """An errored request's message; ``echo_key``: quoting the batch creator's key."""
        return f"bad request (key {batch['key']})" if self.echo_key else "bad request"

    def _page(self, provider: str) -> tuple[list[str], str | None]:
        """The batch ids of one listing page, newest first, and the next page's cursor."""
        ids = [b for b, v in reversed(self.batches.items()) if v["provider"] == provider]
        after = self.query.get(
            {"gemini": "pageToken", "anthropic": "after_id"}.get(provider, "after")
        )
        if after in ids:
            ids = ids[ids.index(after) + 1 :]
        limit = int(self.query.get("pageSize" if provider == "gemini" else "limit", "20"))
        page = ids[:limit]
        return page, (page[-1] if len(ids) > limit else None)

    def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        js = "application/json"
        provider, _, rest = path.lstrip("/").partition("/")
        rest = "/" + rest.partition("/")[2]  # drop the version segment
        if provider == "openai":
            if method == "POST" and rest == "/chat/completions":
                return 200, js, _dump(self.openai_answer(json.loads(body)))
            if method == "POST" and rest == "/files":
                return self._openai_upload(headers, body)
            if method == "POST" and rest == "/batches":
                return self._openai_create(json.loads(body), headers)
            if method == "GET" and rest == "/batches":
                page, more = self._page("openai")
                data = [self._openai_object(b) for b in page]
                listing = {"object": "list", "data": data, "has_more": more is not None}
                return 200, js, _dump({**listing, "last_id": page[-1] if page else None})
            m = re.fullmatch(r"/batches/([\w-]+)(/cancel)?", rest)
            if m:
                return self._openai_batch(m.group(1), cancel=bool(m.group(2)))
            m = re.fullmatch(r"/files/([\w-]+)/content", rest)
            if m and m.group(1) in self.files:
                return 200, "application/jsonl", self.files[m.group(1)]
        if provider == "anthropic":
            if method == "POST" and rest == "/messages":
                return 200, js, _dump(self.anthropic_answer(json.loads(body)))
            if method == "POST" and rest == "/messages/batches":
                return self._anthropic_create(json.loads(body), headers)
            if method == "GET" and rest == "/messages/batches":
                page, more = self._page("anthropic")
                data = [self._anthropic_object(b) for b in page]
                listing = {"data": data, "has_more": more is not None}
                return 200, js, _dump({**listing, "last_id": page[-1] if page else None})
            m = re.fullmatch(r"/messages/batches/([\w-]+)(/cancel|/results)?", rest)
            if m:
                return self._anthropic_batch(m.group(1), m.group(2) or "")
        if provider == "gemini":
            m = re.fullmatch(r"/models/([\w.-]+):(generateContent|batchGenerateContent)", rest)
            if m and m.group(2) == "generateContent":
                return 200, js, _dump(self.gemini_answer(json.loads(body)))
            if m:
                return self._gemini_create(m.group(1), json.loads(body), len(body), headers)
            if method == "GET" and rest == "/batches":
                page, more = self._page("gemini")
                listing: dict[str, Any] = {"operations": [self._gemini_operation(b) for b in page]}
                if more is not None:
                    listing["nextPageToken"] = more
                return 200, js, _dump(listing)
            m = re.fullmatch(r"/batches/([\w-]+)(:cancel)?", rest)
            if m:
                return self._gemini_batch(m.group(1), cancel=bool(m.group(2)))
        return 404, js, _dump({"error": {"message": f"no route {method} {path}"}})

    # -- caching --------------------------------------------------------------------------------
    def _auto_cached(self, scope: str, text: str, *, step: int) -> int:
        """Tokens of the longest cached prefix (multiples of ``step`` from 1,024 up), then
        every such prefix of ``text`` is cached."""
        total = _tokens(len(text))
        cached = 0
        with self._lock:
            b = MIN_CACHE_TOKENS
            while b <= total:
                key = (scope, _hash(text[: b * 4]))
                if key in self._prefixes:
                    cached = b
                else:
                    self._prefixes.add(key)
                b += step
        return cached

    def _breakpoint_cache(self, scope: str, text: str, marks: list[int]) -> tuple[int, int]:
        """(read, written) tokens at Anthropic breakpoints (character offsets in ``text``)."""
        read = written = 0
        with self._lock:
            for mark in marks:
                tokens = _tokens(mark)
                if tokens < MIN_CACHE_TOKENS:
                    continue
                key = (scope, _hash(text[:mark]))
                if key in self._prefixes:
                    read = max(read, tokens)
            for mark in marks:
                tokens = _tokens(mark)
                if tokens < MIN_CACHE_TOKENS or tokens <= read:
                    continue
                key = (scope, _hash(text[:mark]))
                if key not in self._prefixes:
                    self._prefixes.add(key)
                    written = max(written, tokens - read)
        return read, written

    def _item(self, text: str) -> str:
        match = _ITEM.search(text)
        return match.group(1) if match else "?"

    def _content(self, item: str) -> str:
        return json.dumps({"item": item, "label": f"label-{item}"})

    # -- online answers -------------------------------------------------------------------------
    def openai_answer(self, request: dict[str, Any], *, count: bool = True) -> dict[str, Any]:
        text = json.dumps(request.get("tools") or []) + "".join(
            m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
            for m in request["messages"]
        )
        item = self._item(text)
        if count:
            with self._lock:
                self.answered["openai", item] += 1
        scope = f"openai:{request.get('model')}:{request.get('prompt_cache_key')}"
        cached = self._auto_cached(scope, text, step=128)
        prompt, completion = _tokens(len(text)), self.completion_tokens
        return {
            "id": f"chatcmpl-{item}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self._content(item)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }

    def anthropic_answer(self, request: dict[str, Any], *, count: bool = True) -> dict[str, Any]:
        text, marks = "", []
        for tool in request.get("tools") or []:
            text += json.dumps({k: v for k, v in tool.items() if k != "cache_control"})
            if "cache_control" in tool:
                marks.append(len(text))
        system = request.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        for block in blocks:
            text += block["text"]
            if "cache_control" in block:
                marks.append(len(text))
        for turn in request["messages"]:
            content = turn["content"]
            content = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in content:
                text += json.dumps({k: v for k, v in block.items() if k != "cache_control"})
                if "cache_control" in block:
                    marks.append(len(text))
        item = self._item(text)
        if count:
            with self._lock:
                self.answered["anthropic", item] += 1
        read, written = self._breakpoint_cache(f"anthropic:{request.get('model')}", text, marks)
        total = _tokens(len(text))
        return {
            "id": f"msg_{item}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "m"),
            "content": [{"type": "text", "text": self._content(item)}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": total - read - written,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "output_tokens": self.completion_tokens,
            },
        }

    def gemini_answer(self, request: dict[str, Any], *, count: bool = True) -> dict[str, Any]:
        system = request.get("systemInstruction") or request.get("system_instruction") or {}
        text = "".join(p.get("text", "") for p in system.get("parts", []))
        text += json.dumps(request.get("tools") or [])
        for turn in request.get("contents", []):
            text += "".join(p.get("text", json.dumps(p)) for p in turn.get("parts", []))
        item = self._item(text)
        if count:
            with self._lock:
                self.answered["gemini", item] += 1
        cached = self._auto_cached("gemini", text, step=1)
        prompt = _tokens(len(text))
        usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": self.completion_tokens,
            "totalTokenCount": prompt + self.completion_tokens,
        }
        if cached:
            usage["cachedContentTokenCount"] = cached
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": self._content(item)}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": "gemini-test",
        }

    # -- batches: common ------------------------------------------------------------------------
    def _new_batch(
        self, provider: str, items: list[tuple[str, str, dict[str, Any]]], headers: dict[str, str]
    ) -> str:
        batch_id = self._id({"openai": "batch_", "anthropic": "msgbatch_", "gemini": ""}[provider])
        key = headers.get("authorization", "").removeprefix("Bearer ")
        self.batches[batch_id] = {
            "key": key or headers.get("x-api-key") or headers.get("x-goog-api-key"),
            "provider": provider,
            "items": items,  # (custom id, item id, request body)
            "polls": 0,
            "status": "pending",
            "results": None,
            "created_at": int(time.time()),
        }
        return batch_id

    def _advance(self, batch: dict[str, Any]) -> None:
        """One poll: after ``steps_to_finish`` polls a pending batch has run."""
        if batch["status"] in ("ended", "cancelled"):
            return
        batch["polls"] += 1
        if batch["status"] == "cancelling" or batch["polls"] >= self.steps_to_finish:
            self._finish(batch, cancelled=batch["status"] == "cancelling")
        else:
            batch["status"] = "running"

    def _finish(self, batch: dict[str, Any], *, cancelled: bool) -> None:
        provider = batch["provider"]
        answer = {
            "openai": self.openai_answer,
            "anthropic": self.anthropic_answer,
            "gemini": self.gemini_answer,
        }[provider]
        results = []
        for custom_id, item, body in batch["items"]:
            if cancelled:
                results.append((custom_id, "canceled", None))
            elif item in self.expire_items:  # once: a resubmitted request runs
                self.expire_items = self.expire_items - {item}
                results.append((custom_id, "expired", None))
            elif item in self.fail_items:
                results.append((custom_id, "errored", None))
            else:
                with self._lock:
                    self.batched[provider, item] += 1
                results.append((custom_id, "succeeded", answer(body, count=False)))
        batch["results"] = results
        batch["status"] = "cancelled" if cancelled else "ended"
        batch["ended_at"] = int(time.time())

    def _counts(self, batch: dict[str, Any]) -> Counter[str]:
        """The request counts a poll reports: while running, a growing share of the requests
        succeeded (as a provider reports them while it works through a batch)."""
        if batch["results"] is None:
            n = len(batch["items"])
            done = n * batch["polls"] // self.steps_to_finish if batch["status"] == "running" else 0
            return Counter(succeeded=done)
        return Counter(kind for _, kind, _ in batch["results"])

    # -- OpenAI batch ---------------------------------------------------------------------------
    def _openai_upload(self, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
        ctype = headers.get("content-type", "")
        m = re.search(r"boundary=\"?([^\";]+)\"?", ctype)
        if not m:
            return 400, "application/json", _error("invalid_request_error", "not multipart")
        fields: dict[str, bytes] = {}
        for part in body.split(b"--" + m.group(1).encode())[1:-1]:
            head, _, data = part.partition(b"\r\n\r\n")
            name = re.search(rb'name="([^"]+)"', head)
            if name:
                fields[name.group(1).decode()] = data[:-2]  # the CRLF before the boundary
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return 400, "application/json", _error("invalid_request_error", "purpose/file")
        data = fields["file"]
        if len(data) > OPENAI_MAX_BYTES:
            return 400, "application/json", _error("invalid_request_error", "file too large")
        file_id = self._id("file-")
        self.files[file_id] = data
        self.uploaded_bytes += len(data)
        return (
            200,
            "application/json",
            _dump(
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(data),
                    "created_at": int(time.time()),
                    "filename": "batch.jsonl",
                    "purpose": "batch",
                    "status": "processed",
                }
            ),
        )

    def _openai_create(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        unknown = set(body) - _OPENAI_CREATE
        if unknown:  # as the API: "Unrecognized request argument supplied"
            return 400, "application/json", _error("invalid_request_error", f"{unknown}")
        data = self.files.get(body.get("input_file_id", ""))
        if data is None or body.get("completion_window") != "24h":
            return 400, "application/json", _error("invalid_request_error", "bad batch")
        endpoint = body.get("endpoint")
        items = []
        for line in data.splitlines():
            row = json.loads(line)
            if row.get("method") != "POST" or row.get("url") != endpoint:
                return 400, "application/json", _error("invalid_request_error", "bad line")
            text = json.dumps(row["body"]["messages"])
            items.append((row["custom_id"], self._item(text), row["body"]))
        if len(items) > OPENAI_MAX_REQUESTS:
            return 400, "application/json", _error("invalid_request_error", "too many requests")
        if len({c for c, _, _ in items}) != len(items):
            return 400, "application/json", _error("invalid_request_error", "duplicate custom_id")
        metadata = body.get("metadata")
        if metadata is not None and (
            not isinstance(metadata, dict)
            or len(metadata) > 16
            or not all(isinstance(v, str) and len(v) <= 512 for v in metadata.values())
        ):
            return 400, "application/json", _error("invalid_request_error", "metadata")
        batch_id = self._new_batch("openai", items, headers)
        self.batches[batch_id]["input_file_id"] = body["input_file_id"]
        self.batches[batch_id]["metadata"] = metadata
        return 200, "application/json", _dump(self._openai_object(batch_id))

    def _openai_object(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        status = {
            "pending": "validating",
            "running": "in_progress",
            "cancelling": "cancelling",
            "cancelled": "cancelled",
            "ended": "completed",
        }[batch["status"]]
        counts = self._counts(batch)
        if status == "completed" and counts["expired"]:
            status = "expired"
        out_id, err_id = batch.get("output_file_id"), batch.get("error_file_id")
        if batch["results"] is not None and out_id is None:
            out, err = [], []
            for n, (custom_id, kind, answer) in enumerate(batch["results"]):
                row: dict[str, Any] = {"id": f"batch_req_{batch_id}_{n}", "custom_id": custom_id}
                if kind == "succeeded":
                    row["response"] = {"status_code": 200, "request_id": f"req_{n}", "body": answer}
                    row["error"] = None
                    out.append(row)
                elif kind == "errored":
                    row["response"] = {
                        "status_code": 400,
                        "request_id": f"req_{n}",
                        "body": {
                            "error": {
                                "message": self._error_message(batch),
                                "type": "invalid_request_error",
                            }
                        },
                    }
                    row["error"] = None
                    err.append(row)
                else:
                    code = "batch_expired" if kind == "expired" else "batch_cancelled"
                    row["response"] = None
                    row["error"] = {"code": code, "message": f"This request was {kind}."}
                    err.append(row)
            if out:
                out_id = batch["output_file_id"] = self._id("file-")
                self.files[out_id] = self._file("openai", out)
            if err:
                err_id = batch["error_file_id"] = self._id("file-")
                self.files[err_id] = self._file("openai", err)
        total = len(batch["items"])
        done = counts["succeeded"]
        unknown = {"x_unknown": {"note": "ignore me"}} if self.variant else {}
        return {
            **unknown,
            "id": batch_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": None,
            "input_file_id": batch.get("input_file_id"),
            "completion_window": "24h",
            "status": status,
            "output_file_id": out_id,
            "error_file_id": err_id,
            "created_at": batch["created_at"],
            "request_counts": {
                "total": total,
                "completed": done,
                "failed": total - done if batch["results"] is not None else 0,
            },
            "metadata": batch.get("metadata"),
        }

    def _openai_batch(self, batch_id: str, *, cancel: bool) -> tuple[int, str, bytes]:
        batch = self.batches.get(batch_id)
        if batch is None or batch["provider"] != "openai":
            return 404, "application/json", _error("not_found", "no such batch")
        if cancel:
            if batch["status"] in ("pending", "running"):
                batch["status"] = "cancelling"
        else:
            failed = self._overloaded(batch)
            if failed is not None:
                return failed
            self._advance(batch)
        return 200, "application/json", _dump(self._openai_object(batch_id))

    # -- Anthropic batch ------------------------------------------------------------------------
    def _anthropic_create(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        requests = body.get("requests")
        if set(body) != {"requests"}:  # as the API: "Extra inputs are not permitted"
            return 400, "application/json", _error("invalid_request_error", "extra inputs")
        if not isinstance(requests, list) or not requests:
            return 400, "application/json", _error("invalid_request_error", "requests")
        if len(requests) > ANTHROPIC_MAX_REQUESTS:
            return 400, "application/json", _error("invalid_request_error", "too many requests")
        items = []
        for r in requests:
            if not _CUSTOM_ID.match(str(r.get("custom_id", ""))) or "params" not in r:
                return 400, "application/json", _error("invalid_request_error", "custom_id")
            items.append((r["custom_id"], self._item(json.dumps(r["params"])), r["params"]))
        batch_id = self._new_batch("anthropic", items, headers)
        return 200, "application/json", _dump(self._anthropic_object(batch_id))

    def _anthropic_object(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        counts = self._counts(batch)
        ended = batch["results"] is not None
        n = len(batch["items"])
        host = self.results_host.url if self.results_host is not None else self.url
        unknown = {"x_unknown": {"note": "ignore me"}} if self.variant else {}
        return {
            **unknown,
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended"
            if ended
            else ("canceling" if batch["status"] == "cancelling" else "in_progress"),
            "request_counts": {
                "processing": 0 if ended else n - counts["succeeded"],
                "succeeded": counts["succeeded"],
                "errored": counts["errored"],
                "canceled": counts["canceled"],
                "expired": counts["expired"],
            },
            "ended_at": "2026-12-03T00:00:00Z" if ended else None,
            "created_at": _rfc3339(batch["created_at"]),
            "expires_at": "2026-12-04T00:00:00Z",
            "cancel_initiated_at": batch.get("cancel_initiated_at"),
            "results_url": f"{host}/anthropic/v1/messages/batches/{batch_id}/results"
            if ended
            else None,
        }

    def anthropic_results(self, batch_id: str) -> tuple[int, str, bytes]:
        return self._anthropic_batch(batch_id, "/results")

    def _anthropic_batch(self, batch_id: str, what: str) -> tuple[int, str, bytes]:
        batch = self.batches.get(batch_id)
        if batch is None or batch["provider"] != "anthropic":
            return 404, "application/json", _error("not_found_error", "no such batch")
        if what == "/results":
            if batch["results"] is None:
                return 400, "application/json", _error("invalid_request_error", "not ended")
            rows = []
            for custom_id, kind, answer in batch["results"]:
                result: dict[str, Any] = {"type": kind}
                if kind == "succeeded":
                    result["message"] = answer
                elif kind == "errored":
                    result["error"] = {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": self._error_message(batch),
                        },
                    }
                rows.append({"custom_id": custom_id, "result": result})
            return 200, "application/x-jsonl", self._file("anthropic", rows)
        if what == "/cancel":
            if batch["status"] in ("pending", "running"):
                batch["status"] = "cancelling"
                batch["cancel_initiated_at"] = _rfc3339(time.time())
        else:
            failed = self._overloaded(batch)
            if failed is not None:
                return failed
            self._advance(batch)
        return 200, "application/json", _dump(self._anthropic_object(batch_id))

    # -- Gemini batch ---------------------------------------------------------------------------
    def _gemini_create(
        self, model: str, body: dict[str, Any], size: int, headers: dict[str, str]
    ) -> tuple[int, str, bytes]:
        batch = body.get("batch") if isinstance(body, dict) else None
        try:  # proto3 JSON: the API takes either spelling of a field name
            config = batch.get("input_config") or batch["inputConfig"]  # type: ignore[union-attr]
            rows = config["requests"]["requests"]
        except (KeyError, TypeError, AttributeError):
            return 400, "application/json", _gemini_error(400, "INVALID_ARGUMENT", "input_config")
        if size > GEMINI_MAX_INLINE_BYTES:  # the request's bytes, as sent
            return 400, "application/json", _gemini_error(400, "INVALID_ARGUMENT", "too large")
        items = [
            (_obj(r.get("metadata")).get("key"), self._item(json.dumps(r["request"])), r["request"])
            for r in rows
        ]
        batch_id = self._new_batch("gemini", items, headers)
        self.batches[batch_id]["model"] = model
        self.batches[batch_id]["display_name"] = batch.get("display_name") or batch.get(
            "displayName"
        )
        return 200, "application/json", _dump(self._gemini_operation(batch_id))

    def _gemini_operation(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        counts = self._counts(batch)
        ended = batch["results"] is not None
        state = {
            "pending": "BATCH_STATE_PENDING",
            "running": "BATCH_STATE_RUNNING",
            "cancelling": "BATCH_STATE_RUNNING",
            "cancelled": "BATCH_STATE_CANCELLED",
            "ended": "BATCH_STATE_SUCCEEDED",
        }[batch["status"]]
        if self.variant:  # the batch guide's words for the same states
            state = state.replace("BATCH_STATE_", "JOB_STATE_")
        n = len(batch["items"])
        meta = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{batch.get('model')}",
            "displayName": batch.get("display_name"),
            "state": state,
            "name": f"batches/{batch_id}",
            "batchStats": {
                "requestCount": str(n),
                "successfulRequestCount": str(counts["succeeded"]),
                "failedRequestCount": str(n - counts["succeeded"]) if ended else "0",
                "pendingRequestCount": "0" if ended else str(n - counts["succeeded"]),
            },
        }
        op: dict[str, Any] = {"name": f"batches/{batch_id}", "metadata": meta}
        if ended:
            op["done"] = True
            inlined = []
            for custom_id, kind, answer in batch["results"]:
                # metadata is optional: a request sent without it is answered without it
                row: dict[str, Any] = {} if custom_id is None else {"metadata": {"key": custom_id}}
                if kind == "succeeded":
                    row["response"] = answer
                else:
                    message = self._error_message(batch) if kind == "errored" else kind
                    row["error"] = {"code": 400 if kind == "errored" else 499, "message": message}
                inlined.append(row)
            if self.result_rows is not None:
                inlined = self.result_rows("gemini", inlined)
            output = {"inlinedResponses": {"inlinedResponses": inlined}}
            meta["output"] = output  # the batch resource's output: where google-genai reads
            if not self.variant:  # the operation's response, as the reference also allows
                op["response"] = {
                    "@type": "type.googleapis.com/"
                    "google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                    **output,
                }
        return op

    def _gemini_batch(self, batch_id: str, *, cancel: bool) -> tuple[int, str, bytes]:
        batch = self.batches.get(batch_id)
        if batch is None or batch["provider"] != "gemini":
            return 404, "application/json", _gemini_error(404, "NOT_FOUND", "no such batch")
        if cancel:
            if batch["status"] in ("pending", "running"):
                batch["status"] = "cancelling"
            return 200, "application/json", b"{}"
        failed = self._overloaded(batch)
        if failed is not None:
            return failed
        self._advance(batch)
        return 200, "application/json", _dump(self._gemini_operation(batch_id))


#: the members of OpenAI's create-batch request
_OPENAI_CREATE = frozenset(
    {"input_file_id", "endpoint", "completion_window", "metadata", "output_expires_after"}
)


class _ResultsHost(ThreadedServer):
    """Another listener serving Anthropic's result files (``variant``): ``results_url`` is
    absolute and may point anywhere. It refuses a request without the API's headers."""

    def __init__(self, main: ProviderServer) -> None:
        super().__init__()
        self.main = main
        self.requests: list[tuple[str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"

    async def respond(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        self.requests.append((request.path, dict(request.headers)))
        m = re.fullmatch(r"/anthropic/v1/messages/batches/([\w-]+)/results", request.path)
        js = "application/json"
        if m is None:
            status, ctype, payload = 404, js, _error("not_found_error", request.path)
        elif not _anthropic_key(request.headers) or not request.headers.get("anthropic-version"):
            status, ctype, payload = 401, js, _error("authentication_error", "no key")
        else:
            status, ctype, payload = self.main.anthropic_results(m.group(1))
        await send(writer, status, *self.main._encoded(request, ctype, payload))
        return True


def _anthropic_key(headers: dict[str, str]) -> str:
    """The key a request authenticates with: ``x-api-key``, or ``Authorization: Bearer``
    (what the official SDK sends)."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else "")


def _is_download(method: str, path: str) -> bool:
    """A result file's download (OpenAI file content, Anthropic results)."""
    return method == "GET" and (path.endswith("/content") or path.endswith("/results"))


async def _send_chunked(
    writer: asyncio.StreamWriter, headers: dict[str, str], chunks: AsyncIterator[bytes]
) -> None:
    """A 200 response sent with chunked transfer encoding as ``chunks`` come, until they
    end or the client goes away."""
    head = {"content-type": "application/jsonl", **headers, "transfer-encoding": "chunked"}
    writer.write(response_head(200, head))
    try:
        async for chunk in chunks:
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        pass


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dump(data: Any) -> bytes:
    return json.dumps(data).encode()


def _error(kind: str, message: str) -> bytes:
    return _dump({"error": {"type": kind, "message": message}})


def _gemini_error(code: int, status: str, message: str) -> bytes:
    return _dump({"error": {"code": code, "status": status, "message": message}})


def openai_model(server: ProviderServer, **kw: Any) -> OpenAI:
    """langfx_nb's OpenAI model (gpt-4o-mini) speaking to ``server``'s OpenAI routes."""
    return OpenAI(
        "gpt-4o-mini",
        api_key="sk-test",
        base_url=f"{server.url}/openai/v1",
        transport=httpx.AsyncHTTPTransport(),
        **kw,
    )
