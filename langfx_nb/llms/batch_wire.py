"""What every provider's batch API shares, as ``lf.engines.ProviderBatch`` uses it.

A ``Wire`` turns requests into its provider's batch entries, submits a batch of them,
polls it, reads its results and cancels it, through the model's own HTTP client, key and
base URL (``HTTPModel.api_request``). Each provider's wire lives in its provider's module
(its formats and limits are described there) and is reached through the model:
``model.batch_wire(read_limit)`` (``wire_for``); a model without one has no batch API.

Read as the references allow, not as one server happens to write: result lines in any
order and key order, ``\\r\\n`` or ``\\n``, with or without a final newline, gzip or not
(httpx decodes it), unknown members ignored; result file ids or URLs may be null. A
request with no result in a batch that expired, was cancelled or failed gets that failure
(``"*"``: the fallback for every request without a line).

Read as data from elsewhere: every answer is read as it arrives and refused past
``read_limit`` bytes (decoded: a small gzip cannot expand without bound); a result line
that is not JSON, nests too deep, or holds something else where an object belongs fails
only its request (``failure="malformed"``, not resubmitted: it was answered and billed),
and a line that names no request is skipped (its request has no result). The key goes only
to the model's own API host (``same_origin``): a results URL elsewhere is not followed. A
provider's per-request error message is kept without the model's key
(``LanguageModel.redact``) or anything shaped like a credential.

Creating a batch is not idempotent: the upload and the create are sent once
(``api_request(resend=False)``). Each create carries a marker, unique to it, where the
provider keeps one; after a create whose answer was lost, ``find`` lists the account's
batches for the one the create made.

``Outcome`` is one item's answer: the provider's response body (decoded by the model's
``decode`` exactly as an online answer) or why there is none (``errored``, ``expired``,
``canceled``). A succeeded outcome may keep the result's line as bytes and parse the body
when it is read (100,000 parsed response bodies cost hundreds of MB; their lines, a
fraction): ``outcomes`` knows a succeeded line by its start (a pattern the provider's wire
gives, matching the members in the order the provider writes them) and parses any other
line whole at once.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ..errors import InvalidRequestError, ProviderBatchError, StreamProtocolError
from ..redact import redact_secrets
from .base import LanguageModel, LMRequest

__all__ = [
    "COUNT_KEYS",
    "FIND_MAX_PAGES",
    "FIND_SKEW_S",
    "MALFORMED_LINE",
    "MB",
    "Outcome",
    "Polled",
    "Wire",
    "counts",
    "line_id",
    "malformed",
    "obj",
    "outcomes",
    "same_origin",
    "wire_for",
]

MB = 1024 * 1024
#: What reading one result line (or row) may raise on input that is not what the reference
#: says; the line then fails only its request.
MALFORMED_LINE = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError)
#: How far back a listing looks for the batch a lost create made (clocks differ).
FIND_SKEW_S = 300.0
#: At most this many listing pages are read to find it.
FIND_MAX_PAGES = 20
#: The words progress counts a batch's requests in (``Wire.progress``).
COUNT_KEYS = ("succeeded", "errored", "expired", "canceled", "processing")


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
            # not chained: a JSONDecodeError holds the whole line (a provider's answer)
            raise ProviderBatchError(
                "the provider's result line for this request is not valid JSON "
                f"({len(self.raw)} bytes)",
                failure="malformed",
            ) from None
        for key in self.path:
            data = data.get(key) if isinstance(data, dict) else None
        return data


@dataclass(slots=True)
class Polled:
    """What one poll said: ``ended``, the provider's ``status`` and ``counts``."""

    ended: bool
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


class Wire:
    """One provider's batch API for one model (see the module docstring). A provider's
    wire sets the class variables (its name and limits) and implements ``entry``,
    ``submit``, ``find``, ``poll``, ``results`` and ``cancel``."""

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

    def progress(self, counts: dict[str, int], n: int) -> dict[str, int]:
        """A poll's request counts (of a batch of ``n`` requests) in ``COUNT_KEYS``; a
        provider that counts in other words translates them."""
        return {k: counts.get(k, 0) for k in COUNT_KEYS}

    def body(self, request: LMRequest) -> dict[str, Any]:
        body: dict[str, Any] = self.model.encode(request)
        extra = self.model.extra_body
        return {**body, **extra} if extra else body

    async def _request(self, method: str, url: str, **kw: Any) -> bytes:
        """``api_request`` with the key only for the model's own host, the answer bounded."""
        if not same_origin(url, self.model.base_url):  # never reached: callers build urls
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
        """``_request``'s answer, which must be a JSON object."""
        raw = await self._request(method, url, **kw)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            # not chained: a JSONDecodeError holds the whole answer (a provider's body)
            raise StreamProtocolError(f"{self.name} batch: the answer is not JSON") from None
        if not isinstance(data, dict):
            raise StreamProtocolError(f"{self.name} batch: the answer is not a JSON object")
        return data

    async def _listing(self, url: str, cursor: str, after: str) -> AsyncIterator[dict[str, Any]]:
        """The objects of a paged listing (``FIND_MAX_PAGES`` pages at most), newest first:
        ``data`` and ``has_more``; the next page from ``after``=the page's ``cursor``."""
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


def wire_for(model: LanguageModel, read_limit: int = 1024 * MB) -> Wire:
    """The batch API of ``model``'s provider (``model.batch_wire``); ``InvalidRequestError``
    for a model without one."""
    make = getattr(model, "batch_wire", None)
    wire: Wire | None = make(read_limit) if make is not None else None
    if wire is None:
        raise InvalidRequestError(
            f"engine=ProviderBatch() sends requests through a provider's batch API; "
            f"{model.model_id} has none (use engine=None)"
        )
    return wire


def counts(value: Any) -> dict[str, int]:
    """A poll's request counts as ints: JSON numbers, or numeric strings (int64 counts in
    JSON); any other member (an unknown field, a ``null``) is left out."""
    out: dict[str, int] = {}
    if isinstance(value, dict):
        for key, n in value.items():
            if isinstance(n, bool):
                continue
            if isinstance(n, int):
                out[str(key)] = n
            elif isinstance(n, (str, float)):
                with contextlib.suppress(ValueError, OverflowError):
                    out[str(key)] = int(n)
    return out


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a member of the wrong type
    reads as absent)."""
    return value if isinstance(value, dict) else {}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def same_origin(url: str, base_url: str) -> bool:
    """Whether ``url`` is on the host (scheme, name, port) of ``base_url``."""
    return _origin(url) == _origin(base_url)


#: A request's id near the start of a result line that could not be read as JSON.
_LINE_ID = re.compile(rb'"(?:custom_id|key)"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


def malformed(what: str) -> Outcome:
    return Outcome(failure="malformed", message=f"its result {what}")


def line_id(line: bytes) -> str | None:
    """The request id near the start of a result line that is not JSON, when there is one."""
    found = _LINE_ID.search(line[:4096])
    return found.group(1).decode() if found is not None else None


def outcomes(
    raw: bytes,
    succeeded: re.Pattern[bytes],
    path: tuple[str, ...],
    parse: Callable[[dict[str, Any], bytes], Outcome],
) -> Iterator[tuple[str, Outcome]]:
    """Each JSONL line of ``raw`` as ``(custom id, outcome)``: a line ``succeeded`` matches
    (group 1: its custom id) is kept unparsed (its body at ``path`` is parsed when read);
    any other is parsed whole and read by ``parse(row, line)``."""
    for line in raw.splitlines():
        found = succeeded.match(line)
        if found is not None:
            yield found.group(1).decode(), Outcome(raw=line, path=path)
        elif line.strip():
            cid: str | None = None
            try:
                row = json.loads(line)
                cid = obj(row).get("custom_id") if isinstance(row, dict) else None
                if not isinstance(cid, str):
                    raise TypeError("no custom_id")
                outcome = parse(row, line)
            except MALFORMED_LINE:
                cid = cid if isinstance(cid, str) else line_id(line)
                if cid is None:  # names no request: that request has no result
                    continue
                outcome = malformed("is not what the batch API's reference describes")
            yield cid, outcome
