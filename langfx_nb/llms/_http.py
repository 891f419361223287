"""Shared httpx plumbing for the provider adapters.

One base class (``HTTPModel``) owns what the providers have in common: where requests go
(``base_url``), how they are sent (an injected ``httpx.AsyncClient`` or transport, else a
client of our own per event loop), how the key is found, how HTTP failures become errors from
``langfx_nb.errors``, and the one loop that reads a server-sent-event stream.

Rules a caller may rely on:

- Nothing happens at construction: no network, no environment lookup.
- An explicit ``api_key`` (a string, or an async function returning one) always wins. Without
  one, the provider's environment variable is read at request time, and only sent to the
  provider's own default endpoint; a custom ``base_url`` never receives an environment key
  (so a local vLLM server never sees a hosted provider's key).
- No key at all is an ``AuthenticationError`` before sending, unless the request does not go
  to the default endpoint unaided (a custom ``base_url``, ``transport`` or ``http_client``):
  then it is sent without credentials, for gateways that authenticate on their own.
- ``allow_model_requests(False)`` blocks requests that would use a real network client; an
  injected transport or client is never blocked.
- Keys never appear in ``repr``, exceptions or ``cache_identity``. Error messages carry the
  HTTP status and the provider's short error type or code, never the response body; a key,
  a secret header value or a base URL's ``user:password`` a server echoes back is redacted
  from every error (``_redact``). Answers record where they came from as ``endpoint``, the
  base URL without its credentials.
- A streamed line or event, and a whole non-streamed answer, larger than
  ``max_event_bytes`` (default 16 MiB) ends the request with a ``StreamProtocolError``
  naming the limit; an error body is read up to 64 KiB.
- A stream without progress (an event other than ``ping`` and other than a repeat of the
  one before) for ``stream_idle_timeout`` seconds (default 120, ``None`` for no limit) ends
  with a ``ServerError``, and so do headers (or a body that is not a stream) not complete
  within it; a 2xx body without any event is a ``StreamProtocolError``; after the answer's
  last event the rest of the body is read (bounded) so the connection is reused.
- A non-streamed answer, headers and body, must arrive within the model's read timeout
  (``timeout=``, default 600 s) as a whole, not per read: a server trickling a byte at a
  time ends with a ``ServerError``.
- The library sends a request once. The one exception: a request that went out on a pooled
  keep-alive connection and got no answer (the server had closed it) is sent once more on a
  new connection; on a new connection the same failure is raised, never resent, since the
  server may have received and billed the request (``_send``).
- Every streamed response is closed in ``finally``: on normal end, early ``break``,
  cancellation and errors. Cancellation is never caught here: it propagates as asyncio
  raised it.

A provider streams by implementing two hooks, ``_stream_request`` (URL and JSON body) and
``_stream_decoder`` (a fresh ``StreamDecoder``: events in, ``StreamChunk``s out);
``HTTPModel._stream`` does the rest. How an HTTP failure becomes an error is in
``_http_errors.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, NoReturn, Protocol
from urllib.parse import urlsplit

import httpx
from pydantic_core import from_json

from .._unicode import repair_surrogates
from ..errors import (
    AuthenticationError,
    InvalidRequestError,
    LMError,
    NetworkBlockedError,
    ServerError,
    StreamProtocolError,
)
from ..messages import ContinuationPart, Message, ReasoningPart
from ._http_errors import ErrorInfo, error_from_status, transport_error
from ._redact import SECRET_HEADER, redact_exception, shown_url, url_secrets
from ._sse import DEFAULT_MAX_EVENT_BYTES, SSEEvent, SSEParser
from .base import LanguageModel, LMRequest, model_requests_allowed
from .ratelimit import Limiter, Limits, account_id, limiter_for, parse_retry_after
from .streaming import StreamChunk

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "MALFORMED",
    "HTTPModel",
    "KeyResolver",
    "SSEEvent",
    "SSEParser",
    "StreamDecoder",
    "body_chunks",
    "load_object",
    "loads",
]

KeyResolver = Callable[[], Awaitable[str]]
loads = from_json  # JSON text or UTF-8 bytes → data; invalid UTF-8 is a ValueError
# What decoding a malformed (but syntactically JSON) response raises; adapters turn these into
# StreamProtocolError so hostile input never escapes as a bare TypeError/KeyError.
MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError)
_MAX_ERROR_BODY = 64 * 1024
_DRAIN_SECONDS = 1.0
# Two minutes without progress: longer than providers' keep-alive gaps and most silent
# "thinking" before the first token; raise it (or pass None) for models that think longer.
DEFAULT_STREAM_IDLE_TIMEOUT = 120.0


class _Secret:
    """Holds a key so that ``repr``/``vars`` of a model never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | KeyResolver) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "<secret>"

    async def get(self) -> str:
        value = self._value
        if isinstance(value, str):
            return value
        return await value()


def load_object(data: bytes) -> dict[str, Any]:
    """An event's JSON data, which must be an object; anything else is a ``TypeError``
    (``MALFORMED``: the stream loop reports it as a malformed event)."""
    parsed = loads(data)
    if not isinstance(parsed, dict):
        raise TypeError("not an object")
    return parsed


# -- the stream decoder protocol -------------------------------------------------------------
class StreamDecoder(Protocol):
    """What a provider gives ``HTTPModel._stream``: the provider's own reading of its events.

    One decoder serves one response. ``event`` gets every server-sent event in order (its
    name and its data as UTF-8 bytes) and returns the chunks it completes (often one,
    possibly none). ``done`` turns true once an event has ended the answer for good (a
    ``[DONE]`` line, a completion event); the loop then stops reading. After the
    last event (or ``done``), ``finish`` returns the closing chunks, the last one ``final``,
    or raises if the stream ended early or reports a failure. Both may raise ``LMError``s;
    ``ValueError``/``TypeError``/``KeyError``... from malformed data become a
    ``StreamProtocolError`` in the loop (one saying so when the data is not UTF-8).
    """

    @property
    def done(self) -> bool: ...

    def event(self, name: str, data: bytes) -> Sequence[StreamChunk]: ...

    def finish(self) -> Sequence[StreamChunk]: ...


# -- the shared model base -----------------------------------------------------------------
class HTTPModel(LanguageModel):
    """A ``LanguageModel`` reached over HTTP.

    A provider sets the class variables below and implements ``_auth_headers``,
    ``_error_info``, ``_sample``, and for streaming ``_stream_request`` and
    ``_stream_decoder``. ``max_event_bytes`` bounds one streamed line or event.
    """

    default_base_url: ClassVar[str] = ""
    env_vars: ClassVar[tuple[str, ...]] = ()
    # generous read timeout: a non-streamed answer from a thinking model can take minutes
    default_timeout: ClassVar[httpx.Timeout] = httpx.Timeout(600.0, connect=10.0)

    def __init__(
        self,
        model: str,
        *,
        api_key: str | KeyResolver | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float | httpx.Timeout | None = None,
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        stream_idle_timeout: float | None = DEFAULT_STREAM_IDLE_TIMEOUT,
        **kw: Any,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError(f"{type(self).__name__} needs a model id, e.g. model='...'")
        if http_client is not None and transport is not None:
            raise ValueError("pass http_client= or transport=, not both")
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        if stream_idle_timeout is not None and not stream_idle_timeout > 0:
            raise ValueError("stream_idle_timeout must be a positive number of seconds or None")
        super().__init__(model, **kw)
        self.max_event_bytes = max_event_bytes
        #: seconds a stream may go without progress (see ``_stream``) before it fails
        self.stream_idle_timeout = stream_idle_timeout
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        for secret in url_secrets(self.base_url):  # removed from every error, like a key
            self._secrets.add(secret)
        self._key = _Secret(api_key) if api_key is not None else None
        self._http_client = http_client
        self._transport = transport
        if timeout is None:
            timeout = self.default_timeout
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._extra_headers = dict(headers or {})
        for name, value in self._extra_headers.items():
            if SECRET_HEADER.search(name):
                self._secrets.add(value)
        self.extra_body = dict(extra_body or {})
        self._own_clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}

    # -- identity --------------------------------------------------------------------------
    @property
    def uses_default_endpoint(self) -> bool:
        return self.base_url == self.default_base_url.rstrip("/")

    @property
    def endpoint(self) -> str:
        """``base_url`` without credentials: what answers and errors record of where they
        came from (messages, cache rows and run states are stored; a password is not)."""
        return shown_url(self.base_url)

    @property
    def server(self) -> str | None:
        url = urlsplit(self.base_url)
        if not url.hostname:
            return None
        return f"{url.hostname}:{url.port or (443 if url.scheme == 'https' else 80)}"

    def cache_identity(self) -> dict[str, Any]:
        out = {**super().cache_identity(), "base_url": self.base_url}
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out

    def __repr__(self) -> str:
        where = "" if self.uses_default_endpoint else f", base_url={self.endpoint!r}"
        return f"{type(self).__name__}({self.model!r}{where})"

    # -- keys and clients --------------------------------------------------------------------
    async def _api_key(self) -> str | None:
        """The key for this request (see module docstring for the rule)."""
        if self._key is not None:
            key = await self._key.get()
            if not key:
                raise AuthenticationError(f"{self.provider}: the api_key resolver returned no key")
            return key
        unaided = self.uses_default_endpoint and self._transport is None
        unaided = unaided and self._http_client is None
        if self.uses_default_endpoint:
            for var in self.env_vars:
                if value := os.environ.get(var):
                    return value
        if unaided:
            names = " or ".join(self.env_vars)
            raise AuthenticationError(f"{self.provider}: no API key: pass api_key= or set {names}")
        return None

    def _client(self) -> httpx.AsyncClient:
        if self._http_client is not None:
            return self._http_client
        if self._transport is None and not model_requests_allowed():
            raise NetworkBlockedError(
                f"{self.model_id}: real model requests are blocked (allow_model_requests(False))"
            )
        loop = asyncio.get_running_loop()
        held = self._own_clients.get(id(loop))
        if held is not None and held[0] is loop and not held[1].is_closed:
            return held[1]
        for key, (old_loop, _) in list(self._own_clients.items()):
            if old_loop.is_closed():
                del self._own_clients[key]
        client = httpx.AsyncClient(transport=self._transport, timeout=self._timeout)
        self._own_clients[id(loop)] = (loop, client)
        return client

    async def aclose(self) -> None:
        """Close the clients this model created (an injected client is left to its owner)."""
        clients = [c for _, c in self._own_clients.values()]
        self._own_clients.clear()
        for c in clients:
            await c.aclose()

    # -- rate limits -------------------------------------------------------------------------
    def rate_limiter(self) -> Limiter:
        """The limiter of this model's account: provider, base URL and key (hashed); a key
        resolver counts as one account per resolver object."""
        value = self._key._value if self._key is not None else None
        if value is not None and not isinstance(value, str):
            key: str | None = f"resolver:{id(value)}"
        elif value is None and self.uses_default_endpoint:
            key = next((v for var in self.env_vars if (v := os.environ.get(var))), None)
        else:
            key = value
        return limiter_for(account_id(self.provider, self.base_url, key), self.rate_limit)

    # -- provider hooks --------------------------------------------------------------------
    def _auth_headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _error_info(self, status: int, body: Any) -> ErrorInfo:
        """Pull the short code (and hints) out of a parsed error body."""
        raise NotImplementedError

    def _rate_limits(self, headers: Mapping[str, str]) -> Limits:
        """What an answer's headers say of the account's limits (``ratelimit.Limits``); a
        provider that sends rate-limit headers reads its own. None by default."""
        return {}

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        """The wait an error answer's headers ask for: ``Retry-After`` by default; a provider
        with a header of its own reads it too."""
        return parse_retry_after(headers)

    # -- requests ----------------------------------------------------------------------------
    async def _headers(self) -> dict[str, str]:
        key = await self._api_key()
        self._secrets.add(key)
        return {
            "content-type": "application/json",
            **self._auth_headers(key),
            **self._extra_headers,
        }

    def _body(self, body: dict[str, Any]) -> bytes:
        if self.extra_body:
            body = {**body, **self.extra_body}
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        try:
            return text.encode()
        except UnicodeEncodeError:  # a lone surrogate in the request: send U+FFFD instead
            return repair_surrogates(text).encode()

    def _deadline(self, seconds: float | None) -> float | None:
        """The loop time ``seconds`` from now (``None``: no deadline)."""
        return None if seconds is None else asyncio.get_running_loop().time() + seconds

    async def _post(
        self, url: str, body: dict[str, Any], deadline: float | None, accept: str = ""
    ) -> httpx.Response:
        """Send a POST with this model's headers and body; the response, open and its status
        not yet checked, for the caller to close. A transport failure raises its error, and
        so do headers not complete by ``deadline`` (a loop time; a server can send them a
        byte at a time, each within the read timeout)."""
        client = self._client()  # a blocked network fails before the key is even looked up
        headers = await self._headers()
        if accept:
            headers["accept"] = accept
        request = client.build_request("POST", url, content=self._body(body), headers=headers)
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope:
                response = await _send(client, request)
        except httpx.TransportError as exc:
            raise transport_error(self.provider, exc) from exc
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise ServerError(
                f"{self.provider}: the response headers did not arrive whole in time "
                "(timeout=, or stream_idle_timeout= for a stream)"
            ) from exc
        self.rate_limiter().observe(self._rate_limits(response.headers))
        return response

    async def _read(
        self,
        response: httpx.Response,
        deadline: float | None,
        limit: int | None,
        bound: str = "max_event_bytes",
    ) -> bytes:
        """The body of ``response``, read as it arrives: a ``StreamProtocolError`` past
        ``limit`` bytes, counted after any content encoding is undone (``bound`` names the
        setting; ``max_event_bytes``: an answer is one event), a ``ServerError`` when it is
        not complete by ``deadline``. An error status's body is read only up to 64 KiB, and
        only until the deadline: what came is enough to say what failed."""
        failed = response.status_code >= 300  # a redirect is refused: its body says why
        parts: list[bytes] = []
        size = 0
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope:
                async for part in response.aiter_bytes():
                    parts.append(part)
                    size += len(part)
                    if failed:
                        if size > _MAX_ERROR_BODY:
                            break
                    elif limit is not None and size > limit:
                        raise StreamProtocolError(
                            f"{self.provider}: the response body exceeds {bound}={limit}; "
                            f"pass a larger {bound}= if the server's answers are that big"
                        )
        except httpx.TransportError as exc:
            if not failed:
                raise transport_error(self.provider, exc) from exc
        except TimeoutError as exc:
            if not scope.expired():
                raise
            if not failed:
                raise ServerError(
                    f"{self.provider}: the response body did not arrive whole in time "
                    "(timeout=, or stream_idle_timeout= for a stream)"
                ) from exc
        return b"".join(parts)

    async def _post_json(self, url: str, body: dict[str, Any]) -> Any:
        """POST and return the parsed JSON body of a 2xx response, all of it within the
        model's read timeout (headers and body: a server may trickle them)."""
        deadline = self._deadline(self._timeout.read)
        response = await self._post(url, body, deadline)
        try:
            content = await self._read(response, deadline, self.max_event_bytes)
            if response.status_code >= 400:
                self._raise_status(response, content)
            try:
                return loads(content)
            except ValueError as exc:
                raise StreamProtocolError(
                    f"{self.provider}: response body is not JSON (HTTP {response.status_code})"
                ) from exc
        finally:
            await response.aclose()

    async def api_request(
        self,
        method: str,
        url: str,
        *,
        body: dict[str, Any] | None = None,
        content: bytes | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        data: Mapping[str, str] | None = None,
        resend: bool = True,
        max_bytes: int | None = None,
    ) -> bytes:
        """One request to another endpoint of this model's API (a provider batch: file
        upload, create, retrieve, results, cancel) with this model's key, headers and
        client; the body of a 2xx response, or the error its status maps to (a key the
        server echoes is redacted from it). ``body`` is sent as it is: the model's
        ``extra_body`` belongs in generation requests, not in these (an unknown parameter
        there is refused). A redirect is an ``InvalidRequestError``, not followed: the key
        would go to another address, and its empty body must not read as an empty results
        file. ``resend=False``: a request that must not reach the server twice (it is not
        idempotent: a batch create) is sent once, even on a connection that failed before
        its answer (see ``_send``). ``max_bytes``: the body is read as it arrives and a
        ``StreamProtocolError`` is raised once it passes ``max_bytes`` (counted after any
        content encoding is undone: a small gzip cannot expand without bound)."""
        try:
            return await self._api_request(
                method, url, body, content, files, data, resend, max_bytes
            )
        except LMError as exc:
            redact_exception(exc, self._secrets)
            raise

    async def _api_request(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None,
        content: bytes | None,
        files: Mapping[str, tuple[str, bytes, str]] | None,
        data: Mapping[str, str] | None,
        resend: bool,
        max_bytes: int | None,
    ) -> bytes:
        client = self._client()
        headers = await self._headers()
        if files is not None:
            del headers["content-type"]  # httpx writes the multipart boundary
            request = client.build_request(method, url, files=files, data=data, headers=headers)
        elif body is not None or content is not None:
            raw = content if content is not None else json.dumps(body or {}).encode()
            request = client.build_request(method, url, content=raw, headers=headers)
        else:
            del headers["content-type"]
            request = client.build_request(method, url, headers=headers)
        try:
            if resend:
                response = await _send(client, request)
            else:
                response = await client.send(request, stream=True)
            try:
                raw = await self._read(response, None, max_bytes, "max_bytes")
                if response.status_code >= 300:
                    self._raise_status(response, raw)
                return raw
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise transport_error(self.provider, exc) from exc

    async def _open_stream(
        self, url: str, body: dict[str, Any]
    ) -> tuple[httpx.Response, AsyncIterator[bytes]]:
        """POST for a server-sent-event stream; a 2xx response, open, for the caller to
        close, and its body's chunks. Headers, and a body labelled JSON, must come within
        ``stream_idle_timeout`` (the read timeout without one). Any other status is read (at
        most 64 KiB), closed and raised as its error."""
        idle = self.stream_idle_timeout
        deadline = self._deadline(idle if idle is not None else self._timeout.read)
        response = await self._post(url, body, deadline, accept="text/event-stream")
        try:
            if response.status_code >= 400:
                self._raise_status(response, await self._read(response, deadline, _MAX_ERROR_BODY))
            if response.headers.get("content-type", "").startswith("application/json"):
                raw = await self._json_instead_of_stream(response, deadline)
                return response, _once(raw)  # not JSON after all: read as an event stream
        except BaseException:
            await response.aclose()
            raise
        return response, body_chunks(response)

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        """The one stream loop: send, decode events, hand each to the provider's decoder.

        Transport failures while reading become ``ServerError``; the response is closed in
        ``finally`` whatever ends the loop (end of stream, ``done``, an error, the consumer
        closing the generator, cancellation). Progress is an event other than a ``ping``
        that is not the same as the one before (keep-alive comments are not events; some
        servers repeat an empty delta to keep a connection open); ``stream_idle_timeout``
        seconds without progress end the stream with a ``ServerError`` (retryable before
        the first chunk). When the decoder is ``done``, the rest of the body is read
        (bounded) before the response is closed, so its connection goes back to the pool.
        A body without a single event is a ``StreamProtocolError``: it is not an event
        stream.
        """
        url, body = self._stream_request(request)
        decoder = self._stream_decoder()
        parser = SSEParser(self.max_event_bytes)
        response, body_reads = await self._open_stream(url, body)
        idle = self.stream_idle_timeout
        loop = asyncio.get_running_loop()
        deadline = None if idle is None else loop.time() + idle
        moved = False  # progress since the last read: the deadline moves at the next one
        last = b""  # the data of the last event other than a ping
        events = 0
        reads = body_reads.__aiter__()
        try:
            while not decoder.done:
                if deadline is not None and idle is not None:
                    # the wait is counted from the read after progress, not while the
                    # consumer holds a chunk
                    if moved:
                        deadline, moved = loop.time() + idle, False
                    elif loop.time() >= deadline:
                        raise self._stalled()
                scope = asyncio.timeout_at(deadline)
                try:
                    async with scope:
                        raw = await anext(reads)
                except StopAsyncIteration:
                    break
                except TimeoutError as exc:
                    if scope.expired():
                        raise self._stalled() from exc
                    raise
                for name, data in parser.feed(raw):
                    events += 1
                    if name != "ping" and data != last:  # the same event again: keep-alive
                        moved, last = True, data
                    try:
                        chunks = decoder.event(name, data)
                    except MALFORMED as exc:
                        raise self._malformed(data) from exc
                    for chunk in chunks:
                        yield chunk
                    if decoder.done:
                        break
            if decoder.done:
                await _read_rest(reads)
        except httpx.TransportError as exc:
            raise transport_error(self.provider, exc) from exc
        finally:
            await response.aclose()
        if not events:
            kind = response.headers.get("content-type", "").split(";")[0].strip() or "no type"
            raise StreamProtocolError(
                f"{self.provider}: the response is not an event stream (no events; {kind})"
            )
        try:
            chunks = decoder.finish()
        except MALFORMED as exc:
            raise StreamProtocolError(f"{self.provider}: malformed stream") from exc
        for chunk in chunks:
            yield chunk

    def _raise_in_stream_error(self, data: dict[str, Any]) -> NoReturn:
        """An ``{"error": {...}}`` object inside a 2xx answer, raised as the error of its
        integer ``code`` taken as an HTTP status (500 when there is none)."""
        err = data["error"] if isinstance(data["error"], dict) else {}
        code = err.get("code")
        status = code if isinstance(code, int) else 500
        raise error_from_status(self.provider, status, self._error_info(status, data))

    def _stalled(self) -> ServerError:
        return ServerError(
            f"{self.provider}: the stream stalled: no progress for "
            f"{self.stream_idle_timeout:g} s (stream_idle_timeout)"
        )

    def _malformed(self, data: bytes) -> StreamProtocolError:
        try:
            data.decode()
        except UnicodeDecodeError:
            return StreamProtocolError(f"{self.provider}: the event stream is not valid UTF-8")
        return StreamProtocolError(f"{self.provider}: malformed stream event")

    def _stream_request(self, request: LMRequest) -> tuple[str, dict[str, Any]]:
        """The URL and JSON body that ask for ``request`` as an event stream."""
        raise NotImplementedError

    def _stream_decoder(self) -> StreamDecoder:
        """A new decoder for one streamed response."""
        raise NotImplementedError

    async def _json_instead_of_stream(
        self, response: httpx.Response, deadline: float | None
    ) -> bytes:
        """A 2xx JSON body where an event stream was asked for: gateways report errors so.
        A body labelled JSON that is not JSON is returned, to be read as an event stream."""
        raw = await self._read(response, deadline, self.max_event_bytes)
        try:
            parsed = loads(raw)
        except ValueError:
            return raw
        if isinstance(parsed, list) and parsed:
            parsed = parsed[0]
        err = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(err, dict):
            code = err.get("code")
            status = code if isinstance(code, int) and code >= 400 else 500
            try:
                info = self._error_info(status, parsed)
            except Exception:
                info = ErrorInfo()
            raise error_from_status(self.provider, status, info)
        raise StreamProtocolError(f"{self.provider}: expected an event stream, got JSON")

    def _raise_status(self, response: httpx.Response, raw: bytes) -> NoReturn:
        status = response.status_code
        try:
            parsed: Any = loads(raw[:_MAX_ERROR_BODY]) if raw else None
        except ValueError:
            parsed = None
        if isinstance(parsed, list) and parsed:  # Google sometimes wraps errors in a list
            parsed = parsed[0]
        try:
            info = self._error_info(status, parsed) if isinstance(parsed, dict) else ErrorInfo()
        except Exception:  # a malformed error body must not mask the HTTP failure
            info = ErrorInfo()
        error = error_from_status(self.provider, status, info, self._retry_after(response.headers))
        redact_exception(error, self._secrets)  # a key or password the server echoed back
        raise error

    # -- continuation ----------------------------------------------------------------------
    def _continuation(self, data: dict[str, Any]) -> ContinuationPart:
        return ContinuationPart(
            self.provider, self.model or "", {"base_url": self.endpoint, **data}
        )

    def _own_continuation(self, message: Message[Any]) -> ContinuationPart | None:
        """This model's continuation part in ``message``; foreign ones are rejected."""
        found: ContinuationPart | None = None
        for p in message.parts:
            if not isinstance(p, ContinuationPart):
                continue
            base = p.data.get("base_url") if isinstance(p.data, dict) else None
            if p.provider != self.provider or p.model != self.model or base != self.endpoint:
                raise InvalidRequestError(
                    f"{self.model_id}: the transcript holds continuation data from "
                    f"{p.provider}:{p.model} at another model or endpoint; drop its "
                    "ContinuationPart parts to reuse the transcript with this model"
                )
            found = p
        return found

    # -- reasoning -------------------------------------------------------------------------
    def _reasoning(
        self,
        text: str,
        signature: str | None = None,
        *,
        redacted: bool = False,
        id: str | None = None,
    ) -> ReasoningPart:
        """A reasoning part stamped with this model and endpoint (its only valid target)."""
        return ReasoningPart(
            text,
            signature=signature,
            redacted=redacted,
            provider=self.provider,
            model=self.model or "",
            endpoint=self.endpoint,
            id=id,
        )

    def _own_reasoning(self, part: ReasoningPart) -> bool:
        """Whether ``part`` came from this very model and endpoint. Other reasoning is dropped
        when encoding, never sent: its signature is only valid where it was issued (others
        reject it), and another model's thoughts are not this model's own."""
        return (
            part.provider == self.provider
            and part.model == (self.model or "")
            and part.endpoint == self.endpoint
        )


async def _send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send and return the response once its headers arrived (body unread).

    A request whose connection fails before any response arrived is sent once more, at once,
    only if it went out on a connection reused from the pool: that is the race of a server
    closing a keep-alive connection just as it is reused (llama-server closes after every
    stream), and such a server never processed the request. On a connection opened for this
    request the same failure may come after the server took (and billed) the request, so it
    is raised, never resent. Whether the connection was reused is known from httpcore's
    ``trace`` events (a new one reports ``connect_tcp``); a transport that reports none
    (an injected one) is treated as fresh. Failures after the headers are never retried here.
    """
    events: list[str] = []

    async def trace(name: str, info: Mapping[str, Any]) -> None:
        events.append(name)

    request.extensions["trace"] = trace
    try:
        return await client.send(request, stream=True)
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
        if not _went_out_on_a_reused_connection(events):
            raise
        return await client.send(request, stream=True)


def _went_out_on_a_reused_connection(events: Sequence[str]) -> bool:
    """Whether httpcore's trace ``events`` show request headers sent on a connection that
    was already open (no TCP or Unix socket connect for this request)."""
    opened = any(
        e.endswith((".connect_tcp.started", ".connect_unix_socket.started")) for e in events
    )
    sent = any(e.endswith(".send_request_headers.started") for e in events)
    return sent and not opened


async def _read_rest(reads: AsyncIterator[bytes]) -> None:
    """Read what follows the end of an answer (``[DONE]``: usually nothing, or a comment)
    so the connection can be reused; give up after 64 KiB or 1 s (it is then discarded)."""
    left = _MAX_ERROR_BODY
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for raw in reads:
                left -= len(raw)
                if left < 0:
                    return
    except (TimeoutError, httpx.TransportError):
        return


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The response body as received: the raw chunks when there is no content encoding,
    else httpx's decoded bytes."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    return response.aiter_raw() if encoding in ("", "identity") else response.aiter_bytes()


def json_object(text: str, what: str) -> dict[str, Any]:
    """Parse JSON text that must be an object (tool-call arguments)."""
    if not text.strip():
        return {}
    try:
        value = loads(text)
    except ValueError as exc:
        raise StreamProtocolError(f"{what} is not valid JSON") from exc
    if not isinstance(value, dict):
        raise StreamProtocolError(f"{what} is not a JSON object")
    return value


def tool_result_value(content: str) -> Any:
    """A tool result's JSON text as data (plain text stays a string)."""
    try:
        return loads(content)
    except ValueError:
        return content
