"""The events a structured stream yields: field progress, then exactly one terminal outcome.

Every event is a frozen, slotted dataclass whose ``type`` is a snake_case literal, so callers
can dispatch with ``match ev: case lf.StringFieldDelta(path=p, delta=d): ...`` or on
``ev.type``. ``type`` is a class attribute rather than a field: the parser creates one event
per chunk per string, and an extra field costs measurable time on that path. ``to_json()``
includes it for widgets and logs.

Paths are tuples of ``str`` keys and ``int`` indices, relative to the answer's root ``()``.
Partial values (``FieldEnd.value``) are plain JSON-like data (dict/list/str/int/float/bool/
None) and are never validated; only ``GenerationComplete.value`` is the validated ``T``.
Treat event values as read-only: a container's value is shared with its parent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

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


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple):
        return list(v)
    return v


class _EventJSON:
    __slots__ = ()
    type: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """A plain dict with the ``type`` discriminator (paths become lists)."""
        out: dict[str, Any] = {"type": self.type}
        names: tuple[str, ...] = getattr(self, "__slots__", ())
        for name in names:
            out[name] = _jsonable(getattr(self, name))
        return out


@dataclass(frozen=True, slots=True)
class ObjectStart(_EventJSON):
    """An object begins at ``path``; ``name`` is the class name in the Python protocol."""

    path: Path = ()
    name: str | None = None
    type: ClassVar[Literal["object_start"]] = "object_start"


@dataclass(frozen=True, slots=True)
class ObjectEnd(_EventJSON):
    path: Path = ()
    type: ClassVar[Literal["object_end"]] = "object_end"


@dataclass(frozen=True, slots=True)
class ArrayStart(_EventJSON):
    path: Path = ()
    type: ClassVar[Literal["array_start"]] = "array_start"


@dataclass(frozen=True, slots=True)
class ArrayEnd(_EventJSON):
    path: Path = ()
    type: ClassVar[Literal["array_end"]] = "array_end"


@dataclass(frozen=True, slots=True)
class FieldStart(_EventJSON):
    """A value begins at ``path`` (every value, the root ``()`` included)."""

    path: Path
    type: ClassVar[Literal["field_start"]] = "field_start"


@dataclass(frozen=True, slots=True)
class StringFieldDelta(_EventJSON):
    """Decoded characters of the string at ``path``; never half an escape."""

    path: Path
    delta: str
    type: ClassVar[Literal["string_field_delta"]] = "string_field_delta"


@dataclass(frozen=True, slots=True)
class FieldEnd(_EventJSON):
    """The value at ``path`` is complete: plain JSON-like data, not validated."""

    path: Path
    value: Any
    type: ClassVar[Literal["field_end"]] = "field_end"


@dataclass(frozen=True, slots=True)
class GenerationComplete(Generic[T]):
    """Terminal: the validated value (as ``lf.query`` returns it) and the response message."""

    value: T
    message: AIMessage[Any] = field(repr=False)
    type: ClassVar[Literal["generation_complete"]] = "generation_complete"


@dataclass(frozen=True, slots=True)
class ParsingFailed:
    """Terminal: the response did not parse or validate. ``text`` is the whole response."""

    error: MappingError
    text: str = field(repr=False)
    type: ClassVar[Literal["parsing_failed"]] = "parsing_failed"


@dataclass(frozen=True, slots=True)
class GenerationFailed:
    """Terminal: the model or transport failed (an ``LMError`` or another exception)."""

    error: BaseException
    type: ClassVar[Literal["generation_failed"]] = "generation_failed"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Terminal: the model run was cancelled by something other than the consumer (the
    consumer's own cancellation propagates as ``CancelledError`` instead; docs/streaming.md)."""

    type: ClassVar[Literal["cancelled"]] = "cancelled"


FieldEvent = (
    ObjectStart | ObjectEnd | ArrayStart | ArrayEnd | FieldStart | StringFieldDelta | FieldEnd
)
TerminalEvent = GenerationComplete[Any] | ParsingFailed | GenerationFailed | Cancelled
StreamEvent = FieldEvent | ToolCallStreamEvent | TerminalEvent
