"""One walker that turns any value into plain JSON data, for traces, widgets and displays.

Two users, one walk:

- the trace keeps a *bounded preview* (``agentic.preview.preview``): strings cut, containers
  capped, credential-looking keys and credential-shaped text redacted, messages and models
  reduced by a ``special`` hook;
- the notebook layer sends *faithful* JSON to the browser and to fallback HTML
  (``notebook.bridge.to_jsonable``): nothing cut, only made JSON-able.

What a caller may rely on: the result is accepted by ``json.dumps(..., allow_nan=False)``;
non-finite floats become their ``repr`` (``"nan"``; kept as floats with
``Bounds(nonfinite=True)``); enums become their value; exceptions ``{"type", "message"}``;
objects with ``to_json()`` or pydantic's ``model_dump`` are walked through that;
dataclasses become their fields; anything else becomes its ``repr`` (shown, never
evaluated). Nesting deeper than ``max_depth`` becomes ``"…"``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from .redact import redact_secrets

__all__ = ["SECRET_KEY", "UNHANDLED", "Bounds", "walk"]

SECRET_KEY = re.compile(r"api[_-]?key|secret|password|passwd|token$|authorization|credential", re.I)

UNHANDLED: Any = object()
"""What a ``special`` hook returns for a value it leaves to the walker."""


@dataclasses.dataclass(frozen=True, slots=True)
class Bounds:
    """Limits of one walk; ``None`` means unlimited."""

    max_chars: int | None = None  # strings longer than this are cut and end with "…"
    max_items: int | None = None  # containers keep this many items and say how many more
    max_depth: int = 64
    redact: bool = False  # credential-looking mapping keys show "<redacted>", and text masks
    # credential-shaped substrings (``redact_secrets``)
    max_repr: int | None = None  # repr() of unknown objects is cut at this length
    nonfinite: bool = False  # NaN and infinities kept as floats (for a JSON that writes them)


FULL = Bounds()


def walk(
    value: Any,
    bounds: Bounds = FULL,
    *,
    special: Callable[[Any, int], Any] | None = None,
    _depth: int = 0,
) -> Any:
    """``value`` as JSON data within ``bounds`` (see the module docstring for the rules).

    ``special(value, depth)`` sees every non-scalar value first; it returns the JSON form,
    or ``UNHANDLED`` to let the walker go on.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if bounds.nonfinite or math.isfinite(value) else repr(value)
    if isinstance(value, str):
        limit = bounds.max_chars
        text = value if limit is None or len(value) <= limit else value[:limit] + "…"
        return redact_secrets(text) if bounds.redact else text
    if _depth >= bounds.max_depth:
        return "…"
    if special is not None:
        shown = special(value, _depth)
        if shown is not UNHANDLED:
            return shown
    depth = _depth + 1

    def again(v: Any) -> Any:
        return walk(v, bounds, special=special, _depth=depth)

    cap = bounds.max_items
    if isinstance(value, dict) or (
        not isinstance(value, enum.Enum) and isinstance(value, Mapping)
    ):  # dicts first: most values walked are
        out: dict[str, Any] = {}
        redact = bounds.redact
        for i, (k, v) in enumerate(value.items()):
            if cap is not None and i >= cap:
                out["…"] = f"{len(value) - cap} more"
                break
            key = k if type(k) is str else str(k)
            out[key] = "<redacted>" if redact and SECRET_KEY.search(key) else again(v)
        return out
    if isinstance(value, enum.Enum):
        return again(value.value)
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        shown_items = [again(v) for v in (items if cap is None else items[:cap])]
        if cap is not None and len(items) > cap:
            shown_items.append(f"… {len(items) - cap} more")
        return shown_items
    if isinstance(value, BaseException):
        return {"type": type(value).__name__, "message": again(str(value))}
    if isinstance(value, type):
        return value.__qualname__
    for method, args in (("to_json", {}), ("model_dump", {"mode": "json"})):
        dump = getattr(value, method, None)
        if callable(dump):
            try:
                return again(dump(**args))
            except Exception:
                pass
    if dataclasses.is_dataclass(value):
        return again({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    try:
        text = repr(value)
    except Exception:  # a repr that raises: its class is all there is to say
        text = f"<{type(value).__qualname__}>"
    if bounds.redact:
        text = redact_secrets(text)
    limit = bounds.max_repr
    return text if limit is None or len(text) <= limit else text[:limit] + "…"
