"""The events a structured stream yields: field progress, then exactly one terminal outcome.

Every event is a frozen, slotted dataclass with a ``type`` field holding its snake_case name
(as the tool-call events have), so callers can dispatch with
``match ev: case lf.StringFieldDelta(path=p, delta=d): ...`` or on ``ev.type``.
``to_json()`` turns a field event into a plain dict for widgets and logs.

Paths are tuples of ``str`` keys and ``int`` indices, relative to the answer's root ``()``.
Partial values (``FieldEnd.value``) are plain JSON-like data (dict/list/str/int/float/bool/
None) and are never validated; only ``GenerationComplete.value`` is the validated ``T``.
Treat event values as read-only: a container's value is shared with its parent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Generic, Literal, TypeVar

from ..errors import MappingError
from ..llms.streaming import ToolCallDelta, ToolCallEnd, ToolCallStart, ToolCallStreamEvent
from ..messages import AIMessage

__all__ = [
    "ArrayEnd",
    "ArrayStart",
    "Cancelled",
    "FieldEnd",
    "FieldEvent",
    "FieldStart",
    "GenerationComplete",
    "GenerationFailed",
    "ObjectEnd",
    "ObjectStart",
    "ParsingFailed",
    "Path",
    "Repairing",
    "StreamEvent",
    "StringFieldDelta",
    "TerminalEvent",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolCallStreamEvent",
]

T = TypeVar("T")

Path = tuple[str | int, ...]


class _FieldEventJSON:
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """A plain dict of the event's fields, ``type`` included (paths become lists)."""
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True)
class ObjectStart(_FieldEventJSON):
    """An object begins at ``path``; ``name`` is the class name in the Python protocol."""

    path: Path = ()
    name: str | None = None
    type: Literal["object_start"] = "object_start"


@dataclass(frozen=True, slots=True)
class ObjectEnd(_FieldEventJSON):
    path: Path = ()
    type: Literal["object_end"] = "object_end"


@dataclass(frozen=True, slots=True)
class ArrayStart(_FieldEventJSON):
    path: Path = ()
    type: Literal["array_start"] = "array_start"


@dataclass(frozen=True, slots=True)
class ArrayEnd(_FieldEventJSON):
    path: Path = ()
    type: Literal["array_end"] = "array_end"


@dataclass(frozen=True, slots=True)
class FieldStart(_FieldEventJSON):
    """A value begins at ``path`` (every value, the root ``()`` included)."""

    path: Path
    type: Literal["field_start"] = "field_start"


@dataclass(frozen=True, slots=True)
class StringFieldDelta(_FieldEventJSON):
    """Decoded characters of the string at ``path``; never half an escape."""

    path: Path
    delta: str
    type: Literal["string_field_delta"] = "string_field_delta"


@dataclass(frozen=True, slots=True)
class FieldEnd(_FieldEventJSON):
    """The value at ``path`` is complete: plain JSON-like data, not validated."""

    path: Path
    value: Any
    type: Literal["field_end"] = "field_end"


@dataclass(frozen=True, slots=True)
class GenerationComplete(Generic[T]):
    """Terminal: the validated value (as ``lf.query`` returns it) and the response message."""

    value: T
    message: AIMessage[Any] = field(repr=False)
    type: Literal["generation_complete"] = "generation_complete"


@dataclass(frozen=True, slots=True)
class ParsingFailed:
    """Terminal: the response did not parse or validate. ``text`` is the whole response.

    ``error`` is the stream parser's ``StreamParseError`` (with its position) when that
    parser failed first, else the protocol's ``MappingError``; ``query_error`` is always the
    error ``lf.query`` raises for the same answer (the stream's error as its cause)."""

    error: MappingError
    text: str = field(repr=False)
    type: Literal["parsing_failed"] = "parsing_failed"
    answer_error: MappingError | None = field(default=None, repr=False, compare=False)

    @property
    def query_error(self) -> MappingError:
        """The error the non-streamed ``lf.query`` raises for this answer."""
        return self.answer_error if self.answer_error is not None else self.error


@dataclass(frozen=True, slots=True)
class Repairing:
    """Not terminal: attempt ``attempt`` failed with ``error`` (its whole answer is ``text``)
    and the model is asked again (``repair=N``); the next attempt's events follow from the
    answer's root."""

    attempt: int
    error: MappingError
    text: str = field(repr=False)
    type: Literal["repairing"] = "repairing"


@dataclass(frozen=True, slots=True)
class GenerationFailed:
    """Terminal: the model or transport failed (an ``LMError`` or another exception)."""

    error: BaseException
    type: Literal["generation_failed"] = "generation_failed"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Terminal: the model run was cancelled by something other than the consumer (the
    consumer's own cancellation propagates as ``CancelledError`` instead; docs/streaming.md)."""

    type: Literal["cancelled"] = "cancelled"


FieldEvent = (
    ObjectStart | ObjectEnd | ArrayStart | ArrayEnd | FieldStart | StringFieldDelta | FieldEnd
)
TerminalEvent = GenerationComplete[Any] | ParsingFailed | GenerationFailed | Cancelled
StreamEvent = FieldEvent | ToolCallStreamEvent | Repairing | TerminalEvent
