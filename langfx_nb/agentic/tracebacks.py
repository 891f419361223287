"""What a trace keeps of a failure: ``error_info`` (class and short message) for every
failed node, and ``format_traceback``, the traceback of a failed batch item, as text that may
be stored.

An item's trace node and its run manifest row keep it (``docs/batch.md``), so a bug in
``fn`` at item 3,217 shows where it was raised, not only ``KeyError: 'name'``. What it holds
is bounded and safe to write to a file: the frames (file, line, function, source line) of
the exception and of its causes (``raise ... from``, or raised while handling another), each
exception as its class and the short message ``error_info`` keeps (never a provider body),
no local variables; credential-shaped text is masked, in the message too
(``redact_secrets``), and the text is cut to its last ``MAX_TRACEBACK_CHARS`` characters, where
the raise is.
"""

from __future__ import annotations

import traceback

from ..redact import redact_secrets

__all__ = ["MAX_ERROR_CHARS", "MAX_TRACEBACK_CHARS", "error_info", "format_traceback"]

MAX_ERROR_CHARS = 300

MAX_TRACEBACK_CHARS = 8000
_MAX_CHAIN = 5  # exceptions of one chain shown (the last ones: the failure and its causes)
_MAX_FRAMES = 40  # frames per exception (the innermost)
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def error_info(exc: BaseException) -> dict[str, str]:
    """Class name and a short message: enough to show, never a provider body, with
    credential-shaped text masked (the message is stored in traces and run manifests)."""
    message = redact_secrets(str(exc))
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "…"
    return {"type": type(exc).__name__, "message": message}


def format_traceback(exc: BaseException) -> str:
    """``exc``'s traceback and its causes' as Python prints them, bounded and masked (see
    the module docstring)."""
    chain: list[tuple[BaseException, str]] = []  # (exception, how the next one followed it)
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen and len(chain) < _MAX_CHAIN:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for error, followed_by in reversed(chain):
        frames = traceback.extract_tb(error.__traceback__, limit=-_MAX_FRAMES)
        info = error_info(error)
        message = f"{info['type']}: {info['message']}" if info["message"] else info["type"]
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_list(frames))
        parts.append(message + "\n")
        if followed_by:
            parts.append(followed_by)
    text = redact_secrets("".join(parts))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "…\n" + text[-(MAX_TRACEBACK_CHARS - 2) :]
    return text
