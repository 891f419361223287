"""Tools: a name, a description, validated input and output types, and an async function.

``Tool(name, description, input, output, execute)`` takes any pydantic-validatable types
(``BaseModel`` subclasses, ``TypedDict``, dataclasses ...); the input must describe a JSON
object because models send arguments as one. ``@tool`` builds the same from a typed async
function: parameters become the input model, the return annotation the output type, the
docstring the description (and ``Args:`` lines the parameter descriptions).

Arguments are validated before the function runs; outputs are validated against the output
type and then serialized as strict JSON: NaN/infinity, sets, cycles, non-string keys and
arbitrary objects are rejected rather than silently converted.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_type_hints, overload

from ..errors import ToolExecutionError
from ..llms.base import ToolSpec
from ..messages import ToolCall, ToolMessage

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Tool", "strict_json", "tool"]

InT = TypeVar("InT")
OutT = TypeVar("OutT")

NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


class Tool(Generic[InT, OutT]):
    """A function a model may call. ``execute(args, session)`` gets the validated input."""

    def __init__(
        self,
        name: str,
        description: str,
        input: Any,
        output: Any,
        execute: Callable[[InT, Session], Awaitable[OutT]],
    ) -> None:
        from pydantic import TypeAdapter

        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise ValueError(
                f"invalid tool name {name!r}: use letters, digits, '_' or '-' (max 64), "
                "not starting with a digit or '-'"
            )
        if not callable(execute):
            raise TypeError("execute must be an async function (args, session)")
        self.name = name
        self.description = description
        self.input_type = input
        self.output_type = output
        self.execute = execute
        self._input = TypeAdapter(input)
        self._output = TypeAdapter(output)
        self._output_is_any = output is Any or output is object
        schema = self._input.json_schema()
        if schema.get("type") != "object":
            raise TypeError(f"tool {name}: the input type must describe a JSON object")
        self.spec = ToolSpec(name, description, schema)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def validate_args(self, args: Mapping[str, Any]) -> InT:
        """The validated input, or ``ToolExecutionError`` naming the tool (no side effects)."""
        from pydantic import ValidationError

        try:
            return self._input.validate_python(dict(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'args'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            raise ToolExecutionError(
                f"invalid arguments for tool {self.name}: {problems}",
                field_errors=[
                    {"loc": field_path(e["loc"]), "msg": str(e["msg"])[:500]}
                    for e in exc.errors(include_url=False, include_input=False)[:20]
                ],
            ) from exc

    def result_message(self, output: Any, call: ToolCall) -> ToolMessage[Any]:
        """The message that carries ``output`` back to the model for ``call``."""
        return ToolMessage(self.serialize_output(output), call.id, call.name)

    def serialize_output(self, value: Any) -> str:
        """Validate against the output type, then encode as strict JSON text."""
        from pydantic import ValidationError

        try:
            _precheck(value, set())
            if self._output_is_any:
                data = value
            else:
                data = self._output.dump_python(
                    self._output.validate_python(value), mode="json", round_trip=False
                )
            return strict_json(data)
        except (ValidationError, TypeError, ValueError) as exc:
            raise ToolExecutionError(
                f"tool {self.name} returned output that is not valid JSON of its output type"
            ) from exc


def strict_json(value: Any) -> str:
    """Compact JSON text, refusing anything JSON cannot represent exactly."""
    _check_json(value, set())
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _precheck(value: Any, ancestors: set[int]) -> None:
    """Before validation: refuse what pydantic would silently convert (sets, NaN, cycles)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("NaN and infinity are not JSON")
    if isinstance(value, (set, frozenset)):
        raise TypeError("a set is not JSON (its order is undefined): return a list")
    if isinstance(value, (dict, list, tuple)):
        if id(value) in ancestors:
            raise ValueError("a cycle is not JSON")
        ancestors.add(id(value))
        for v in value.values() if isinstance(value, dict) else value:
            _precheck(v, ancestors)
        ancestors.discard(id(value))


def _check_json(value: Any, ancestors: set[int]) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        if type(value) is not int and not isinstance(value, bool):
            raise TypeError(f"non-JSON integer type {type(value).__name__}")
        return
    if isinstance(value, float):
        if type(value) is not float:
            raise TypeError(f"non-JSON float type {type(value).__name__}")
        if not math.isfinite(value):
            raise ValueError("NaN and infinity are not JSON")
        return
    if type(value) not in (list, tuple, dict):
        raise TypeError(f"{type(value).__name__} is not a JSON value")
    if id(value) in ancestors:
        raise ValueError("a cycle is not JSON")
    ancestors.add(id(value))
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError("JSON object keys must be strings")
            _check_json(v, ancestors)
    else:
        for v in value:
            _check_json(v, ancestors)
    ancestors.discard(id(value))


# -- @tool ---------------------------------------------------------------------------------
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description (text before ``Args:``) and ``{param: description}`` from a docstring."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if _ARGS_HEADER.match(line):
            params: dict[str, str] = {}
            current: str | None = None
            indent: int | None = None
            for raw in lines[i + 1 :]:
                if not raw.strip():
                    continue
                width = len(raw) - len(raw.lstrip())
                if indent is None:
                    indent = width
                if width < indent:
                    break
                m = _ARG_LINE.match(raw)
                if width == indent and m:
                    current = m.group(1)
                    params[current] = m.group(2).strip()
                elif current is not None:
                    params[current] = f"{params[current]} {raw.strip()}".strip()
            return "\n".join(lines[:i]).strip(), params
    return doc.strip(), {}


def _tool_from_function(
    fn: Callable[..., Awaitable[Any]], name: str | None, description: str | None
) -> Tool[Any, Any]:
    from pydantic import Field, create_model

    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@tool needs an async function; {fn!r} is not one")
    doc_description, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    wants_session = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {fn.__name__}: *args/**kwargs cannot be described to a model")
        if param.name == "session":
            wants_session = True
            continue
        if param.name not in hints:
            raise TypeError(f"@tool {fn.__name__}: parameter {param.name!r} needs a type hint")
        default = ... if param.default is param.empty else param.default
        doc = param_docs.get(param.name)
        fields[param.name] = (
            hints[param.name],
            Field(default, description=doc) if doc else default,
        )
    tool_name = name or fn.__name__
    input_model = create_model(f"{tool_name}_input", **fields)
    output = hints.get("return", Any)
    keys = tuple(fields)

    async def execute(args: Any, session: Session) -> Any:
        kwargs = {k: getattr(args, k) for k in keys}
        if wants_session:
            kwargs["session"] = session
        return await fn(**kwargs)

    made: Tool[Any, Any] = Tool(
        tool_name, description or doc_description, input_model, output, execute
    )
    made.__wrapped__ = fn  # type: ignore[attr-defined]
    return made


@overload
def tool(fn: Callable[..., Awaitable[Any]], /) -> Tool[Any, Any]: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Awaitable[Any]]], Tool[Any, Any]]: ...


def tool(
    fn: Callable[..., Awaitable[Any]] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool[Any, Any] | Callable[[Callable[..., Awaitable[Any]]], Tool[Any, Any]]:
    """Make a ``Tool`` from a typed async function: ``@lf.tool`` or ``@lf.tool(name=...)``.

    A parameter named ``session`` is not shown to the model; it receives the tool call's
    session view (for traced queries or logs inside the tool).
    """
    if fn is not None:
        return _tool_from_function(fn, name, description)

    def decorate(f: Callable[..., Awaitable[Any]]) -> Tool[Any, Any]:
        return _tool_from_function(f, name, description)

    return decorate


def field_path(path: Iterable[Any]) -> list[int | str]:
    """An argument's path as ``field_errors`` gives it: list indexes as ints, names as str."""
    return [p if isinstance(p, int) else str(p) for p in path]
