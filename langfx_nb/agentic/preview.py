"""Bounded, JSON-able previews of values for the trace: what a node shows of its inputs,
outputs and messages (long text cut, secrets redacted, models reduced to their id), never a
live object, so a trace can always be saved and shown. Not a faithful encoding."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from ..jsonable import SECRET_KEY, UNHANDLED, Bounds, walk
from ..messages import Message, TextPart
from ..modalities import Mime
from ..redact import redact_secrets

__all__ = ["MAX_PREVIEW_TURNS", "message_preview", "preview", "turn_preview", "turns_preview"]


def preview(value: Any, max_chars: int = 4000) -> Any:
    """A JSON-able, bounded picture of ``value`` for the trace (not a faithful encoding).

    Strings are cut at ``max_chars``; containers at 100 items and depth 8; messages become
    ``{role, text}``; models, functions and other objects become short descriptions.
    Mapping keys that look like credentials are redacted, and credential-shaped text is
    masked (``redact_secrets``): a trace is saved, shown and exported.
    """
    kind = type(value)
    if kind is str:  # the common case, as ``walk`` would cut and mask it
        return redact_secrets(value if len(value) <= max_chars else value[:max_chars] + "…")
    if kind is dict and len(value) <= _MAX_ITEMS:  # vars, options, tool arguments
        shown = _flat_dict(value, max_chars)
        if shown is not None:
            return shown
    bounds, special = _walkers(max_chars)
    dumped_as_is = _DUMPED_AS_IS.get(kind)
    if dumped_as_is is None:
        dumped_as_is = _dumped_as_is(kind)
        if len(_DUMPED_AS_IS) < 1024:  # bounded: classes made at run time are not kept
            _DUMPED_AS_IS[kind] = dumped_as_is
    if dumped_as_is:  # a typed result: what the walker shows, without its probing
        try:
            dumped = value.model_dump(mode="json")
        except Exception:
            return walk(value, bounds, special=special)  # as the walker shows a failed dump
        if type(dumped) is dict and len(dumped) <= _MAX_ITEMS:
            shown = _flat_dict(dumped, max_chars)
            if shown is not None:
                return shown
        return walk(dumped, bounds, special=special, _depth=1)
    return walk(value, bounds, special=special)


_PLAIN = frozenset({dict, list, tuple})
_MAX_ITEMS = 100
_SCALARS = frozenset({int, bool, type(None)})


def _flat_dict(value: dict[Any, Any], max_chars: int) -> dict[str, Any] | None:
    """``walk``'s preview of a dict with string keys and scalar or string values (most
    previewed values: ``vars``, options, tool arguments), without the walker's per-value
    calls; ``None`` for any other dict, which the walker then previews."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            return None
        kind = type(item)
        if kind is str:
            item = redact_secrets(item if len(item) <= max_chars else item[:max_chars] + "…")
        elif kind not in _SCALARS and (kind is not float or not math.isfinite(item)):
            return None
        out[key] = "<redacted>" if _is_secret(key) else item
    return out


def _dumped_as_is(kind: type[Any]) -> bool:
    """Whether ``walk`` shows a ``kind`` value as its ``model_dump(mode="json")`` walked: a
    pydantic model that no earlier rule (message, payload, model id, ``to_json``, mapping,
    container, dataclass) or extra attribute catches. ``preview`` then dumps it directly:
    the walker's probing of a typed result costs 10x its dump (benchmarks/batch.py (a))."""
    fields = getattr(kind, "model_fields", None)
    if not isinstance(fields, dict) or not callable(getattr(kind, "model_dump", None)):
        return False
    config = getattr(kind, "model_config", None)
    return not (
        issubclass(kind, _WALKED_FIRST)
        or dataclasses.is_dataclass(kind)
        or hasattr(kind, "to_json")
        or hasattr(kind, "model_id")
        or "model_id" in fields
        or (isinstance(config, Mapping) and config.get("extra") == "allow")
    )


#: ``_dumped_as_is`` of the classes previewed so far
_DUMPED_AS_IS: dict[type[Any], bool] = {}
_WALKED_FIRST = (Message, Mime, Mapping, BaseException, enum.Enum, list, tuple, set, frozenset)


@functools.lru_cache(maxsize=4096)
def _is_secret(key: str) -> bool:
    """Whether a mapping key looks like a credential (keys repeat: ``vars``, option names)."""
    return SECRET_KEY.search(key) is not None


@functools.lru_cache(maxsize=16)
def _walkers(max_chars: int) -> tuple[Bounds, Callable[[Any, int], Any]]:
    """The bounds and ``special`` hook of ``preview`` (made once per limit: every traced
    call previews several values)."""
    bounds = Bounds(
        max_chars=max_chars, max_items=_MAX_ITEMS, max_depth=8, redact=True, max_repr=200
    )
    return bounds, functools.partial(_preview_special, bounds)


def _preview_special(bounds: Bounds, value: Any, depth: int) -> Any:
    if type(value) in _PLAIN:  # left to the walker (most previews are of these)
        return UNHANDLED
    if isinstance(value, Message):
        return message_preview(value, bounds.max_chars or 4000)
    if isinstance(value, Mime):
        return value.placeholder()
    model_id = getattr(value, "model_id", None)
    if isinstance(model_id, str):  # a LanguageModel: its id only, never its keys or client
        return {"model": model_id}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        special = functools.partial(_preview_special, bounds)
        return {
            "__type__": type(value).__name__,
            **walk(fields, bounds, special=special, _depth=depth + 1),
        }
    return UNHANDLED


MAX_PREVIEW_TURNS = 20


def message_preview(
    message: Message[Any], max_chars: int = 4000, max_turns: int = MAX_PREVIEW_TURNS
) -> Any:
    """``{role, text}`` per turn; only the last ``max_turns`` turns of a long transcript."""
    if type(message).turns is Message.turns:  # one turn: its preview alone
        return turn_preview(message, max_chars)
    turns = message.turns()
    shown = [turn_preview(turn, max_chars) for turn in turns[-max_turns:]]
    return turns_preview(len(turns), shown, max_turns)


def turn_preview(turn: Message[Any], max_chars: int = 4000) -> dict[str, Any]:
    """One turn of a message preview: ``{role, text, tool_calls?, call_id?}``."""
    parts = turn.parts
    if len(parts) == 1 and type(parts[0]) is TextPart:  # most turns: one text part
        text = parts[0].text
        entry: dict[str, Any] = {
            "role": turn.role,
            "text": text if len(text) <= max_chars else text[:max_chars] + "…",
        }
        calls = None
    else:
        entry = {"role": turn.role, "text": preview(turn.text, max_chars)}
        calls = turn.tool_calls
    if calls:
        entry["tool_calls"] = [
            {"id": c.id, "name": c.name, "args": preview(c.args, max_chars)} for c in calls
        ]
    call_id = getattr(turn, "call_id", None)
    if call_id is not None:
        entry["call_id"] = call_id
    return entry


def turns_preview(
    count: int, shown: list[dict[str, Any]], max_turns: int = MAX_PREVIEW_TURNS
) -> Any:
    """The preview of a ``count``-turn message from its last turns' previews (``shown``):
    one turn alone, a list, or ``{omitted_turns, turns}`` past ``max_turns``."""
    if count == 1 and len(shown) == 1:
        return shown[0]
    if count > max_turns:
        return {"omitted_turns": count - max_turns, "turns": shown}
    return shown
