"""What a trace keeps of a failure: ``error_info`` (class and short message) for every
failed node, and ``format_traceback``, the traceback of a failed batch item, as text that may
be stored.

An item's trace node and its run manifest row keep it (``docs/batch.md``), so a bug in
``fn`` at item 3,217 shows where it was raised, not only ``KeyError: 'name'``. What it holds
is bounded and safe to write to a file: the frames (file, line, function, source line) of
the exception and of its causes (``raise ... from``, or raised while handling another), and
of an exception group's sub-exceptions (an ``asyncio.TaskGroup``'s failures, the first
``_MAX_GROUP_WIDTH`` of each group), each exception as its class and the short message
``error_info`` keeps (never a provider body), no local variables; credential-shaped text is
masked, in the message too (``redact_secrets``), and the text is cut to its last
``MAX_TRACEBACK_CHARS`` characters, where the raise is. An exception whose ``str`` raises is
shown as ``<exception str() failed>``: formatting a failure never fails.
"""

from __future__ import annotations

import traceback

from ..redact import redact_secrets

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_TRACEBACK_CHARS",
    "error_info",
    "format_traceback",
    "short_message",
]

MAX_ERROR_CHARS = 300

MAX_TRACEBACK_CHARS = 8000
_MAX_CHAIN = 5  # exceptions of one chain shown (the last ones: the failure and its causes)
_MAX_FRAMES = 40  # frames per exception (the innermost)
_MAX_GROUP_WIDTH = 5  # sub-exceptions shown per exception group (the first ones)
_MAX_GROUP_DEPTH = 3  # exception groups nested in each other that are shown
_MAX_EXCEPTIONS = 40  # exceptions shown in all
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
_STR_FAILED = "<exception str() failed>"


def error_info(exc: BaseException) -> dict[str, str]:
    """Class name and a short message: enough to show, never a provider body, with
    credential-shaped text masked (the message is stored in traces and run manifests). An
    exception whose ``str`` raises gets ``<exception str() failed>`` as its message."""
    try:
        text = str(exc)
    except Exception:
        text = _STR_FAILED
    return {"type": type(exc).__name__, "message": short_message(text)}


def short_message(text: str) -> str:
    """An error message as ``error_info`` keeps it: credential-shaped text masked, cut to
    ``MAX_ERROR_CHARS`` characters (ending in ``…``)."""
    message = redact_secrets(text)
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "…"
    return message


def format_traceback(exc: BaseException) -> str:
    """``exc``'s traceback and its causes' as Python prints them, bounded and masked (see
    the module docstring); an exception group's sub-exceptions follow it, marked ``|``."""
    text = redact_secrets("".join(_chain(exc, 0, set())))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "…\n" + text[-(MAX_TRACEBACK_CHARS - 2) :]
    return text


def _chain(exc: BaseException, depth: int, seen: set[int]) -> list[str]:
    """The text of ``exc`` and of its causes, the first cause first (``seen``: the
    exceptions already shown, at most ``_MAX_EXCEPTIONS``)."""
    chain: list[tuple[BaseException, str]] = []  # (exception, how the next one followed it)
    current: BaseException | None = exc
    link = ""
    while (
        current is not None
        and id(current) not in seen
        and len(chain) < _MAX_CHAIN
        and len(seen) < _MAX_EXCEPTIONS
    ):
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
        parts += _one(error, depth, seen)
        if followed_by:
            parts.append(followed_by)
    return parts


def _one(error: BaseException, depth: int, seen: set[int]) -> list[str]:
    """One exception: its frames, its class and message, and a group's sub-exceptions."""
    subs = _sub_exceptions(error)
    info = error_info(error)
    parts: list[str] = []
    try:  # (reading source lines runs a module's loader, which may raise)
        frames = traceback.format_list(
            traceback.extract_tb(error.__traceback__, limit=-_MAX_FRAMES)
        )
    except Exception:
        frames = ["  <frames could not be read>\n"]
    if frames:
        group = "Exception Group " if subs is not None else ""
        parts.append(f"{group}Traceback (most recent call last):\n")
        parts.extend(frames)
    parts.append(f"{info['type']}: {info['message']}\n" if info["message"] else info["type"] + "\n")
    if not subs:
        return parts
    shown = 0
    for n, sub in enumerate(subs[:_MAX_GROUP_WIDTH], 1):
        if depth >= _MAX_GROUP_DEPTH or len(seen) >= _MAX_EXCEPTIONS:
            break
        parts.append(f"+---------------- {n} ----------------\n")
        text = "".join(_chain(sub, depth + 1, seen)) or "(shown above)"
        parts.extend(f"| {line}\n" for line in text.splitlines())
        shown += 1
    if shown:
        parts.append("+------------------------------------\n")
    if shown < len(subs):
        parts.append(f"and {len(subs) - shown} more sub-exceptions\n")
    return parts


def _sub_exceptions(error: BaseException) -> list[BaseException] | None:
    """An exception group's sub-exceptions (``None`` for other exceptions)."""
    if not isinstance(error, BaseExceptionGroup):
        return None
    try:
        subs = list(error.exceptions)
    except Exception:  # a subclass's own ``exceptions`` that fails
        return []
    return [e for e in subs if isinstance(e, BaseException)]
