"""Core trace records (events or a saved trace) → the flat node dicts the views show.

The one place that knows the core's node shape: the live explorer, the static HTML fallback
and ``Session`` display all read nodes through :func:`normalize_node` / :func:`load_trace_nodes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .bridge import to_jsonable

__all__ = ["load_trace_nodes", "normalize_node"]

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
