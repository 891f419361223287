"""Messages: an ordered list of content parts plus metadata, usage and provenance.

Parts are the source of truth (text, modalities, tool calls, tool results, the model's
reasoning, opaque provider continuation data); ``.text`` is derived from them (reasoning is
not part of it). Every message round-trips through
versioned JSON (``to_json`` / ``Message.from_json``); nothing executable is serialized.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from .modalities import Mime, modality_from_json

__all__ = [
    "AIMessage",
    "ComplexMessage",
    "ContinuationPart",
    "Message",
    "Part",
    "Provenance",
    "ReasoningPart",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "ToolResultPart",
    "Usage",
    "UserMessage",
]

JSON_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete model-requested call. Arguments are unvalidated until a tool checks them."""

    id: str
    name: str
    args: dict[str, Any]
    kind: Literal["tool_call"] = "tool_call"

    def __post_init__(self) -> None:
        if not self.id or not self.name:
            raise ValueError("a tool call needs an id and a name")
        if not isinstance(self.args, dict):
            raise ValueError("tool call arguments must be a JSON object")


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """The JSON text a tool returned, correlated to the call by ``call_id``."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class ContinuationPart:
    """Opaque provider state (e.g. thought signatures) that must go back to the same model."""

    provider: str
    model: str
    data: Any
    kind: Literal["continuation"] = "continuation"


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """Thinking/reasoning a provider returned with an answer (never part of ``.text``).

    ``text`` is the thinking or its summary as given ("" when the provider gives none: a
    redacted block, a reasoning item without a summary). ``signature`` is opaque provider
    data that only the originating model can use (``redacted=True`` when it is a redacted
    block's encrypted data; each provider's module says which field of its answers it
    keeps here). ``provider``/``model``/``endpoint`` (the base URL) say where it came from:
    adapters send a reasoning part back only to that same model and endpoint, and drop it
    for any other (a signature is meaningless, and rejected, elsewhere; another model's
    thoughts are not its own). ``id`` is the provider's item id when it has one.
    """

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    provider: str = ""
    model: str = ""
    endpoint: str | None = None
    id: str | None = None
    kind: Literal["reasoning"] = "reasoning"


Part = TextPart | Mime | ToolCall | ToolResultPart | ContinuationPart | ReasoningPart


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; ``None`` means unknown, never guessed."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    #: Prompt tokens written to the provider's prompt cache by this request (for providers
    #: that report them); like ``cached_tokens`` (read from the cache) they are counted in
    #: ``prompt_tokens`` too.
    cache_write_tokens: int | None = None

    def __post_init__(self) -> None:
        # Counts come from provider answers, which are untrusted: one that is not a count
        # (a string, a float, a negative number) is unknown, never added or priced.
        for name in USAGE_FIELDS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                object.__setattr__(self, name, None)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            _add(self.prompt_tokens, other.prompt_tokens),
            _add(self.completion_tokens, other.completion_tokens),
            _add(self.total_tokens, other.total_tokens),
            _add(self.cached_tokens, other.cached_tokens),
            _add(self.reasoning_tokens, other.reasoning_tokens),
            _add(self.cache_write_tokens, other.cache_write_tokens),
        )

    def to_json(self) -> dict[str, int]:
        return {f: v for f in USAGE_FIELDS if (v := getattr(self, f)) is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(**{f: data.get(f) for f in USAGE_FIELDS})


def _add(a: int | None, b: int | None) -> int | None:
    """A sum of two counts where ``None`` (unknown) adds nothing."""
    if a is None:
        return b
    return a if b is None else a + b


USAGE_FIELDS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Which model produced a message, and within which invocation (trace node id)."""

    model: str | None = None
    invocation_id: str | None = None


def _coerce_parts(content: str | Part | Iterable[str | Part] | None) -> list[Part]:
    """``content`` as parts, with adjacent text (strings and text parts) joined into one text
    part so equal content has one canonical shape; empty strings are dropped, and a text
    part with no text beside it is kept as it is."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if isinstance(content, Part):
        return [content]
    parts: list[Part] = []
    run: list[str | TextPart] = []  # text not yet in ``parts``
    for item in content:
        if isinstance(item, str):
            if item:
                run.append(item)
        elif isinstance(item, TextPart):
            run.append(item)
        elif isinstance(item, Part):
            if run:
                parts.append(_joined(run))
                run = []
            parts.append(item)
        else:
            raise TypeError(f"not a message part: {type(item).__name__}")
    if run:
        parts.append(_joined(run))
    return parts


def _joined(run: list[str | TextPart]) -> TextPart:
    """One text part for a run of adjacent text, joined once (linear: a streamed answer
    arrives as thousands of small parts); a text part alone is kept."""
    if len(run) == 1:
        only = run[0]
        return only if isinstance(only, TextPart) else TextPart(only)
    return TextPart("".join(t if isinstance(t, str) else t.text for t in run))


class Message(Generic[T]):
    """A turn of a conversation. ``result`` holds the typed value of a structured query."""

    role: ClassVar[str] = "message"
    _roles: ClassVar[dict[str, type[Message[Any]]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Message._roles[cls.role] = cls

    def __init__(
        self,
        content: str | Part | Iterable[str | Part] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        usage: Usage | None = None,
        result: T | None = None,
        provenance: Provenance | None = None,
    ) -> None:
        self.parts: list[Part] = _coerce_parts(content)
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.usage = usage
        self.result = result
        self.provenance = provenance

    # -- derived views -------------------------------------------------------------------
    @property
    def text(self) -> str:
        """Text parts joined; modalities appear as short placeholders."""
        out: list[str] = []
        for p in self.parts:
            if isinstance(p, TextPart):
                out.append(p.text)
            elif isinstance(p, Mime):
                out.append(p.placeholder())
            elif isinstance(p, ToolResultPart):
                out.append(p.content)
        return "".join(out)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def reasoning(self) -> list[ReasoningPart]:
        """The model's reasoning parts, in order (empty when it gave none)."""
        return [p for p in self.parts if isinstance(p, ReasoningPart)]

    @property
    def modalities(self) -> list[Mime]:
        return [p for p in self.parts if isinstance(p, Mime)]

    def turns(self) -> list[Message[Any]]:
        """This message as a flat list of role-scoped turns (ComplexMessage overrides)."""
        return [self]

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and isinstance(other, Message)
            and self.parts == other.parts
            and self.metadata == other.metadata
            and self.usage == other.usage
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        text = self.text
        short = text if len(text) <= 60 else text[:57] + "..."
        extra = f", tool_calls={len(self.tool_calls)}" if self.tool_calls else ""
        return f"{type(self).__name__}({short!r}{extra})"

    def __str__(self) -> str:
        return self.text

    # -- serialization -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Versioned plain-JSON form. ``result`` is stored as JSON data when it has one."""
        out: dict[str, Any] = {
            "version": JSON_VERSION,
            "role": self.role,
            "parts": [_part_to_json(p) for p in self.parts],
        }
        if self.metadata:
            out["metadata"] = _jsonable(self.metadata)
        if self.usage is not None:
            out["usage"] = self.usage.to_json()
        if self.result is not None:
            out["result"] = _jsonable(self.result)
        if self.provenance is not None:
            out["provenance"] = {
                k: v
                for k, v in (
                    ("model", self.provenance.model),
                    ("invocation_id", self.provenance.invocation_id),
                )
                if v is not None
            }
        return out

    def to_json_str(self, **kwargs: Any) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, **kwargs)

    def content_json(self) -> dict[str, Any]:
        """What a model is sent of this turn: its role and parts, without metadata, usage,
        result or provenance (the response cache keys on this)."""
        return {"role": self.role, "parts": [_part_to_json(p) for p in self.parts]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> Message[Any]:
        """Rebuild a message. ``result`` comes back as plain JSON data, not the original type."""
        if isinstance(data, str):
            data = json.loads(data)
        assert isinstance(data, Mapping)
        version = data.get("version")
        if version != JSON_VERSION:
            raise ValueError(f"unsupported message JSON version: {version!r}")
        role = data.get("role")
        klass = Message._roles.get(role or "")
        if klass is None:
            raise ValueError(f"unknown message role: {role!r}")
        if klass is ComplexMessage:
            return ComplexMessage(
                [Message.from_json(t) for t in data.get("turns", [])],
                metadata=data.get("metadata"),
            )
        msg: Message[Any] = klass.__new__(klass)
        Message.__init__(
            msg,
            [_part_from_json(p) for p in data.get("parts", [])],
            metadata=data.get("metadata"),
            usage=Usage.from_json(data["usage"]) if "usage" in data else None,
            result=data.get("result"),
            provenance=Provenance(**data["provenance"]) if "provenance" in data else None,
        )
        return msg


class UserMessage(Message[T]):
    role: ClassVar[str] = "user"


class AIMessage(Message[T]):
    role: ClassVar[str] = "ai"


class SystemMessage(Message[T]):
    role: ClassVar[str] = "system"


class ToolMessage(Message[T]):
    """The result of one tool call, sent back to the model."""

    role: ClassVar[str] = "tool"

    def __init__(
        self,
        content: str,
        call_id: str,
        name: str = "",
        *,
        is_error: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(ToolResultPart(call_id, name, content, is_error), metadata=metadata)

    @property
    def call_id(self) -> str:
        part = self.parts[0]
        assert isinstance(part, ToolResultPart)
        return part.call_id


class ComplexMessage(Message[T]):
    """An ordered transcript of role-scoped turns, sent to a model as one prompt."""

    role: ClassVar[str] = "complex"

    def __init__(
        self,
        messages: Sequence[Message[Any]],
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(None, metadata=metadata)
        given = list(messages)
        # An agent sends its whole transcript every step (benchmarks/otel_export.py (c)):
        # when every message is one turn, the list is the turns, without a call per message.
        kinds: set[type[Message[Any]]] = set(map(type, given))
        if all(kind.turns is Message.turns for kind in kinds):
            self.messages = given
            return
        flat: list[Message[Any]] = []
        for m in given:
            flat.extend(m.turns())
        self.messages = flat

    @property
    def parts(self) -> list[Part]:
        return [p for m in self.messages for p in m.parts]

    @parts.setter
    def parts(self, value: list[Part]) -> None:
        if value:
            raise AttributeError("a ComplexMessage's parts come from its turns")

    def turns(self) -> list[Message[Any]]:
        return list(self.messages)

    def __iter__(self) -> Iterator[Message[Any]]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComplexMessage) and self.messages == other.messages

    __hash__ = None

    def __repr__(self) -> str:
        return f"ComplexMessage({len(self.messages)} turns)"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": JSON_VERSION,
            "role": self.role,
            "turns": [m.to_json() for m in self.messages],
        }
        if self.metadata:
            out["metadata"] = _jsonable(self.metadata)
        return out


# -- helpers --------------------------------------------------------------------------------
def _part_to_json(p: Part) -> dict[str, Any]:
    if isinstance(p, Mime):
        return p.to_json()
    if isinstance(p, TextPart):
        return {"kind": "text", "text": p.text}
    if isinstance(p, ToolCall):
        return {"kind": "tool_call", "id": p.id, "name": p.name, "args": _jsonable(p.args)}
    if isinstance(p, ToolResultPart):
        out: dict[str, Any] = {
            "kind": "tool_result",
            "call_id": p.call_id,
            "name": p.name,
            "content": p.content,
        }
        if p.is_error:
            out["is_error"] = True
        return out
    if isinstance(p, ReasoningPart):
        r: dict[str, Any] = {"kind": "reasoning", "text": p.text}
        for key, value in (
            ("signature", p.signature),
            ("provider", p.provider),
            ("model", p.model),
            ("endpoint", p.endpoint),
            ("id", p.id),
        ):
            if value:
                r[key] = value
        if p.redacted:
            r["redacted"] = True
        return r
    return {
        "kind": "continuation",
        "provider": p.provider,
        "model": p.model,
        "data": _jsonable(p.data),
    }


def _part_from_json(d: Mapping[str, Any]) -> Part:
    kind = d.get("kind")
    if kind == "text":
        return TextPart(d["text"])
    if kind == "tool_call":
        return ToolCall(d["id"], d["name"], dict(d["args"]))
    if kind == "tool_result":
        return ToolResultPart(
            d["call_id"], d.get("name", ""), d["content"], bool(d.get("is_error", False))
        )
    if kind == "continuation":
        return ContinuationPart(d["provider"], d["model"], d["data"])
    if kind == "reasoning":
        return _reasoning_from_json(d)
    if kind in Mime._registry or kind == "mime":
        return modality_from_json(dict(d))
    raise ValueError(f"unknown message part kind: {kind!r}")


def _reasoning_from_json(d: Mapping[str, Any]) -> ReasoningPart:
    def opt(key: str) -> str | None:
        value = d.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"reasoning part field {key!r} must be a string")
        return value

    text = d.get("text", "")
    if not isinstance(text, str):
        raise ValueError("reasoning part text must be a string")
    return ReasoningPart(
        text,
        signature=opt("signature"),
        redacted=bool(d.get("redacted", False)),
        provider=opt("provider") or "",
        model=opt("model") or "",
        endpoint=opt("endpoint"),
        id=opt("id"),
    )


def _jsonable(value: Any) -> Any:
    """Plain JSON data for a value; pydantic models and dataclasses via their JSON mode."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Message):
        return value.to_json()
    if isinstance(value, Mime):
        return value.to_json()
    from pydantic import TypeAdapter  # imported lazily: only rich results need it

    try:
        return TypeAdapter(type(value)).dump_python(value, mode="json")
    except Exception:
        return repr(value)
