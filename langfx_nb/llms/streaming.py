"""Stream chunks, tool-call display events, and the accumulator every adapter feeds.

An adapter pushes text deltas and tool-call events into a ``StreamAccumulator`` and yields
the chunks it returns. Each chunk's ``aggregated`` message is built only when read, from the
parts seen up to that chunk (text deltas are kept as plain strings and joined into text parts
then), so streaming stays linear in the response size.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import GenerationError, IncompleteGenerationError
from ..messages import AIMessage, Part, Provenance, TextPart, ToolCall, Usage

__all__ = [
    "StreamAccumulator",
    "StreamChunk",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolCallStreamEvent",
    "billed_answer",
]


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    id: str
    name: str
    type: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a call's JSON arguments: for display only, never executed."""

    id: str
    delta: str
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ToolCallEnd:
    call: ToolCall
    type: Literal["tool_call_end"] = "tool_call_end"


ToolCallStreamEvent = ToolCallStart | ToolCallDelta | ToolCallEnd


@dataclass(slots=True, eq=False)
class StreamChunk:
    """One step of a model stream. ``aggregated`` is everything received so far."""

    delta: str
    index: int = 0
    final: bool = False
    usage: Usage | None = None
    finish_reason: str | None = None
    events: tuple[ToolCallStreamEvent, ...] = ()
    _source: StreamAccumulator | None = field(default=None, repr=False)
    _upto: int = field(default=0, repr=False)

    @property
    def aggregated(self) -> AIMessage[Any]:
        if self._source is None:
            return AIMessage(self.delta)
        return self._source.snapshot(self._upto, final=self.final)


class StreamAccumulator:
    """Collects a streamed response; hands out chunks and the final message."""

    def __init__(self, model: str | None = None, index: int = 0) -> None:
        self.model = model
        self.index = index
        self.parts: list[str | Part] = []  # a str is a text delta
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.metadata: dict[str, Any] = {}
        self._final: AIMessage[Any] | None = None

    def text(self, delta: str) -> StreamChunk:
        if delta:
            self.parts.append(delta)
        return self._chunk(delta)

    def events(self, *events: ToolCallStreamEvent, delta: str = "") -> StreamChunk:
        """A chunk carrying tool-call display events; a completed call joins the message."""
        if delta:
            self.parts.append(delta)
        for e in events:
            if isinstance(e, ToolCallEnd):
                self.parts.append(e.call)
        return self._chunk(delta, events)

    def add_part(self, part: Part) -> None:
        """Parts with no display of their own (e.g. continuation data)."""
        self.parts.append(part)

    def finish(
        self,
        *,
        usage: Usage | None = None,
        finish_reason: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> StreamChunk:
        self.usage = usage if usage is not None else self.usage
        self.finish_reason = finish_reason or self.finish_reason
        if metadata:
            self.metadata.update(metadata)
        return StreamChunk(
            "", self.index, True, self.usage, self.finish_reason, (), self, len(self.parts)
        )

    @property
    def has_text(self) -> bool:
        """Some non-empty text has arrived."""
        return any(isinstance(p, str) or (isinstance(p, TextPart) and p.text) for p in self.parts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The completed tool calls so far, in order."""
        return [p for p in self.parts if isinstance(p, ToolCall)]

    def message(self) -> AIMessage[Any]:
        """The complete response message (after ``finish``)."""
        return self.snapshot(len(self.parts), final=True)

    def snapshot(self, upto: int, *, final: bool = False) -> AIMessage[Any]:
        if final and upto == len(self.parts) and self._final is not None:
            return self._final
        metadata = dict(self.metadata) if final else {}
        if final and self.finish_reason:
            metadata.setdefault("finish_reason", self.finish_reason)
        msg: AIMessage[Any] = AIMessage(
            self.parts[:upto],
            metadata=metadata,
            usage=self.usage if final else None,
            provenance=Provenance(model=self.model),
        )
        if final and upto == len(self.parts):
            self._final = msg
        return msg

    def _chunk(self, delta: str, events: tuple[ToolCallStreamEvent, ...] = ()) -> StreamChunk:
        return StreamChunk(delta, self.index, False, None, None, events, self, len(self.parts))


@contextmanager
def billed_answer(acc: StreamAccumulator, usage: Usage | None, reason: Any) -> Iterator[None]:
    """Around an adapter's final checks of an answer: a ``GenerationError`` raised inside
    (truncated, refused, empty) leaves with the answer as far as it went in its ``response``
    (what ``acc`` received, the ``usage`` the provider reported, its finish ``reason``), so
    the request is counted and priced as the provider bills it."""
    try:
        yield
    except GenerationError as exc:
        if exc.response is None:
            truncated = isinstance(exc, IncompleteGenerationError)
            exc.response = acc.finish(
                usage=usage,
                finish_reason="length" if truncated else None,
                metadata={"provider_finish_reason": reason} if reason is not None else None,
            ).aggregated
        raise
