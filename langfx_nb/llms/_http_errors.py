"""How an HTTP failure becomes an error of ``langfx_nb.errors``, for every provider.

A provider reads its error body into an ``ErrorInfo`` (``HTTPModel._error_info``); the
status and that info choose the class (``error_from_status``: 401/403 authentication, 429
rate limit with the wait asked for, context length, invalid request, 5xx and 408 server
errors, retryable). A message carries the provider's name, the status and a short code
that looks like an identifier (``safe_code``), never the response body: only a detail the
provider's adapter redacted and bounded itself is shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import (
    AuthenticationError,
    ContextLengthError,
    InvalidRequestError,
    LMError,
    RateLimitError,
    ServerError,
)
from ..redact import redact_secrets

__all__ = ["ErrorInfo", "error_from_status", "safe_code", "transport_error"]

_SAFE_CODE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What an adapter learned from an error body; ``code`` is the short type shown to users."""

    code: str | None = None
    retry_after: float | None = None
    context_length: bool = False
    auth: bool = False
    # The server said the request itself is invalid, whatever the status (some compatible
    # servers answer validation failures with a 5xx); ``detail`` is what it said, already
    # redacted and bounded by the adapter, shown to the user because nothing else explains it.
    invalid: bool = False
    detail: str | None = None


def safe_code(value: Any) -> str | None:
    """A provider error type/code, only if it looks like an identifier (never free text,
    never something shaped like a key)."""
    if isinstance(value, str) and _SAFE_CODE.match(value) and redact_secrets(value) == value:
        return value
    return None


def error_from_status(
    provider: str, status: int, info: ErrorInfo, retry_after: float | None = None
) -> LMError:
    """The error class for an HTTP failure. The message is the status and the short code, plus
    ``info.detail`` only when the adapter found a redacted explanation worth showing."""
    code = f" ({info.code})" if info.code else ""
    message = f"{provider} request failed: HTTP {status}{code}"
    if info.detail:
        message += f"; the server said: {info.detail}"
    if status in (401, 403) or info.auth:
        return AuthenticationError(message, status=status)
    if status == 429:
        wait = info.retry_after if info.retry_after is not None else retry_after
        return RateLimitError(message, status=status, retry_after=wait)
    if info.context_length:
        return ContextLengthError(message, status=status)
    if info.invalid:
        return InvalidRequestError(message, status=status)
    if status >= 500 or status == 408:
        return ServerError(message, status=status)
    return InvalidRequestError(message, status=status)


def transport_error(provider: str, exc: httpx.TransportError) -> ServerError:
    """A connection that failed (the caller chains ``exc``): its kind, not its text, which
    may hold an address with credentials."""
    kind = type(exc).__name__
    return ServerError(f"{provider}: connection failed ({kind})")
