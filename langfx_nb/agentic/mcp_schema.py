"""The JSON schema of an MCP tool: checked when the tool is listed, applied within a time bound.

A server's ``inputSchema`` is input from outside: it may be hostile or broken. What a caller
may rely on:

- ``check_schema(schema)`` raises ``ValueError`` with a short reason, when the tools are
  listed, for every schema that would otherwise fail only when the tool is called: one that is
  not an object schema (``"type": "object"``, as MCP requires), one the JSON-schema metaschema
  rejects, a pattern that does not compile, a ``$ref`` that is not a local JSON pointer
  (``#`` or ``#/...``: remote references are never fetched) or points nowhere, a nested
  ``$id`` (it would change what a local pointer means), and a chain of references that loops
  without descending into the arguments (``{"$ref": "#"}``: validating it would recurse
  forever).
- ``ArgsValidator(schema).errors(args)`` returns the schema's errors for ``args``. Regular
  expressions (``pattern``, ``patternProperties``, and ``additionalProperties`` beside them)
  run with the ``regex`` package under one time budget per call, ``PATTERN_BUDGET`` seconds
  (Python's own ``re`` cannot be stopped and holds the GIL, so neither a thread nor a
  timeout around it keeps the event loop free): past the budget, ``SlowPatternError``. A
  catastrophic pattern (``^(a|a)*$``) thus blocks the loop for at most about the budget.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

__all__ = ["PATTERN_BUDGET", "ArgsValidator", "SlowPatternError", "check_schema"]

PATTERN_BUDGET = 0.1
"""Seconds all regular expressions of one validation may take together."""

_IN_PLACE = ("allOf", "anyOf", "oneOf")  # lists of subschemas applied to the same value
_IN_PLACE_ONE = ("not", "if", "then", "else")
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("lf_mcp_pattern_deadline")


class SlowPatternError(Exception):
    """A pattern in the schema took longer than the validation's time budget."""


def check_schema(schema: Any) -> None:
    """Raise ``ValueError`` naming the problem if ``schema`` cannot be used (see module)."""
    import jsonschema
    import regex

    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        shown = schema.get("type") if isinstance(schema, Mapping) else type(schema).__name__
        raise ValueError(f"its inputSchema is not an object schema (type {shown!r})")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"its inputSchema is invalid: {_short(exc.message)}") from None
    except RecursionError:
        raise ValueError("its inputSchema is nested too deeply") from None
    nodes, refs, in_place = _walk(schema)
    for at, ref in refs:
        if ref != "#" and not ref.startswith("#/"):
            raise ValueError(
                f"its inputSchema has a $ref that is not a local JSON pointer: {_short(ref)!r}"
            )
        target = _pointer(ref)
        if target not in nodes:
            raise ValueError(f"its inputSchema has a $ref that points nowhere: {_short(ref)!r}")
        in_place.setdefault(at, []).append(target)
    for text in _patterns(schema):
        try:
            regex.compile(text)
        except (regex.error, TypeError) as exc:
            raise ValueError(f"its inputSchema has a bad pattern {_short(text)!r}: {exc}") from None
    loop = _cycle(in_place)
    if loop is not None:
        raise ValueError(
            f"its inputSchema refers to itself without descending ($ref loop at {loop or '#'!r})"
        )


class ArgsValidator:
    """A JSON-schema validator whose regular expressions run under a time budget."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        import jsonschema

        base = jsonschema.validators.validator_for(schema)
        cls = jsonschema.validators.extend(
            base,
            {
                "pattern": _pattern,
                "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties,
            },
        )
        self._validator = cls(schema)

    def errors(self, args: Mapping[str, Any], limit: int = 20) -> list[Any]:
        """Up to ``limit`` validation errors; ``SlowPatternError`` past ``PATTERN_BUDGET``."""
        token = _deadline.set(time.monotonic() + PATTERN_BUDGET)
        try:
            found: list[Any] = []
            for error in self._validator.iter_errors(dict(args)):
                found.append(error)
                if len(found) >= limit:
                    break
            return found
        finally:
            _deadline.reset(token)


def _search(pattern: str, text: str) -> bool:
    import regex

    remaining = _deadline.get(time.monotonic() + PATTERN_BUDGET) - time.monotonic()
    if remaining <= 0:
        raise SlowPatternError(pattern)
    try:
        return regex.search(pattern, text, timeout=remaining) is not None
    except TimeoutError:
        raise SlowPatternError(pattern) from None


# jsonschema's own keyword functions, with ``_search`` in place of ``re.search``.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = sorted(
        (k for k in instance if k not in named and not any(_search(p, k) for p in patterns)),
        key=str,
    )
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        shown = ", ".join(repr(k) for k in extras)
        if patterns:
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{shown} do not match any of the regexes: {regexes}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")


def _walk(schema: Any) -> tuple[set[str], list[tuple[str, str]], dict[str, list[str]]]:
    """Every node's JSON pointer, the ``$ref``s (where, what), and the in-place edges."""
    nodes: set[str] = set()
    refs: list[tuple[str, str]] = []
    edges: dict[str, list[str]] = {}
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        at, node = stack.pop()
        nodes.add(at)
        if isinstance(node, list):
            stack.extend((f"{at}/{i}", item) for i, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        if isinstance(node.get("$ref"), str):
            refs.append((at, node["$ref"]))
        if isinstance(node.get("$dynamicRef"), str):
            raise ValueError("its inputSchema uses $dynamicRef (not supported)")
        if at and isinstance(node.get("$id"), str):
            raise ValueError("its inputSchema has a nested $id (not supported)")
        for key in _IN_PLACE:
            if isinstance(node.get(key), list):
                edges.setdefault(at, []).extend(f"{at}/{key}/{i}" for i in range(len(node[key])))
        for key in _IN_PLACE_ONE:
            if isinstance(node.get(key), Mapping):
                edges.setdefault(at, []).append(f"{at}/{key}")
        for key in ("dependentSchemas", "dependencies"):
            if isinstance(node.get(key), Mapping):
                edges.setdefault(at, []).extend(
                    f"{at}/{key}/{_escape(k)}"
                    for k, v in node[key].items()
                    if isinstance(v, Mapping)
                )
        stack.extend(
            (f"{at}/{_escape(str(k))}", v) for k, v in node.items() if k not in _DATA_KEYWORDS
        )
    return nodes, refs, edges


def _patterns(schema: Any) -> Iterator[Any]:
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, Mapping):
            if isinstance(node.get("pattern"), str):
                yield node["pattern"]
            if isinstance(node.get("patternProperties"), Mapping):
                yield from node["patternProperties"]
            stack.extend(v for k, v in node.items() if k not in _DATA_KEYWORDS)


def _cycle(edges: Mapping[str, list[str]]) -> str | None:
    """A node on a cycle of in-place edges, or None (iterative depth-first search)."""
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        path: set[str] = {start}
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges.get(start, ())))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.discard(node)
                done.add(node)
            elif child in path:
                return child
            elif child not in done:
                path.add(child)
                stack.append((child, iter(edges.get(child, ()))))
    return None


def _pointer(ref: str) -> str:
    """The node path a local ``$ref`` names ("#/a~1b" → "/a~1b", kept escaped as ``_walk``)."""
    return unquote(ref[1:])


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _short(text: str) -> str:
    return text if len(text) <= 120 else text[:120] + "…"
