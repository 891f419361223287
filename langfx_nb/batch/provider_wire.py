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
  ``POST /messages/batches/{id}/cancel``. At most 100,000 requests and 256 MB.
- Gemini batch mode: ``POST /models/{model}:batchGenerateContent`` with inline requests
  (``{request, metadata: {key}}``), under 20 MB per batch; ``GET /batches/{id}`` (a
  long-running operation: ``done``, ``metadata.state`` (``BATCH_STATE_*`` in the API
  reference, ``JOB_STATE_*`` in the batch guide: both read), ``metadata.batchStats``, then
  ``response.inlinedResponses``, or a ``responsesFile`` read from the download endpoint);
  ``POST /batches/{id}:cancel``.

Read as the references allow, not as one server happens to write: result lines in any
order and key order, ``\r\n`` or ``\n``, with or without a final newline, gzip or not
(httpx decodes it), unknown members ignored; ``output_file_id``/``error_file_id``/
``results_url`` may be null; ``results_url`` is followed wherever it points, with the
model's headers. A request with no result in a batch that expired, was cancelled or failed
gets that failure (``"*"``: the fallback for every request without a line).

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

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from ..errors import InvalidRequestError, ProviderBatchError, StreamProtocolError
from ..llms.anthropic import Anthropic
from ..llms.base import LanguageModel, LMRequest
from ..llms.gemini import Gemini
from ..llms.openai import OpenAI

__all__ = ["Outcome", "Polled", "Wire", "wire_for"]

MB = 1024 * 1024


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
        except ValueError:
            raise ProviderBatchError(
                "the provider's result line for this request is not valid JSON "
                f"({len(self.raw)} bytes, starting {self.raw[:60]!r})"
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

    def __init__(self, model: Any) -> None:
        self.model = model

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        raise NotImplementedError

    async def submit(self, entries: Iterable[bytes]) -> str:
        """Create a batch of ``entries`` (read once, in order); the provider's batch id."""
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

    async def _json(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        raw = await self.model.api_request(method, url, **kw)
        try:
            data = json.loads(raw)
        except ValueError:
            raise StreamProtocolError(f"{self.name} batch: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise StreamProtocolError(f"{self.name} batch: the answer is not a JSON object")
        return data


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


def _lines(raw: bytes) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """The JSONL ``raw``'s objects, each with its line."""
    for line in raw.splitlines():
        if line.strip():
            row = json.loads(line)
            if isinstance(row, dict):
                yield line, row


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
            row = json.loads(line)
            if isinstance(row, dict):
                yield str(row.get("custom_id")), parse(row, line)


class OpenAIWire(Wire):
    name = "openai"
    max_requests = 50_000
    max_bytes = 200 * MB
    endpoint = "/v1/chat/completions"

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        row = {"custom_id": custom_id, "method": "POST", "url": self.endpoint}
        row["body"] = self.body(request)  # type: ignore[assignment]
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes]) -> str:
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
            )
        created = await self._json(
            "POST",
            f"{base}/batches",
            body={
                "input_file_id": file["id"],
                "endpoint": self.endpoint,
                "completion_window": "24h",
            },
        )
        return str(created["id"])

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/batches/{batch_id}")
        status = str(data.get("status"))
        counts = _counts(data.get("request_counts"))
        ended = status in ("completed", "failed", "expired", "cancelled")
        return Polled(ended, status, counts, data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        if polled.status == "failed":  # the whole batch was refused (validation)
            errors = (polled.raw.get("errors") or {}).get("data") or [{}]
            message = str(errors[0].get("message") or "the batch failed validation")
            return {"*": Outcome(failure="errored", message=message[:300])}
        for key in ("output_file_id", "error_file_id"):
            file_id = polled.raw.get(key)
            if not file_id:
                continue
            raw = await self.model.api_request(
                "GET", f"{self.model.base_url}/files/{file_id}/content"
            )
            ok = ("response", "body")
            out.update(_outcomes(raw, _OPENAI_OK, ok, _openai_outcome))
        # a request with no line in either file: in an expired or cancelled batch it never
        # ran (the Batch API writes no line for some of them); else see provider._batch
        if polled.status == "expired":
            out.setdefault("*", Outcome(failure="expired", message="the batch expired"))
        elif polled.status == "cancelled":
            out.setdefault("*", Outcome(failure="canceled", message="the batch was cancelled"))
        return out

    async def cancel(self, batch_id: str) -> None:
        await self._json("POST", f"{self.model.base_url}/batches/{batch_id}/cancel", body={})


def _openai_outcome(row: dict[str, Any], raw: bytes) -> Outcome:
    response = row.get("response") or None
    if response is not None and response.get("status_code") == 200:
        return Outcome(raw=raw, path=("response", "body"))
    error = row.get("error") or {}
    code = str(error.get("code") or "")
    if response is not None:
        body = response.get("body") or {}
        detail = (body.get("error") or {}) if isinstance(body, dict) else {}
        message = f"HTTP {response.get('status_code')}: {detail.get('message') or ''}"
        return Outcome(failure="errored", message=message[:300])
    if code == "batch_expired":
        return Outcome(failure="expired", message="the batch expired before this request ran")
    if code == "batch_cancelled":
        return Outcome(failure="canceled", message="the batch was cancelled")
    return Outcome(failure="errored", message=str(error.get("message") or code)[:300])


class AnthropicWire(Wire):
    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * MB

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        row = {"custom_id": custom_id, "params": self.body(request)}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes]) -> str:
        content = b'{"requests":[' + b",".join(entries) + b"]}"
        created = await self._json(
            "POST", f"{self.model.base_url}/messages/batches", content=content
        )
        return str(created["id"])

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/messages/batches/{batch_id}")
        status = str(data.get("processing_status"))
        counts = _counts(data.get("request_counts"))
        return Polled(status == "ended", status, counts, data)

    async def results(self, batch_id: str, polled: Polled) -> dict[str, Outcome]:
        url = polled.raw.get("results_url") or (
            f"{self.model.base_url}/messages/batches/{batch_id}/results"
        )
        raw = await self.model.api_request("GET", str(url))
        return dict(_outcomes(raw, _ANTHROPIC_OK, ("result", "message"), _anthropic_outcome))

    async def cancel(self, batch_id: str) -> None:
        await self._json(
            "POST", f"{self.model.base_url}/messages/batches/{batch_id}/cancel", body={}
        )


def _anthropic_outcome(row: dict[str, Any], raw: bytes) -> Outcome:
    result = row.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        return Outcome(raw=raw, path=("result", "message"))
    if kind in ("expired", "canceled"):
        return Outcome(failure=str(kind), message=f"the request was {kind}")
    error = (result.get("error") or {}).get("error") or {}
    message = f"{error.get('type') or 'error'}: {error.get('message') or ''}"
    return Outcome(failure="errored", message=message[:300])


class GeminiWire(Wire):
    name = "gemini"
    max_requests = 100_000
    max_bytes = 20 * MB  # inline requests; larger runs are split into several batches
    overhead = 160

    def entry(self, custom_id: str, request: LMRequest) -> bytes:
        row = {"request": self.body(request), "metadata": {"key": custom_id}}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, entries: Iterable[bytes]) -> str:
        content = (
            b'{"batch":{"display_name":"langfx_nb","input_config":{"requests":{"requests":['
            + b",".join(entries)
            + b"]}}}}"
        )
        created = await self._json(
            "POST", self.model.method_url("batchGenerateContent"), content=content
        )
        return str(created["name"])  # "batches/..."

    async def poll(self, batch_id: str) -> Polled:
        data = await self._json("GET", f"{self.model.base_url}/{batch_id}")
        meta = data.get("metadata") or {}
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
            message = str((data["error"] or {}).get("message") or "the batch failed")
            kind = {"CANCELLED": "canceled", "EXPIRED": "expired"}.get(state, "errored")
            return {"*": Outcome(failure=kind, message=message[:300])}
        output = _gemini_output(data) or {}
        rows: list[dict[str, Any]] = []
        inlined = output.get("inlinedResponses")
        if isinstance(inlined, dict):  # the reference: InlinedResponses {inlinedResponses: []}
            inlined = inlined.get("inlinedResponses")
        if isinstance(inlined, list):  # (the SDKs flatten it to the list itself)
            rows = [r for r in inlined if isinstance(r, dict)]
        elif output.get("responsesFile"):
            base = self.model.base_url.rsplit("/v1beta", 1)[0]
            name = output["responsesFile"]
            raw = await self.model.api_request(
                "GET", f"{base}/download/v1beta/{name}:download?alt=media"
            )
            rows = [
                {"metadata": {"key": r.get("key")}, **{k: v for k, v in r.items() if k != "key"}}
                for _, r in _lines(raw)
            ]
        out: dict[str, Outcome] = {}
        for row in rows:
            key = str((row.get("metadata") or {}).get("key"))
            if row.get("response") is not None:
                out[key] = Outcome(row["response"])
            else:
                error = row.get("error") or {}
                kind = "expired" if state == "EXPIRED" else "errored"
                message = f"{error.get('code', '')}: {error.get('message', '')}"
                out[key] = Outcome(failure=kind, message=message[:300])
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
    meta = data.get("metadata")
    output = meta.get("output") if isinstance(meta, dict) else None
    for found in (data.get("response"), output, data.get("output")):
        if isinstance(found, dict) and ("inlinedResponses" in found or "responsesFile" in found):
            return found
    return None


def wire_for(model: LanguageModel) -> Wire:
    """The batch API of ``model``'s provider; ``InvalidRequestError`` for other models."""
    from ..llms.openai_responses import OpenAIResponses

    if isinstance(model, OpenAI) and not isinstance(model, OpenAIResponses):
        return OpenAIWire(model)
    if isinstance(model, Anthropic):
        return AnthropicWire(model)
    if isinstance(model, Gemini):
        return GeminiWire(model)
    raise InvalidRequestError(
        f"engine=ProviderBatch() sends requests through OpenAI (Chat Completions), Anthropic "
        f"or Gemini batch APIs; {model.model_id} has none (use engine=None)"
    )
