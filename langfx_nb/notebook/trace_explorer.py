"""TraceExplorer: a live (or offline) collapsible tree of a Session's trace.

Core trace events (``node_start`` / ``node_update`` / ``node_end`` / ``log``) are normalized here
into flat node patches ``{"op": "node", "id": ..., <fields>}`` that the JS merges into its store,
so the one place that knows the core's event shape is :func:`normalize_node`. The view renders
only the rows on screen, so 10,000 nodes stay smooth.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .bridge import Clock, EventBridge, MessageKind, to_jsonable
from .render import WidgetDisplayMixin, trace_html, trace_text
from .trace_data import load_trace_nodes, normalize_node

__all__ = ["TraceExplorer", "TraceReducer", "load_trace_nodes", "normalize_node"]

_STATIC = Path(__file__).parent / "static"

SUMMARY_EVENT = "_session_summary"  # synthetic: the explorer's own end-of-run totals

# What a tree row, the roll-ups and the search need. Snapshots (the state trait, a reload)
# carry only these; the detail pane asks the kernel for the rest of a node when selected.
SUMMARY_KEYS = frozenset(
    {
        "id",
        "parent",
        "kind",
        "name",
        "status",
        "start",
        "end",
        "usage",
        "cost",
        "error",
        "evicted_children",
        "hint",
    }
)


def summarize(node: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in node.items() if k in SUMMARY_KEYS}
    if len(out) < len(node):
        out["partial"] = True
    return out


class TraceReducer:
    """Cumulative trace state: nodes by id in arrival order."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.summary: dict[str, Any] | None = None  # session totals from a saved trace
        self._logs = 0

    def load(self, nodes: Iterable[dict[str, Any]]) -> None:
        """Adopt already-normalized nodes (they become the reducer's own records)."""
        for node in nodes:
            current = self.nodes.get(node["id"])
            if current is None:
                node.setdefault("parent", None)
                node.setdefault("status", "running")
                self.nodes[node["id"]] = node
            else:
                current.update(node)

    def _merge(self, patch: dict[str, Any]) -> dict[str, Any]:
        node_id = patch["id"]
        current = self.nodes.get(node_id)
        if current is None:
            self.nodes[node_id] = current = {"id": node_id, "parent": None, "status": "running"}
        current.update(patch)
        return current

    def apply(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type", "")
        if kind == SUMMARY_EVENT:  # session totals (tokens, cost), sent when a run ends
            self.summary = to_jsonable(event.get("summary"))
            return [{"op": "summary", "summary": self.summary}]
        if kind == "log":
            body = event.get("node") if isinstance(event.get("node"), Mapping) else event
            assert isinstance(body, Mapping)
            node = normalize_node(body)
            self._logs += 1
            node.setdefault("id", f"log-{self._logs}")
            node["kind"] = "log"
            node.setdefault("status", "ok")
            inputs = node.get("inputs")
            message = inputs.get("message") if isinstance(inputs, Mapping) else node.get("message")
            level = node.get("name") or node.get("level") or "log"
            node["name"] = f"{level}: {message}"[:200] if message is not None else str(level)
        elif kind == "node_update" and "changes" in event:
            changes = event.get("changes")
            if not isinstance(changes, Mapping) or event.get("node_id") is None:
                return []
            node = normalize_node({k: v for k, v in changes.items() if k != "delta"})
            if not node:
                return []  # streamed text only: shown by StreamView, not stored in the trace
            node["id"] = str(event["node_id"])
        elif kind in ("node_start", "node_update", "node_end"):
            body = event.get("node") if isinstance(event.get("node"), Mapping) else event
            assert isinstance(body, Mapping)
            node = normalize_node(body)
            if "id" not in node:
                return []
            if kind == "node_start":
                node.setdefault("status", "running")
        else:
            return []
        self._merge(dict(node))
        return [{"op": "node", **node}]

    def is_run_end(self, event: Mapping[str, Any]) -> bool:
        """A node directly under the session root (or the root itself) finished."""
        if event.get("type") != "node_end" or not isinstance(event.get("node"), Mapping):
            return False
        parent = event["node"].get("parent_id", event["node"].get("parent"))
        return parent is None or self.nodes.get(str(parent), {}).get("kind") == "session"

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodes": [summarize(n) for n in self.nodes.values()]}
        if self.summary is not None:
            out["summary"] = self.summary
        return out


def _read_trace(source: str | Path | Mapping[str, Any]) -> Any:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, Path) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        return json.loads(Path(source).read_text(encoding="utf-8"))
    return json.loads(source)


def _encode(state: Mapping[str, Any]) -> bytes:
    return json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _summary(data: Any) -> dict[str, Any] | None:
    summary = data.get("summary") if isinstance(data, Mapping) else None
    return to_jsonable(summary) if isinstance(summary, Mapping) else None


class TraceExplorer(WidgetDisplayMixin, anywidget.AnyWidget):
    """Live tree of a Session (subscribes to its events) or a saved trace (offline).

    ``source`` is a ``Session``, a trace dict, trace JSON text, or a path to a trace JSON file.
    """

    _esm = _STATIC / "trace_explorer.js"
    # The cumulative state as UTF-8 JSON bytes: ipywidgets ships bytes as one binary buffer
    # instead of walking (and re-encoding) a 10,000-node structure on every publish.
    state = traitlets.Bytes(b"").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    # What the reader chose (selection, expanded rows, filter, timeline, pane sizes): written
    # by the view, kept by the kernel and in saved widget state, so a reload restores it.
    view_state = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        source: Any = None,
        *,
        title: str = "",
        interval: float = 0.05,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        self._reducer = TraceReducer()
        initial = b""
        if source is not None and not hasattr(source, "subscribe"):
            data = _read_trace(source)
            self._reducer.load(load_trace_nodes(data))
            self._reducer.summary = _summary(data)
            initial = _encode({**self._reducer.snapshot(), "seq": 0})
        # the saved trace travels with the widget's opening message (one message, not two)
        super().__init__(title=title, state=initial or b"", **kwargs)
        self._bridge = EventBridge(
            self._send_message,
            self._reducer,
            on_state=self._set_state,
            interval=interval,
            clock=clock,
        )
        self._unsubscribe: Callable[[], Any] | None = None
        self._session: Any = None
        self.on_msg(self._on_view_message)
        if source is not None and hasattr(source, "subscribe"):
            self.watch(source)

    # -- public ---------------------------------------------------------------------------------

    def watch(self, session: Any) -> None:
        """Show ``session``'s trace so far, then follow its live events."""
        self._session = session
        trace_json = getattr(session, "trace_json", None)
        if callable(trace_json):
            data = trace_json()
            # a live session's records keep changing under us: take a copy, not references
            data = json.loads(data) if isinstance(data, str) else to_jsonable(data)
            self._reducer.load(load_trace_nodes(data))
            self._reducer.summary = _summary(data)
        self._bridge._state_dirty = True
        self._bridge.publish_state()
        handle = session.subscribe(self.push)
        if callable(handle):
            self._unsubscribe = handle
        elif hasattr(session, "unsubscribe"):
            self._unsubscribe = lambda: session.unsubscribe(self.push)

    def push(self, event: Mapping[str, Any]) -> None:
        """Feed one core event (the Session observer). Never raises into the caller."""
        try:
            self._bridge.push(event)
            if self._reducer.is_run_end(event):  # the run is over: show the truth now
                self.flush()
        except Exception:  # an observer must never break the run it watches
            pass

    def flush(self) -> None:
        """Send pending events now, publish the state and refresh the static fallback."""
        session = self._session
        if session is not None:
            with contextlib.suppress(Exception):  # totals are a nicety; never break the run
                summary = session.usage_summary.to_json()
                self._bridge.push({"type": SUMMARY_EVENT, "summary": summary})
        self._bridge.flush()
        self._refresh_displays()

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return list(self._reducer.nodes.values())

    def close(self) -> None:
        if self._unsubscribe is not None:
            try:
                self._unsubscribe()
            finally:
                self._unsubscribe = None
        super().close()

    # -- fallbacks ------------------------------------------------------------------------------

    def _fallback_html(self) -> str:
        return trace_html(self.nodes, title=self.title)

    def _fallback_text(self) -> str:
        return trace_text(self.nodes, title=self.title)

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def snapshot(self) -> dict[str, Any]:
        """The state the synced trait holds, decoded (what a reloaded page starts from)."""
        return json.loads(self.state) if self.state else {}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.state = _encode(state)

    def _send_message(self, message: dict[str, Any]) -> None:
        if self.comm is not None:
            self.send(message)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.DETAIL_REQUEST.value:
            node = self._reducer.nodes.get(str(content.get("id")))
            if node is not None:
                self._send_message(
                    {"kind": MessageKind.DETAIL.value, "id": node["id"], "node": node}
                )
            return
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.SYNC.value:
            if content.get("seq") == self._bridge.seq and self._bridge.is_current:
                return  # the view already has exactly this state (e.g. a saved trace)
            message = self._bridge.snapshot_message()
            state = message.pop("state")
            if self.comm is not None:
                self.send(message, buffers=[_encode(state)])
