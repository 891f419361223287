"""A trace as the views get it: the node JSON the core writes ("The node contract" in
docs/agentic.md) under the same names, plus ``hint`` (one line that tells same-named rows
apart) and, in window rows, ``partial`` (cut to what a row needs: the detail pane asks for
the rest); a live session's subtrees as a saved trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..agentic.trace_db import node_hint
from .bridge import to_jsonable

__all__ = ["subtrace", "view_node"]


def subtrace(session: Any, node_ids: Iterable[str]) -> dict[str, Any] | None:
    """A saved-trace dict of the subtrees of ``node_ids`` in a live ``session``, with their
    ancestors up to the session root, so the strict reader takes it like any saved trace
    (the batch view's error groups, the evaluation report's trials). ``None`` when the
    session holds none of them any more."""
    from ..agentic.trace import TRACE_FORMAT, TRACE_VERSION

    records: dict[str, dict[str, Any]] = {}
    for node in filter(None, map(session.find, map(str, node_ids))):
        chain, up = [], node.parent_id
        while up is not None and up not in records and (parent := session.find(up)) is not None:
            chain.append(parent)
            up = parent.parent_id
        records.update((n.id, n.to_json()) for n in reversed(chain))
        for n in node.walk():
            records.setdefault(n.id, n.to_json())
    if not records:
        return None
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "session": {"id": session.id, "metadata": {}},
        "nodes": to_jsonable(list(records.values())),
    }


def view_node(raw: Mapping[str, Any], *, plain: bool = False) -> dict[str, Any]:
    """A core node record (an event's node, a change set, a saved node) as the views keep it:
    the same fields under the same names, plus ``hint``. ``plain``: already JSON data (a saved
    trace), used as is; otherwise copied, so later changes to a live record do not leak in."""
    node = dict(raw) if plain else to_jsonable(dict(raw))
    hint = node_hint(node)
    if hint:
        node["hint"] = hint
    return node
