"""Prompt protocols: how a schema is asked for in a prompt, and how the answer is read back.

``python`` (the default) asks for one restricted Python constructor expression, e.g.
``Basket(items=[Fruit(name='apple', count=1)])``, and reads it with ``ast`` against an
allow-list: literals, lists/dicts/tuples, unary minus on numbers, and keyword-argument calls
to the schema's own class names. Nothing from the response is ever executed: no ``eval``, no
name lookups, no attribute access; anything else is a ``MappingError``.

``json`` asks for ``{"result": ...}`` in a ```json block and reads it with ``json.loads``.

Both end in the same pydantic validation of the schema. The exact prompt formats are
written down in ``docs/protocols.md``; keep the two in step.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import decimal
import enum
import json
import math
import pathlib
import re
import uuid
from collections.abc import Mapping as AbcMapping
from functools import lru_cache
from typing import Any, ClassVar, cast

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from .._unicode import has_surrogates, repair_surrogates
from ..errors import MappingError
from ..schema import Schema, annotation_text, class_fields, class_name, format_validation_error

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_PYTHON_CHARS",
    "MAX_RESPONSE_CHARS",
    "JsonProtocol",
    "Protocol",
    "PythonProtocol",
    "extract_code_block",
    "get_protocol",
    "parse_python_expr",
    "python_type_source",
    "to_python_expr",
]

MAX_RESPONSE_CHARS = 1_000_000  # larger responses are rejected before any parsing
# The expression a python-protocol answer holds. ``ast.parse`` needs up to ~460 bytes of
# memory per character (a dense list of numbers), so 100k characters cost at most ~50 MB and
# ~0.15 s (benchmarks/protocol_cost.py); bigger answers belong to the json protocol.
MAX_PYTHON_CHARS = 100_000
MAX_DEPTH = 100  # nesting of containers/calls in one answer
MAX_INT_DIGITS = 100  # integer literals must be below 10**100 in magnitude
_INT_LIMIT = 10**MAX_INT_DIGITS

_LANG = re.compile(r"[A-Za-z0-9_+.-]*")
# ``output = <expr>`` or ``output: Type = <expr>``: the form models often write the answer in.
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*[ \t]*(?::[^=\n]*)?=(?!=)")


def _repair_data(value: Any) -> Any:
    """Parsed JSON data with ``repair_surrogates`` applied to every string and key."""
    if isinstance(value, str):
        return repair_surrogates(value)
    if isinstance(value, list):
        return [_repair_data(v) for v in value]
    if isinstance(value, dict):
        return {_repair_data(k): _repair_data(v) for k, v in value.items()}
    return value


def extract_code_block(text: str, languages: tuple[str, ...]) -> tuple[str, bool]:
    """The answer inside a fenced block, preferring one tagged with ``languages``.

    Returns ``(code, fenced)``. Preference: the first block tagged with one of
    ``languages``, else the first untagged block, else the first block of another language;
    without any fence the whole text is the answer. Prose around the block is ignored; an
    unclosed fence (a truncated response) runs to the end. One pass over the lines, so the
    time is linear in the text even for adversarial input.
    """
    if "```" not in text:
        return text.strip(), False
    untagged: str | None = None
    other: str | None = None
    lines = text.split("\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        i += 1
        k = line.find("```")
        if k < 0:
            continue
        rest = line[k + 3 :]
        lang_match = _LANG.match(rest)
        lang = lang_match.group().lower() if lang_match else ""
        end = rest.find("```")
        if end >= 0:  # a one-line block: ```python A(x=1)```
            if lang and rest[len(lang) : len(lang) + 1] in (" ", "\t"):
                code = rest[len(lang) : end]
            else:
                code, lang = rest[:end], ""
            if not code.strip():
                continue
        else:
            body_lines: list[str] = []
            while i < n:  # a closing fence starts its line or ends it ("A(x=1)```")
                stripped = lines[i].strip()
                if stripped.startswith("```") or stripped.endswith("```"):
                    body_lines.append(stripped[:-3] if not stripped.startswith("```") else "")
                    i += 1
                    break
                body_lines.append(lines[i])
                i += 1
            code = "\n".join(body_lines)
            if not code.strip():  # e.g. a string literal holding ``` in an unfenced answer
                continue
        if lang in languages:
            return code.strip(), True
        if not lang and untagged is None:
            untagged = code
        elif lang and other is None:
            other = code
    block = untagged if untagged is not None else other
    if block is None:
        return text.strip(), False
    return block.strip(), True


def check_size(text: str, raw: str, limit: int = MAX_RESPONSE_CHARS, hint: str = "") -> None:
    if len(text) > limit:
        raise MappingError(
            f"response too large to parse ({len(text)} characters; the limit is {limit}{hint})",
            raw=raw,
            detail="too large",
        )


# -- python: rendering -------------------------------------------------------------------------
def to_python_expr(value: Any) -> str:
    """A value as the restricted constructor expression the python protocol reads back.

    Models, dataclasses render as ``Name(field=...)``; TypedDicts are dicts at runtime and
    render as dict literals; enums as their values; NaN/infinity as strings pydantic accepts.
    Short values stay on one line, longer ones are indented two spaces per level.
    """
    return _pretty(value, 0, 0)


_WIDTH = 80


def _pretty(value: Any, indent: int, column: int) -> str:
    flat = _expr(value, None)
    if column + len(flat) <= _WIDTH:
        return flat
    return _expr(value, indent)


def _expr(value: Any, indent: int | None) -> str:
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return _expr(value.value, indent)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return repr(str(value))
        return repr(value)
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date subclass
        return repr(value.isoformat())
    if isinstance(value, datetime.timedelta):
        return repr(value.total_seconds())
    if isinstance(value, (decimal.Decimal, uuid.UUID, pathlib.PurePath)):
        return repr(str(value))
    if isinstance(value, BaseModel):
        items = [
            (info.alias or name, getattr(value, name))
            for name, info in type(value).model_fields.items()
        ]
        return _call(class_name(type(value)), items, indent)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
        return _call(class_name(type(value)), items, indent)
    if isinstance(value, AbcMapping):
        return _container(
            "{", "}", [f"{_expr(k, None)}: " for k in value], list(value.values()), indent
        )
    if isinstance(value, tuple):
        inner = _container("(", ")", None, list(value), indent)
        return inner[:-1] + ",)" if len(value) == 1 else inner
    if isinstance(value, (list, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return _container("[", "]", None, list(items), indent)
    raise TypeError(f"cannot write a {type(value).__name__} as a python-protocol expression")


def _call(name: str, items: list[tuple[str, Any]], indent: int | None) -> str:
    return _container(f"{name}(", ")", [f"{k}=" for k, _ in items], [v for _, v in items], indent)


def _container(
    open_: str, close: str, prefixes: list[str] | None, values: list[Any], indent: int | None
) -> str:
    if indent is None or not values:
        body = ", ".join(
            (prefixes[i] if prefixes else "") + _expr(v, None) for i, v in enumerate(values)
        )
        return f"{open_}{body}{close}"
    pad = " " * (indent + 2)
    lines = []
    for i, v in enumerate(values):
        prefix = prefixes[i] if prefixes else ""
        lines.append(pad + prefix + _pretty(v, indent + 2, indent + 2 + len(prefix)))
    return open_ + "\n" + ",\n".join(lines) + "\n" + " " * indent + close


def python_type_source(schema: Schema) -> str:
    """The OUTPUT PYTHON TYPE section body: the type, then its classes as Python source.

    Dependencies come before the classes that use them; field descriptions become comments
    above their fields and a class docstring stays a docstring.
    """
    if not schema.classes:
        return schema.name
    blocks = [_class_source(cls) for cls in schema.classes.values()]
    return schema.name + "\n\n```python\n" + "\n\n".join(blocks) + "\n```"


def _class_source(cls: type) -> str:
    lines = [f"class {class_name(cls)}:"]
    doc = (cls.__doc__ or "").strip() if _own_doc(cls) else ""
    if doc:
        lines.append('  """' + doc.replace('"""', "'''").replace("\n", "\n  ") + '"""')
    fields = class_fields(cls)
    for f in fields:
        if f.description:
            lines.extend("  # " + line for line in f.description.strip().splitlines())
        line = f"  {f.name}: {annotation_text(f.annotation)}"
        if f.has_default and _simple_literal(f.default):
            line += f" = {_expr(f.default, None)}"
        lines.append(line)
    if not fields and not doc:
        lines.append("  pass")
    return "\n".join(lines)


def _own_doc(cls: type) -> bool:
    """Skip docstrings a class only inherits from BaseModel/TypedDict/dict plumbing."""
    return (
        "__doc__" in cls.__dict__
        and cls.__doc__ is not None
        and not (dataclasses.is_dataclass(cls) and cls.__doc__.startswith(cls.__name__ + "("))
    )


def _simple_literal(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, enum.Enum)):
        return True
    return isinstance(value, (list, tuple, dict)) and not value


# -- python: parsing ---------------------------------------------------------------------------
_NODE_NAMES = {
    ast.Name: "a variable name",
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripting",
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.JoinedStr: "an f-string",
    ast.Starred: "star unpacking",
    ast.NamedExpr: "an assignment expression",
    ast.BinOp: "an operator",
    ast.BoolOp: "a boolean operator",
    ast.Compare: "a comparison",
    ast.IfExp: "a conditional expression",
    ast.Set: "a set literal",
    ast.Await: "await",
}


class _Reader:
    """Converts an allow-listed AST into values, constructing only the schema's classes."""

    def __init__(self, schema: Schema, raw: str) -> None:
        self.schema = schema
        self.raw = raw

    def fail(self, node: ast.AST, what: str) -> MappingError:
        where = (
            f" at line {getattr(node, 'lineno', '?')}, column {getattr(node, 'col_offset', -1) + 1}"
        )
        return MappingError(
            f"{what}{where} is not allowed in a python-protocol answer; expected only "
            f"{_allowed(self.schema)}",
            raw=self.raw,
            detail=what + where,
        )

    def value(self, node: ast.AST, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise MappingError(
                f"answer nested more than {MAX_DEPTH} levels deep", raw=self.raw, detail="too deep"
            )
        if isinstance(node, ast.Constant):
            const = node.value
            if isinstance(const, str):
                return repair_surrogates(const)
            if isinstance(const, int) and not isinstance(const, bool) and abs(const) >= _INT_LIMIT:
                raise self.fail(node, f"an integer with more than {MAX_INT_DIGITS} digits")
            if const is None or isinstance(const, (bool, int, float)):
                return const
            raise self.fail(node, f"a {type(const).__name__} literal")
        if isinstance(node, ast.List):
            return [self.value(e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                if k is None:
                    raise self.fail(v, "'**' unpacking")
                key = self.value(k, depth + 1)
                if not _plain_key(key):
                    raise self.fail(k, "a dict key other than a literal or a tuple of literals")
                out[key] = self.value(v, depth + 1)
            return out
        if isinstance(node, ast.UnaryOp):
            operand = node.operand
            if (
                isinstance(node.op, (ast.USub, ast.UAdd))
                and isinstance(operand, ast.Constant)
                and type(operand.value) in (int, float)
            ):
                number = cast("int | float", self.value(operand, depth + 1))
                return -number if isinstance(node.op, ast.USub) else number
            raise self.fail(node, "an operator other than a sign on a number")
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise self.fail(node, _NODE_NAMES.get(type(node), f"a {type(node).__name__} expression"))

    def call(self, node: ast.Call, depth: int) -> Any:
        func = node.func
        if not isinstance(func, ast.Name):
            raise self.fail(func, "calling something other than a schema class name")
        name = func.id
        if name not in self.schema.classes:
            raise self.fail(func, f"calling {name!r} (not a class of this schema)")
        if node.args:
            raise self.fail(node.args[0], f"a positional argument to {name}")
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail(kw.value, "'**' unpacking")
            if kw.arg.startswith("__"):
                raise self.fail(kw.value, f"the dunder argument {kw.arg!r}")
            kwargs[kw.arg] = self.value(kw.value, depth + 1)
        try:
            return self.schema.construct(name, kwargs)
        except ValidationError as exc:
            raise MappingError(
                f"{name}(...) did not validate: {format_validation_error(exc)}",
                raw=self.raw,
                detail=exc.errors(include_url=False, include_context=False),
            ) from None


def _plain_key(key: Any) -> bool:
    """A literal or a tuple of them: hashable, and as a JSON key or tuple what pydantic expects."""
    if isinstance(key, tuple):
        return all(_plain_key(k) for k in key)
    return key is None or isinstance(key, (str, int, float, bool))


def _allowed(schema: Schema) -> str:
    base = "literals, lists, dicts and tuples"
    if not schema.classes:
        return base
    return f"{base}, and keyword calls to {', '.join(schema.classes)}"


def parse_python_expr(code: str, schema: Schema, *, raw: str | None = None) -> Any:
    """Read one restricted constructor expression into plain values and schema instances.

    Validation against the whole schema happens afterwards (``PythonProtocol.parse``).
    """
    raw = code if raw is None else raw
    check_size(code, raw, MAX_PYTHON_CHARS, "; use protocol='json' for bigger answers")
    code = code.strip()
    if not code:
        raise MappingError(
            f"empty answer; expected a Python expression of type {schema.name}",
            raw=raw,
            detail="empty",
        )
    if (assignment := _ASSIGNMENT.match(code)) is not None:
        code = code[assignment.end() :].strip()  # ``output = Answer(...)``: the expression
    code = repair_surrogates(code)
    try:
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        msg = getattr(exc, "msg", None) or type(exc).__name__
        line = getattr(exc, "lineno", None)
        where = f" at line {line}" if line else ""
        raise MappingError(
            f"the answer is not one Python expression ({msg}{where}); expected a value of type "
            f"{schema.name} such as {_hint(schema)} in a ```python block",
            raw=raw,
            detail=f"syntax: {msg}{where}",
        ) from None
    return _Reader(schema, raw).value(tree.body, 0)


def _hint(schema: Schema) -> str:
    if schema.is_object:
        return f"{schema.name}(field=...)"
    return "a literal"


def _candidate(text: str, schema: Schema) -> str | None:
    """From prose with an unfenced answer, the span from its likely start to its last bracket."""
    starts = [i for n in schema.classes if (i := text.find(n + "(")) >= 0]
    if not starts:
        starts = [i for ch in "[{" if (i := text.find(ch)) >= 0]
    if not starts:
        return None
    start = min(starts)
    end = max(text.rfind(ch) for ch in ")]}")
    if end <= start:
        return None
    return text[start : end + 1]


# -- protocols ---------------------------------------------------------------------------------
class Protocol:
    """How a structured query is asked for and read back; see ``docs/protocols.md``."""

    name: ClassVar[str]
    request_header: ClassVar[str] = "REQUEST:"
    context_header: ClassVar[str] = "CONTEXT:"

    def instruction(self) -> str:
        raise NotImplementedError

    def type_section(self, schema: Schema) -> str:
        raise NotImplementedError

    def answer_section(self, value: Any, schema: Schema) -> str:
        raise NotImplementedError

    def output_header(self) -> str:
        raise NotImplementedError

    def parse(self, text: str, schema: Schema) -> Any:
        """The validated value from a response text; ``MappingError`` on any failure."""
        raise NotImplementedError

    def _validate(self, value: Any, schema: Schema, raw: str) -> Any:
        try:
            return schema.validate(value)
        except ValidationError as exc:
            raise MappingError(
                f"the answer does not match the expected type {schema.name}: "
                f"{format_validation_error(exc)}",
                raw=raw,
                detail=exc.errors(include_url=False, include_context=False),
            ) from None


class PythonProtocol(Protocol):
    name = "python"

    def instruction(self) -> str:
        return (
            "Please respond to the last REQUEST with an OUTPUT PYTHON OBJECT of the OUTPUT "
            "PYTHON TYPE. Write it as one Python expression in a ```python code block, using "
            "only literals (strings, numbers, True, False, None, lists, dicts, tuples) and the "
            "classes defined in OUTPUT PYTHON TYPE called with keyword arguments. Do not use "
            "variables, imports, functions or any other code."
        )

    def type_section(self, schema: Schema) -> str:
        return "OUTPUT PYTHON TYPE:\n" + python_type_source(schema)

    def output_header(self) -> str:
        return "OUTPUT PYTHON OBJECT:"

    def answer_section(self, value: Any, schema: Schema) -> str:
        return f"OUTPUT PYTHON OBJECT:\n```python\n{to_python_expr(value)}\n```"

    def parse(self, text: str, schema: Schema) -> Any:
        check_size(text, text)
        code, fenced = extract_code_block(text, ("python", "py", "python3"))
        try:
            value = parse_python_expr(code, schema, raw=text)
        except MappingError as exc:
            # An expression that parsed but used something not allowed is never trimmed down.
            if not (isinstance(exc.detail, str) and exc.detail.startswith("syntax")):
                raise
            if fenced:
                # What looked like a fence may be ``` inside a string of an unfenced answer.
                try:
                    value = parse_python_expr(text.strip(), schema, raw=text)
                except MappingError:
                    raise exc from None
            else:
                # Prose around an unfenced answer: look for the answer inside it.
                candidate = _candidate(text, schema)
                if candidate is None or candidate == code:
                    raise
                value = parse_python_expr(candidate, schema, raw=text)
        return self._validate(value, schema, text)


class JsonProtocol(Protocol):
    name = "json"

    def instruction(self) -> str:
        return (
            "Please respond to the last REQUEST with an OUTPUT JSON OBJECT: a JSON object of "
            'the form {"result": <value>} in a ```json code block, where <value> conforms to '
            "the RESULT SCHEMA (a JSON Schema)."
        )

    def type_section(self, schema: Schema) -> str:
        text = schema.memo.get("json_prompt_schema")
        if text is None:
            text = json.dumps(_strip_titles(schema.json_schema()), ensure_ascii=False)
            schema.memo["json_prompt_schema"] = text
        return "RESULT SCHEMA:\n" + text

    def output_header(self) -> str:
        return "OUTPUT JSON OBJECT:"

    def answer_section(self, value: Any, schema: Schema) -> str:
        data = json.dumps({"result": _json_data(value)}, ensure_ascii=False)
        return f"OUTPUT JSON OBJECT:\n```json\n{data}\n```"

    def parse(self, text: str, schema: Schema) -> Any:
        check_size(text, text)
        code, fenced = extract_code_block(text, ("json", "json5", "jsonc"))
        data = loads_or_fail(code)
        if data is FAIL and fenced:  # the "fence" may be ``` inside a string of the answer
            data = loads_or_fail(text.strip())
        if data is FAIL and not fenced:
            start, end = code.find("{"), code.rfind("}")
            if 0 <= start < end:
                data = loads_or_fail(code[start : end + 1])
        if data is FAIL:
            what = "empty" if not code else "not valid JSON"
            raise MappingError(
                f'the answer is {what}; expected a JSON object {{"result": ...}} with a value '
                f"of type {schema.name} in a ```json block",
                raw=text,
                detail=what,
            )
        if "\\u" in text or has_surrogates(text):
            data = _repair_data(data)  # a "\\ud800" escape decodes to a lone surrogate
        if isinstance(data, dict) and len(data) == 1 and "result" in data:
            data = data["result"]
        return self._validate(data, schema, text)


def _strip_titles(node: Any, in_properties: bool = False) -> Any:
    """Drop pydantic's generated ``title`` keywords: they repeat the field names and cost
    tokens. Property *names* (keys of ``properties``) are kept, even one called "title"."""
    if isinstance(node, dict):
        return {
            k: _strip_titles(v, k in ("properties", "$defs") and not in_properties)
            for k, v in node.items()
            if in_properties or not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


FAIL: Any = object()


def loads_or_fail(text: str) -> Any:
    if not text:
        return FAIL
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return FAIL


def _json_data(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return TypeAdapter(type(value)).dump_python(value, mode="json", by_alias=True)


_PROTOCOLS: dict[str, Protocol] = {"python": PythonProtocol(), "json": JsonProtocol()}


def get_protocol(name: str | Protocol) -> Protocol:
    if isinstance(name, Protocol):
        return name
    try:
        return _PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; use 'python' or 'json'") from None


# -- the built-in worked example -----------------------------------------------------------------
@lru_cache(maxsize=1)
def default_example() -> tuple[str, Any, Schema]:
    """The worked example shown when a query has no examples of its own.

    It shows nesting (a class inside a list inside a class), a description comment and a
    number, which together cover most of what a model needs to write a valid answer.
    """

    class Fruit(BaseModel):
        name: str
        count: int = Field(description="How many of this fruit are mentioned.")

    class Basket(BaseModel):
        """The fruits mentioned in the text."""

        items: list[Fruit]

    value = Basket(items=[Fruit(name="apple", count=1), Fruit(name="banana", count=2)])
    return "Which fruits are in 'an apple and two bananas'?", value, Schema.of(Basket)
