"""Core trace records (events or a saved trace) → the flat node dicts the views show.

The one place that knows the core's node shape: the live explorer, the static HTML fallback
and ``Session`` display all read nodes through :func:`normalize_node` / :func:`load_trace_nodes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .bridge import to_jsonable

__all__ = ["HINT_CHARS", "load_trace_nodes", "node_hint", "normalize_node"]

HINT_CHARS = 80  # what a row can show; also bounds what 10,000 summaries add to a snapshot

# Core field names (and a few likely spellings) → the names the view uses.
_RENAME = {
    "node_id": "id",
    "parent_id": "parent",
    "started_at": "start",
    "start_time": "start",
    "ended_at": "end",
    "end_time": "end",
    "input": "inputs",
    "output": "outputs",
    "result": "outputs",
}


def normalize_node(raw: Mapping[str, Any], *, plain: bool = False) -> dict[str, Any]:
    """A core node record (from an event or a saved trace) → the view's flat node dict.

    ``plain=True``: the values are already JSON data (a saved trace), so they are not walked.
    """
    node: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("type", "children"):
            continue
        node[_RENAME.get(key, key)] = value if plain else to_jsonable(value)
    hint = node_hint(node)
    if hint:
        node["hint"] = hint
    if "id" in node:
        node["id"] = str(node["id"])
    if node.get("parent") is not None:
        node["parent"] = str(node["parent"])
    return node


def load_trace_nodes(trace: Mapping[str, Any] | list[Any]) -> list[dict[str, Any]]:
    """Flatten a saved trace (flat ``nodes`` list or nested ``children``) into view nodes.

    The trace must be JSON data (as ``Session.trace_json()`` returns or a file holds)."""
    out: list[dict[str, Any]] = []

    def walk(raw: Mapping[str, Any], parent: str | None) -> None:
        node = normalize_node(raw, plain=True)
        if "id" not in node:
            node["id"] = f"n{len(out)}"
        if parent is not None and node.get("parent") is None:
            node["parent"] = parent
        out.append(node)
        for child in raw.get("children") or ():
            if isinstance(child, Mapping):
                walk(child, node["id"])

    items: Iterable[Any]
    if isinstance(trace, list):
        items = trace
    elif isinstance(trace.get("nodes"), list):
        items = trace["nodes"]
    elif isinstance(trace.get("root"), Mapping):
        items = [trace["root"]]
    elif isinstance(trace.get("trace"), Mapping | list):
        return load_trace_nodes(trace["trace"])
    else:
        items = [trace]
    for item in items:
        if isinstance(item, Mapping):
            walk(item, None)
    return out


def _text_of(value: Any) -> str:
    """The readable text of a message preview (``{role, text}``, a list of them) or a value."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if isinstance(value.get("text"), str):
            return value["text"]
        if isinstance(value.get("turns"), list):
            return _text_of(value["turns"])
    if isinstance(value, list):
        texts = [_text_of(v) for v in value if isinstance(v, Mapping)]
        users = [_text_of(v) for v in value if isinstance(v, Mapping) and v.get("role") == "user"]
        return (users or texts or [""])[-1]
    return ""


def node_hint(node: Mapping[str, Any]) -> str:
    """One line that tells same-named rows apart: a log's message, a query's prompt (and
    vars), a tool call's arguments. ``""`` when the record has nothing to show."""
    inputs = node.get("inputs")
    if not isinstance(inputs, Mapping):
        return ""
    kind = node.get("kind")
    text = ""
    if kind == "log":
        text = str(inputs.get("message", ""))
    elif kind == "query":
        prompt = inputs.get("prompt", inputs.get("rendered_prompt"))
        text = _text_of(prompt)
        variables = inputs.get("vars")
        if isinstance(variables, Mapping) and variables:
            shown = ", ".join(f"{k}={_short(v)}" for k, v in list(variables.items())[:4])
            text = f"{shown} · {text}" if text else shown
    elif kind == "tool_call":
        args = inputs.get("args")
        if isinstance(args, Mapping):
            text = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
    text = " ".join(text.split())
    return text if len(text) <= HINT_CHARS else text[: HINT_CHARS - 1] + "…"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 30 else text[:29] + "…"
