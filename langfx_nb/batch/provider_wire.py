"""The three providers' batch APIs, as ``lf.engines.ProviderBatch`` uses them.

A ``Wire`` turns requests into the provider's batch entries, submits a batch of them,
polls it, reads its results and cancels it, through the model's own HTTP client, key and
base URL (``HTTPModel.api_request``). Formats follow the public API references:

- OpenAI Batch API: a JSONL file (``{custom_id, method: "POST", url:
  "/v1/chat/completions", body}`` per line) uploaded to ``POST /files`` with
  ``purpose=batch``; ``POST /batches {input_file_id, endpoint, completion_window: "24h"}``;
  ``GET /batches/{id}`` until ``status`` is ``completed``/``failed``/``expired``/
  ``cancelled``; ``GET /files/{output_file_id|error_file_id}/content``;
  ``POST /batches/{id}/cancel``. At most 50,000 requests and 200 MB per batch.
- Anthropic Message Batches: ``POST /messages/batches {requests: [{custom_id, params}]}``;
  ``GET /messages/batches/{id}`` until ``processing_status`` is ``ended``; the JSONL at
  ``results_url`` (``{custom_id, result: {type: succeeded|errored|canceled|expired}}``);
  ``POST /messages/batches/{id}/cancel``. At most 100,000 requests and 256 MB. A request
  with ``temperature``, ``top_p`` or ``top_k`` is refused before anything is sent.
- Gemini batch mode: ``POST /models/{model}:batchGenerateContent`` with inline requests
  (``{request, metadata: {key}}``), under 20 MB per batch; ``GET /batches/{id}`` (a
  long-running operation: ``done``, ``metadata.state`` (``BATCH_STATE_*`` in the API
  reference, ``JOB_STATE_*`` in the batch guide: both read), ``metadata.batchStats``, then
  ``response.inlinedResponses``, or a ``responsesFile`` read from the download endpoint);
  ``POST /batches/{id}:cancel``.

Read as the references allow, not as one server happens to write: result lines in any
order and key order, ``\r\n`` or ``\n``, with or without a final newline, gzip or not
(httpx decodes it), unknown members ignored; ``output_file_id``/``error_file_id``/
``results_url`` may be null. A request with no result in a batch that expired, was
cancelled or failed gets that failure (``"*"``: the fallback for every request without a
line).

Read as data from elsewhere: every answer is read as it arrives and refused past
``read_limit`` bytes (decoded: a small gzip cannot expand without bound); a result line
that is not JSON, nests too deep, or holds something else where an object belongs fails
only its request (``failure="malformed"``, not resubmitted: it was answered and billed),
and a line that names no request is skipped (its request has no result). The key goes only
to the model's own API host: a ``results_url`` elsewhere is not followed (the results are
read from the documented path under the model's ``base_url``). A provider's per-request
error message is kept without the model's key (``LanguageModel.redact``) or anything
shaped like a credential.

Creating a batch is not idempotent: the upload and the create are sent once
(``api_request(resend=False)``). Each create carries a marker, unique to it (OpenAI: the
batch's ``metadata``; Gemini: its ``display_name``); after a create whose answer was lost,
``find`` lists the account's batches for the one the create made (Anthropic's batches
carry no metadata: one created since, with as many requests).

``Outcome`` is one item's answer: the provider's response body (decoded by the model's
``decode`` exactly as an online answer) or why there is none (``errored``, ``expired``,
``canceled``). A succeeded outcome keeps the result's line as bytes and parses the body
when it is read (100,000 parsed response bodies cost hundreds of MB; their lines, a
fraction). Each line is parsed once: a succeeded OpenAI or Anthropic line is known by its
start (``_OPENAI_OK``, ``_ANTHROPIC_OK``: the top-level custom id and the success marker,
in the order the providers write them) and parsed only when the replay reads its body; any
other line is parsed whole at once. ``Spool`` keeps the entries of a run on disk until they
are submitted.
"""

from __future__ import annotations

import calendar
import contextlib
import json
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar
from urllib.parse import urlsplit

from ..errors import InvalidRequestError, ProviderBatchError, StreamProtocolError
from ..llms.anthropic import Anthropic
from ..llms.base import LanguageModel, LMRequest
from ..llms.gemini import Gemini
from ..llms.openai import OpenAI
from ..redact import redact_secrets

__all__ = ["MALFORMED_LINE", "Outcome", "Polled", "Wire", "wire_for"]

MB = 1024 * 1024
#: What reading one result line (or row) may raise on input that is not what the reference
#: says; the line then fails only its request.
MALFORMED_LINE = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError)
#: How far back a listing looks for the batch a lost create made (clocks differ).
FIND_SKEW_S = 300.0
#: At most this many listing pages are read to find it.
FIND_MAX_PAGES = 20


@dataclass(frozen=True, slots=True)
class Outcome:
    """One item's result: ``body`` (the provider's answer) or ``failure`` (``errored``,
    ``expired`` or ``canceled``) with a short ``message``. An outcome made with ``raw``
    (the JSON text of a result line) and ``path`` (the keys leading to the answer in it)
    parses its body when ``body`` is read."""

    value: Any = None
    failure: str | None = None
    message: str = ""
    raw: bytes | None = None
    path: tuple[str, ...] = ()

    @property
    def body(self) -> Any:
        """The answer; ``ProviderBatchError`` when its line is not JSON."""
        if self.raw is None:
            return self.value
        try:
            data = json.loads(self.raw)
        except (ValueError, RecursionError):
            raise ProviderBatchError(
                "the provider's result line for this request is not valid JSON "
                f"({len(self.raw)} bytes)",
                failure="malformed",
            ) from None
        for key in self.path:
            data = data.get(key) if isinstance(data, dict) else None
        return data


class Spool:
    """A run's batch entries in a temporary file, each known by its ``(offset, length)``:
    100,000 requests of a kilobyte or more stay on disk, not in memory, until a batch
    sends them (``entries``, ``copy_to``)."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self.size = 0

    def add(self, entry: bytes) -> tuple[int, int]:
        offset = self.size
        self.file.write(entry)
        self.size += len(entry)
        return offset, len(entry)

    def entries(self, spans: Iterable[tuple[int, int]]) -> Iterator[bytes]:
        """The entries at ``spans``, read back one by one."""
        self.file.flush()
        fd = self.file.fileno()
        for offset, length in spans:
            yield os.pread(fd, length, offset)

    def close(self) -> None:
        self.file.close()


@dataclass(slots=True)
class Polled:
    """What one poll said: ``ended``, the provider's ``status`` and ``counts``."""

    ended: bool
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


class Wire:
    """One provider's batch API for one model (see the module docstring)."""

    name: ClassVar[str] = ""
    max_requests: ClassVar[int] = 0
    max_bytes: ClassVar[int] = 0
    overhead: ClassVar[int] = 64  # bytes around the entries (JSON wrapper)

    def __init__(self, model: Any, read_limit: int = 1024 * MB) -> None:
        self.model = model
        self.read_limit = read_limit

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        raise NotImplementedError

    async def submit(self, entries: Iterable[bytes], marker: str) -> str:
        """Create a batch of ``entries`` (read once, in order), marked with ``marker`` where
        the provider keeps one; the provider's batch id. Sent once, never resent."""
        raise NotImplementedError

    async def find(self, marker: str, requests: int, since: float) -> list[str]:
        """The ids of the account's batches that a create of ``requests`` requests marked
        ``marker``, started at ``since`` (epoch seconds), may have made."""
        raise NotImplementedError

    async def poll(self, batch_id: str) -> Polled:
        raise NotImplementedError

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> None:
        raise NotImplementedError

    def body(self, request: LMRequest) -> dict[str, Any]:
        body: dict[str, Any] = self.model.encode(request)
        extra = self.model.extra_body
        return {**body, **extra} if extra else body

    async def _request(self, method: str, url: str, **kw: Any) -> bytes:
        """``api_request`` with the key only for the model's own host, the answer bounded."""
        if not _same_origin(url, self.model.base_url):  # never reached: callers build urls
            raise ProviderBatchError(f"{self.name} batch: refusing to send the key to {url}")
        try:
            raw: bytes = await self.model.api_request(method, url, max_bytes=self.read_limit, **kw)
        except StreamProtocolError as exc:  # the one StreamProtocolError here: the bound
            raise ProviderBatchError(
                f"{self.name} batch: an answer is larger than {self.read_limit} bytes "
                "(ProviderBatch(max_result_bytes=...) sets this bound)"
            ) from exc
        return raw

    async def _json(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        raw = await self._request(method, url, **kw)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise StreamProtocolError(f"{self.name} batch: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise StreamProtocolError(f"{self.name} batch: the answer is not a JSON object")
        return data

    async def _listing(self, url: str, cursor: str, after: str) -> AsyncIterator[dict[str, Any]]:
        """The objects of a paged listing (``FIND_MAX_PAGES`` pages at most), newest first:
        ``data`` and ``has_more``; the next page from ``after``=the page's ``last_id``."""
        query = ""
        for _ in range(FIND_MAX_PAGES):
            page = await self._json("GET", f"{url}?limit=100{query}")
            data = page.get("data")
            for row in data if isinstance(data, list) else ():
                if isinstance(row, dict):
                    yield row
            last = page.get(cursor)
            if not page.get("has_more") or not isinstance(last, str):
                return
            query = f"&{after}={last}"

    def failed(self, failure: str, message: str) -> Outcome:
        """An outcome without an answer; its message kept without secrets."""
        return Outcome(failure=failure, message=redact_secrets(self.model.redact(message))[:300])


def _counts(counts: Any) -> dict[str, int]:
    """A poll's request counts as ints: JSON numbers, or numeric strings (Gemini's int64
    counts); any other member (an unknown field, a ``null``) is left out."""
    out: dict[str, int] = {}
    if isinstance(counts, dict):
        for key, value in counts.items():
            if isinstance(value, bool):
                continue
            if isinstance(value, int):
                out[str(key)] = value
            elif isinstance(value, (str, float)):
                with contextlib.suppress(ValueError, OverflowError):
                    out[str(key)] = int(value)
    return out


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a member of the wrong type
    reads as absent)."""
    return value if isinstance(value, dict) else {}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def _same_origin(url: str, base_url: str) -> bool:
    return _origin(url) == _origin(base_url)


#: A request's id near the start of a result line that could not be read as JSON.
_LINE_ID = re.compile(rb'"(?:custom_id|key)"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


def _malformed(what: str) -> Outcome:
    return Outcome(failure="malformed", message=f"its result {what}")


def _line_id(line: bytes) -> str | None:
    found = _LINE_ID.search(line[:4096])
    return found.group(1).decode() if found is not None else None


#: The member of an OpenAI batch's ``metadata`` holding its create's marker.
MARKER_KEY = "langfx_nb_batch"

#: A succeeded OpenAI result line, by its start: ``{"id": "...", "custom_id": "...",
#: "response": {"status_code": 200`` (the members in the Batch API's order; group 1 is the
#: custom id). Anchored at the line's first brace, it can only match top-level members.
_OPENAI_OK = re.compile(
    rb'\s*\{\s*"id"\s*:\s*"[^"\\]*"\s*,\s*"custom_id"\s*:\s*"([^"\\]*)"\s*,'
    rb'\s*"response"\s*:\s*\{\s*"status_code"\s*:\s*200\s*[,}]'
)
#: A succeeded Anthropic result line: ``{"custom_id": "...", "result": {"type": "succeeded"``.
_ANTHROPIC_OK = re.compile(
    rb'\s*\{\s*"custom_id"\s*:\s*"([^"\\]*)"\s*,'
    rb'\s*"result"\s*:\s*\{\s*"type"\s*:\s*"succeeded"\s*[,}]'
)


def _outcomes(
    raw: bytes,
    succeeded: re.Pattern[bytes],
    path: tuple[str, ...],
    parse: Callable[[dict[str, Any], bytes], Outcome],
) -> Iterator[tuple[str, Outcome]]:
    """Each JSONL line of ``raw`` as ``(custom id, outcome)``: a line ``succeeded`` matches
    is kept unparsed (its body at ``path`` is parsed when read); any other is parsed whole
    and read by ``parse(row, line)``."""
    for line in raw.splitlines():
        found = succeeded.match(line)
        if found is not None:
            yield found.group(1).decode(), Outcome(raw=line, path=path)
        elif line.strip():
            cid: str | None = None
            try:
                row = json.loads(line)
                cid = _obj(row).get("custom_id") if isinstance(row, dict) else None
                if not isinstance(cid, str):
                    raise TypeError("no custom_id")
                outcome = parse(row, line)
            except MALFORMED_LINE:
                cid = cid if isinstance(cid, str) else _line_id(line)
                if cid is None:  # names no request: that request has no result
                    continue
                outcome = _malformed("is not what the batch API's reference describes")
            yield cid, outcome


class OpenAIWire(Wire):
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
            if _obj(batch.get("metadata")).get(MARKER_KEY) == marker:
                found.append(str(batch.get("id")))
            created = batch.get("created_at")
            if isinstance(created, (int, float)) and created < since - FIND_SKEW_S:
                break
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/batches/{batch_id}")
        status = str(data.get("status"))
        counts = _counts(data.get("request_counts"))
        ended = status in ("completed", "failed", "expired", "cancelled")
        return Polled(ended, status, counts, data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        if polled.status == "failed":  # the whole batch was refused (validation)
            errors = _obj(polled.raw.get("errors")).get("data")
            first = _obj(errors[0]) if isinstance(errors, list) and errors else {}
            message = str(first.get("message") or "the batch failed validation")
            return {"*": self.failed("errored", message)}
        for key in ("output_file_id", "error_file_id"):
            file_id = polled.raw.get(key)
            if not file_id or not isinstance(file_id, str):
                continue
            raw = await self._request("GET", f"{self.model.base_url}/files/{file_id}/content")
            ok = ("response", "body")
            out.update(_outcomes(raw, _OPENAI_OK, ok, self._outcome))
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
        error = _obj(row.get("error"))
        code = str(error.get("code") or "")
        if response:
            detail = _obj(_obj(response.get("body")).get("error"))
            message = f"HTTP {response.get('status_code')}: {detail.get('message') or ''}"
            return self.failed("errored", message)
        if code == "batch_expired":
            return Outcome(failure="expired", message="the batch expired before this request ran")
        if code == "batch_cancelled":
            return Outcome(failure="canceled", message="the batch was cancelled")
        return self.failed("errored", str(error.get("message") or code))


class AnthropicWire(Wire):
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
        """Message batches keep no metadata: a batch created since ``since`` (less the
        clock skew allowed) with ``requests`` requests."""
        found: list[str] = []
        url = f"{self.model.base_url}/messages/batches"
        async for batch in self._listing(url, "last_id", "after_id"):
            created = _epoch(batch.get("created_at"))
            if created is not None and created < since - FIND_SKEW_S:
                break
            counts = _counts(batch.get("request_counts"))
            if sum(counts.values()) == requests:
                found.append(str(batch.get("id")))
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/messages/batches/{batch_id}")
        status = str(data.get("processing_status"))
        counts = _counts(data.get("request_counts"))
        return Polled(status == "ended", status, counts, data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        url = polled.raw.get("results_url")
        if not isinstance(url, str) or not _same_origin(url, self.model.base_url):
            url = f"{self.model.base_url}/messages/batches/{batch_id}/results"  # the key stays
        raw = await self._request("GET", url)
        return dict(_outcomes(raw, _ANTHROPIC_OK, ("result", "message"), self._outcome))

    def _outcome(self, row: dict[str, Any], raw: bytes) -> Outcome:
        result = row.get("result")
        if not isinstance(result, dict):
            raise TypeError("result is not an object")
        kind = result.get("type")
        if kind == "succeeded":
            return Outcome(raw=raw, path=("result", "message"))
        if kind in ("expired", "canceled"):
            return Outcome(failure=str(kind), message=f"the request was {kind}")
        error = _obj(_obj(result.get("error")).get("error"))
        return self.failed(
            "errored", f"{error.get('type') or 'error'}: {error.get('message') or ''}"
        )

    async def cancel(self, batch_id: str) -> None:
        await self._json(
            "POST", f"{self.model.base_url}/messages/batches/{batch_id}/cancel", body={}
        )


class GeminiWire(Wire):
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
                meta = _obj(_obj(op).get("metadata"))
                if meta.get("displayName") == _display_name(marker):
                    found.append(str(_obj(op).get("name")))
            nxt = page.get("nextPageToken")
            if not isinstance(nxt, str) or not nxt:
                break
            token = f"&pageToken={nxt}"
        return found

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/{batch_id}")
        meta = _obj(data.get("metadata"))
        counts = _counts(meta.get("batchStats") or data.get("batchStats"))
        status = str(meta.get("state") or data.get("state") or "")
        ended = bool(data.get("done")) or _gemini_state(status) in _GEMINI_ENDED
        return Polled(ended, status, counts, data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        data = polled.raw
        if _gemini_output(data) is None and not data.get("error"):
            data = await self._json("GET", f"{self.model.base_url}/{batch_id}")
        state = _gemini_state(polled.status)
        if data.get("error"):
            message = str(_obj(data["error"]).get("message") or "the batch failed")
            kind = {"CANCELLED": "canceled", "EXPIRED": "expired"}.get(state, "errored")
            return {"*": self.failed(kind, message)}
        output = _gemini_output(data) or {}
        rows: list[tuple[Any, Any]] = []  # (key, row)
        inlined = output.get("inlinedResponses")
        if isinstance(inlined, dict):  # the reference: InlinedResponses {inlinedResponses: []}
            inlined = inlined.get("inlinedResponses")
        if isinstance(inlined, list):  # (the SDKs flatten it to the list itself)
            rows = [(_obj(_obj(r).get("metadata")).get("key"), r) for r in inlined]
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
                out[key] = _malformed("is not a JSON object")
            elif row.get("response") is not None:
                out[key] = Outcome(row["response"])
            else:
                error = _obj(row.get("error"))
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


#: Gemini's terminal batch states, without their prefix: the API reference's ``BatchState``
#: is ``BATCH_STATE_SUCCEEDED`` ..., the batch guide's examples compare ``metadata.state``
#: with ``JOB_STATE_SUCCEEDED`` ...; either is read.
_GEMINI_ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})


def _display_name(marker: str) -> str:
    return f"langfx_nb-{marker}"


def _file_rows(raw: bytes) -> Iterator[tuple[Any, Any]]:
    """A Gemini responses file's lines as ``(key, row)``: a line that cannot be read gives
    its key when one can be found in it, with ``None`` as its row."""
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            yield _line_id(line), None
            continue
        yield (row.get("key"), row) if isinstance(row, dict) else (None, None)


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


def _gemini_state(state: str) -> str:
    """``BATCH_STATE_RUNNING`` or ``JOB_STATE_RUNNING`` as ``RUNNING``."""
    for prefix in ("BATCH_STATE_", "JOB_STATE_"):
        if state.startswith(prefix):
            return state[len(prefix) :]
    return state


def _gemini_output(data: dict[str, Any]) -> dict[str, Any] | None:
    """A finished batch's ``GenerateContentBatchOutput``: the operation's ``response``, or
    the batch resource's ``output`` (in the operation's ``metadata``, or at the top when
    the batch itself was returned)."""
    output = _obj(data.get("metadata")).get("output")
    for found in (data.get("response"), output, data.get("output")):
        if isinstance(found, dict) and ("inlinedResponses" in found or "responsesFile" in found):
            return found
    return None


def wire_for(model: LanguageModel, read_limit: int = 1024 * MB) -> Wire:
    """The batch API of ``model``'s provider; ``InvalidRequestError`` for other models."""
    from ..llms.openai_responses import OpenAIResponses

    if isinstance(model, OpenAI) and not isinstance(model, OpenAIResponses):
        return OpenAIWire(model, read_limit)
    if isinstance(model, Anthropic):
        return AnthropicWire(model, read_limit)
    if isinstance(model, Gemini):
        return GeminiWire(model, read_limit)
    raise InvalidRequestError(
        f"engine=ProviderBatch() sends requests through OpenAI (Chat Completions), Anthropic "
        f"or Gemini batch APIs; {model.model_id} has none (use engine=None)"
    )
