"""Schemas: any pydantic-validatable type, adapted once and cached.

``Schema.of(tp)`` accepts a ``BaseModel`` subclass, ``int``, ``list[Item]``, ``Literal[...]``,
a ``TypedDict``, a dataclass, unions and containers of those. It gives what the protocols
need: the JSON schema (sent to models), validation (pydantic, the single source of truth for
what is valid), the classes a Python-protocol answer may construct (the schema's own
models, dataclasses and TypedDicts, found recursively), and the type written as Python source.
Everything derived is computed on first use and cached on the ``Schema``, and ``Schema.of``
caches per type, so a query in a loop pays for none of it twice.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

__all__ = ["FieldDesc", "Schema", "annotation_text", "class_name", "is_typeddict"]

_NoneType = type(None)
_MAX_CACHED = 512
# Types an answer cannot construct (no calls allowed) but pydantic reads from literals.
_AS_TEXT: dict[type, str] = {
    datetime.datetime: "str",  # ISO 8601
    datetime.date: "str",
    datetime.time: "str",
    datetime.timedelta: "float",  # seconds
    decimal.Decimal: "str",
    uuid.UUID: "str",
    pathlib.Path: "str",
}


def is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__")


def class_name(cls: type) -> str:
    """The identifier a model writes for a class: generic ``Page[Item]`` → ``Page_Item``."""
    name = cls.__name__
    return name if name.isidentifier() else re.sub(r"\W+", "_", name).strip("_")


def _is_class_type(tp: Any) -> bool:
    """A type the Python protocol constructs with ``Name(field=...)``."""
    return isinstance(tp, type) and (
        issubclass(tp, BaseModel) or dataclasses.is_dataclass(tp) or is_typeddict(tp)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class FieldDesc:
    """One field of a schema class, as shown to a model."""

    name: str
    annotation: Any
    description: str | None
    has_default: bool
    default: Any


def class_fields(cls: type) -> list[FieldDesc]:
    """The fields of a BaseModel, dataclass or TypedDict, in declaration order."""
    out: list[FieldDesc] = []
    if issubclass(cls, BaseModel):
        for name, info in cls.model_fields.items():
            default = info.default
            has_default = not info.is_required() and info.default_factory is None
            out.append(
                FieldDesc(
                    info.alias or name, info.annotation, info.description, has_default, default
                )
            )
        return out
    hints = typing.get_type_hints(cls, include_extras=True)
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            desc = None
            value: Any = f.default
            if isinstance(value, FieldInfo):
                desc = value.description
                value = value.default
            desc = desc or _annotated_description(hints.get(f.name))
            has_default = value is not dataclasses.MISSING and not _is_undefined(value)
            out.append(FieldDesc(f.name, hints.get(f.name, Any), desc, has_default, value))
        return out
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset(hints))
    for name, ann in hints.items():
        out.append(
            FieldDesc(name, ann, _annotated_description(ann), name not in required, _OMITTED)
        )
    return out


class _Omitted:
    def __repr__(self) -> str:
        return "<omitted>"


_OMITTED: Any = _Omitted()


def _is_undefined(value: Any) -> bool:
    return type(value).__name__ == "PydanticUndefinedType"


def _annotated_description(ann: Any) -> str | None:
    if get_origin(ann) is typing.Annotated:
        for meta in get_args(ann)[1:]:
            if isinstance(meta, FieldInfo) and meta.description:
                return meta.description
    return None


def annotation_text(tp: Any) -> str:
    """A type as a model reads it in Python source: ``list[Item]``, ``str | None`` ..."""
    if tp is None or tp is _NoneType:
        return "None"
    if tp is Any:
        return "Any"
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return annotation_text(args[0])
    if origin is Union or origin is types.UnionType:
        return " | ".join(annotation_text(a) for a in args)
    if origin is Literal:
        return f"Literal[{', '.join(repr(_plain(a)) for a in args)}]"
    if origin is not None:
        if origin in (list, set, frozenset) or origin in (Sequence, typing.Sequence):
            return f"list[{annotation_text(args[0]) if args else 'Any'}]"
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return f"tuple[{annotation_text(args[0])}, ...]"
            return f"tuple[{', '.join(annotation_text(a) for a in args)}]"
        if origin in (dict, Mapping, typing.Mapping):
            if args:
                return f"dict[{annotation_text(args[0])}, {annotation_text(args[1])}]"
            return "dict"
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(annotation_text(a) for a in args)}]" if args else name
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return f"Literal[{', '.join(repr(_plain(m.value)) for m in tp)}]"
    if isinstance(tp, type):
        if tp in (list, set, frozenset):
            return "list"
        if tp in _AS_TEXT:
            return _AS_TEXT[tp]
        return class_name(tp) if _is_class_type(tp) else tp.__name__
    return str(tp).replace("typing.", "")


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _walk_classes(tp: Any, found: dict[str, type], seen: set[int]) -> None:
    """Collect class types reachable from ``tp`` in dependency order (dependencies first)."""
    origin = get_origin(tp)
    if origin is not None:
        for a in get_args(tp):
            if origin is Literal:
                break
            _walk_classes(a, found, seen)
        return
    if not _is_class_type(tp) or id(tp) in seen:
        return
    seen.add(id(tp))
    for f in class_fields(tp):
        _walk_classes(f.annotation, found, seen)
    name = class_name(tp)
    other = found.get(name)
    if other is not None and other is not tp:
        raise TypeError(
            f"schema uses two different classes named {name!r}; rename one so a model "
            "can tell them apart"
        )
    found[name] = tp


class Schema:
    """A validatable type plus the cached views the prompt protocols need."""

    _cache: typing.ClassVar[dict[Any, Schema]] = {}

    def __init__(self, tp: Any) -> None:
        self.type = tp
        self.adapter: TypeAdapter[Any] = TypeAdapter(tp)
        classes: dict[str, type] = {}
        _walk_classes(tp, classes, set())
        self.classes: dict[str, type] = classes
        self._json_schema: dict[str, Any] | None = None
        self._class_adapters: dict[str, TypeAdapter[Any]] = {}
        self.memo: dict[Any, Any] = {}  # per-schema cache for protocol prompt fragments

    @classmethod
    def of(cls, tp: Any) -> Schema:
        """The cached ``Schema`` for a type (a ``Schema`` is returned unchanged)."""
        if isinstance(tp, Schema):
            return tp
        try:
            hit = cls._cache.get(tp)
        except TypeError:  # an unhashable type expression: adapt it every time
            return cls(tp)
        if hit is None:
            if len(cls._cache) >= _MAX_CACHED:  # types made on the fly must not pile up
                cls._cache.pop(next(iter(cls._cache)))
            hit = cls._cache[tp] = cls(tp)
        return hit

    @property
    def name(self) -> str:
        """The type as written in Python: ``Answer``, ``list[Item]``, ``int``."""
        name = self.memo.get("name")
        if name is None:
            name = self.memo["name"] = annotation_text(self.type)
        return cast("str", name)

    @property
    def is_object(self) -> bool:
        """Whether values are JSON objects (models, dataclasses, TypedDicts)."""
        return _is_class_type(self.type)

    def json_schema(self) -> dict[str, Any]:
        if self._json_schema is None:
            self._json_schema = self.adapter.json_schema()
        return self._json_schema

    def json_schema_text(self) -> str:
        return json.dumps(self.json_schema(), ensure_ascii=False)

    def validate(self, data: Any) -> Any:
        """Validate plain data (or instances); raises pydantic's ``ValidationError``."""
        return self.adapter.validate_python(data)

    def construct(self, name: str, kwargs: dict[str, Any]) -> Any:
        """Build one schema class from keyword arguments (validating them)."""
        cls = self.classes[name]
        if issubclass(cls, BaseModel):
            return cls.model_validate(kwargs)
        adapter = self._class_adapters.get(name)
        if adapter is None:
            adapter = self._class_adapters[name] = TypeAdapter(cls)
        return adapter.validate_python(kwargs)

    def dump(self, value: Any) -> Any:
        """Plain JSON data for a value of this schema."""
        return self.adapter.dump_python(value, mode="json", by_alias=True)

    def __repr__(self) -> str:
        return f"Schema({self.name})"


def format_validation_error(exc: ValidationError, limit: int = 8) -> str:
    """A short, model-readable summary of what failed validation and where."""
    lines = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        lines.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - limit
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)
