"""Static HTML/text fallbacks, so saved notebooks and nbconvert HTML show the final state.

Everything a model or a tool produced is untrusted: it is HTML-escaped here and only ever shown
as text. The ``text/plain`` forms are deterministic (counts and names, no ids, addresses or
timings) because nbval compares them. Durations in HTML sit in ``<span class="lfx-dur">`` so a
notebook test can sanitize them with one regex.
"""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..jsonable import walk
from .trace_data import load_trace_nodes

__all__ = [
    "WidgetDisplayMixin",
    "message_html",
    "message_text",
    "register_formatters",
    "rollups",
    "session_html",
    "stream_html",
    "stream_text",
    "trace_html",
    "trace_text",
    "value_html",
    "value_text",
]

MAX_ROWS = 300  # a static page is not the place for 10,000 rows; the live widget is
MAX_ROLLUP_NODES = 3000  # above this the static fallback shows each node's own tokens/cost
MAX_TEXT = 4000

_CSS = (
    "<style>.lfx-fb{font:12px/1.45 var(--jp-code-font-family,monospace);"
    "color:var(--jp-ui-font-color1,inherit)}"
    ".lfx-fb ul,.jp-RenderedHTMLCommon .lfx-fb ul{list-style:none;margin:0;padding-left:1.1em}"
    ".lfx-fb li,.jp-RenderedHTMLCommon .lfx-fb li{list-style:none;margin:0}"
    ".lfx-fb .lfx-k{color:var(--jp-ui-font-color2,#666)}"
    ".lfx-fb .lfx-st-failed,.lfx-fb .lfx-st-denied,.lfx-fb .lfx-st-timed_out,"
    ".lfx-fb .lfx-st-parsing_failed,.lfx-fb .lfx-st-generation_failed"
    "{color:color-mix(in srgb,var(--jp-error-color1,#b00) 75%,var(--jp-ui-font-color0,#000))}"
    ".lfx-fb .lfx-st-ok,.lfx-fb .lfx-st-complete,.lfx-fb .lfx-st-done"
    "{color:color-mix(in srgb,var(--jp-success-color1,#070) 75%,var(--jp-ui-font-color0,#000))}"
    ".lfx-fb pre{white-space:pre-wrap;margin:2px 0}</style>"
)
_UL = '<ul style="list-style:none">'  # inline too: a notebook's own list CSS must not add bullets


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


# -- values -------------------------------------------------------------------------------------


def value_html(value: Any, *, depth: int = 0) -> str:
    """A typed result (pydantic model, dataclass, dict, list, scalar) as a readable tree."""
    name = type(value).__name__
    if hasattr(value, "model_dump") or (hasattr(value, "__dataclass_fields__")):
        data = walk(value)
        inner = value_html(data, depth=depth + 1) if isinstance(data, dict) else _esc(data)
        body = f'<span class="lfx-k">{_esc(name)}</span>{inner}'
    elif isinstance(value, Mapping):
        items = "".join(
            f'<li><span class="lfx-k">{_esc(k)}:</span> {value_html(v, depth=depth + 1)}</li>'
            for k, v in value.items()
        )
        body = f"{_UL}{items}</ul>" if items else "{}"
    elif isinstance(value, list | tuple):
        items = "".join(
            f'<li><span class="lfx-k">-</span> {value_html(v, depth=depth + 1)}</li>' for v in value
        )
        body = f"{_UL}{items}</ul>" if items else "[]"
    elif isinstance(value, str):
        body = f"<pre>{_esc(_clip(value))}</pre>" if "\n" in value else _esc(_clip(value))
    else:
        body = _esc(_clip(repr(value)))
    return body if depth else f'{_CSS}<div class="lfx-fb">{body}</div>'


def value_text(value: Any) -> str:
    data = walk(value)
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
    prefix = f"{type(value).__name__} " if hasattr(value, "model_dump") else ""
    return prefix + _clip(text)


# -- messages -----------------------------------------------------------------------------------


def message_html(message: Any) -> str:
    """A Message: role, text (escaped, never interpreted), tool calls, parsed result, usage."""
    parts = [f'<div class="lfx-k">{_esc(type(message).__name__)}</div>']
    for turn in getattr(message, "messages", None) or [message]:
        if turn is not message:
            parts.append(f'<div class="lfx-k">{_esc(type(turn).__name__)}</div>')
        text = getattr(turn, "text", "")
        if text:
            parts.append(f"<pre>{_esc(_clip(text))}</pre>")
        for call in getattr(turn, "tool_calls", None) or ():
            args = json.dumps(walk(getattr(call, "args", {})), ensure_ascii=False)
            parts.append(
                f"<div>tool call <b>{_esc(call.name)}</b> "
                f'<span class="lfx-k">{_esc(call.id)}</span> <code>{_esc(_clip(args))}</code></div>'
            )
    result = getattr(message, "result", None)
    if result is not None:
        parts.append(f"<div>result: {value_html(result, depth=1)}</div>")
    usage = getattr(message, "usage", None)
    if usage is not None and any(v is not None for v in walk(usage).values()):
        parts.append(f'<div class="lfx-k">usage: {_esc(_usage_str(walk(usage)))}</div>')
    return f'{_CSS}<div class="lfx-fb">{"".join(parts)}</div>'


def message_text(message: Any) -> str:
    return repr(message)


def _usage_str(usage: Mapping[str, Any]) -> str:
    return ", ".join(f"{k.replace('_tokens', '')} {v}" for k, v in usage.items() if v is not None)


# -- traces -------------------------------------------------------------------------------------


def _tokens(node: Mapping[str, Any]) -> int:
    usage = node.get("usage")
    if not isinstance(usage, Mapping):
        return 0
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    return sum(
        v
        for k, v in usage.items()
        if k in ("prompt_tokens", "completion_tokens") and isinstance(v, int)
    )


def _cost(node: Mapping[str, Any]) -> float:
    cost = node.get("cost")
    if isinstance(cost, int | float):
        return float(cost)
    usage = node.get("usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("cost"), int | float):
        return float(usage["cost"])
    return 0.0


def rollups(nodes: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, float]]:
    """Tokens and cost per node including its descendants (the same sums the live view shows).

    One iterative post-order pass: O(nodes), whatever the depth.
    """
    ids = {str(n["id"]) for n in nodes}
    kids: dict[str, list[str]] = {}
    roots: list[str] = []
    own: dict[str, tuple[int, float]] = {}
    for n in nodes:
        node_id, parent = str(n["id"]), n.get("parent")
        own[node_id] = (_tokens(n), _cost(n))
        if parent is not None and str(parent) in ids and str(parent) != node_id:
            kids.setdefault(str(parent), []).append(node_id)
        else:
            roots.append(node_id)
    position = {node_id: i for i, node_id in enumerate(own)}
    if all(position[k] > position[p] for p, ks in kids.items() for k in ks):
        # the usual case (every child listed after its parent): one reverse pass
        totals = dict(own)
        parent_of = {k: p for p, ks in kids.items() for k in ks}
        for node_id in reversed(list(own)):
            parent = parent_of.get(node_id)
            if parent is not None:
                pt, pc = totals[parent]
                nt, nc = totals[node_id]
                totals[parent] = (pt + nt, pc + nc)
        return totals
    out: dict[str, tuple[int, float]] = {}
    stack: list[tuple[str, bool]] = [(r, False) for r in roots]
    while stack:
        node_id, done = stack.pop()
        if node_id in out:
            continue
        if not done:
            stack.append((node_id, True))
            stack.extend((k, False) for k in kids.get(node_id, ()) if k not in out)
            continue
        tok, cost = own[node_id]
        for k in kids.get(node_id, ()):
            kt, kc = out.get(k, (0, 0.0))
            tok, cost = tok + kt, cost + kc
        out[node_id] = (tok, cost)
    for node_id in own:  # nodes on a parent cycle: their own values
        out.setdefault(node_id, own[node_id])
    return out


def _own_values(nodes: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, float]]:
    return {str(n["id"]): (_tokens(n), _cost(n)) for n in nodes}


def _duration(node: Mapping[str, Any]) -> str:
    start, end = node.get("start"), node.get("end")
    if isinstance(start, int | float) and isinstance(end, int | float):
        ms = (end - start) * 1000
        text = f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"
        return f' <span class="lfx-dur">{text}</span>'
    return ""


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    return str(error)


def trace_html(nodes: Sequence[Mapping[str, Any]], *, title: str = "") -> str:
    """The trace as nested lists (first ``MAX_ROWS`` nodes), with status, duration and roll-ups."""
    children: dict[Any, list[Mapping[str, Any]]] = {}
    ids = {str(n["id"]) for n in nodes}
    for node in nodes:
        parent = node.get("parent")
        children.setdefault(parent if parent in ids else None, []).append(node)
    # Roll-ups over a huge trace would make every display slower; the live view has them.
    sums = rollups(nodes) if len(nodes) <= MAX_ROLLUP_NODES else _own_values(nodes)
    shown = 0

    def row(node: Mapping[str, Any]) -> str:
        nonlocal shown
        shown += 1
        status = str(node.get("status", ""))
        tok, cost = sums.get(str(node["id"]), (0, 0.0))
        extra = f" · {tok} tok" if tok else ""
        extra += f" · ${cost:.4f}" if cost else ""
        err = node.get("error")
        err_html = (
            f'<div class="lfx-st-failed">{_esc(_clip(_error_text(err), 500))}</div>' if err else ""
        )
        kids = children.get(str(node["id"]), [])
        inner = ""
        if kids and shown < MAX_ROWS:
            inner = _UL + "".join(row(k) for k in kids if shown < MAX_ROWS) + "</ul>"
        return (
            f'<li><span class="lfx-k">{_esc(node.get("kind", ""))}</span> '
            f"<b>{_esc(_clip(str(node.get('name', '')), 200))}</b> "
            f'<span class="lfx-st-{_esc(status)}">{_esc(status)}</span>'
            f"{_duration(node)}{_esc(extra)}{err_html}{inner}</li>"
        )

    body = "".join(row(n) for n in children.get(None, []) if shown < MAX_ROWS)
    more = (
        f"<div>… {len(nodes) - shown} more nodes (open the live explorer)</div>"
        if shown < len(nodes)
        else ""
    )
    head = f"<b>{_esc(title)}</b> " if title else ""
    summary = _esc(trace_text(nodes))
    head += f'<div class="lfx-k">{summary}</div>'
    return f'{_CSS}<div class="lfx-fb">{head}{_UL}{body}</ul>{more}</div>'


def trace_text(nodes: Iterable[Mapping[str, Any]], *, title: str = "") -> str:
    counts: dict[str, int] = {}
    total = 0
    for node in nodes:
        total += 1
        status = str(node.get("status", ""))
        counts[status] = counts.get(status, 0) + 1
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    name = f"TraceExplorer {title!r}" if title else "TraceExplorer"
    return f"{name}: {total} nodes" + (f" ({detail})" if detail else "")


# -- streams ------------------------------------------------------------------------------------


def _stream_title(state: Mapping[str, Any]) -> str:
    return str(state.get("title") or "Answer")


def stream_html(state: Mapping[str, Any]) -> str:
    status = str(state.get("status", "idle"))
    parts = [
        f'<div class="lfx-k">{_esc(_stream_title(state))} · '
        f'<span class="lfx-st-{_esc(status)}">{_esc(status)}</span></div>'
    ]
    if state.get("mode") == "text":
        parts.append(f"<pre>{_esc(_clip(str(state.get('text', '')), 20_000))}</pre>")
    elif state.get("value") is not None:
        parts.append(value_html(state.get("value"), depth=1))
    missing = state.get("missing") or []
    if missing:
        names = ", ".join(".".join(map(str, json.loads(k))) for k in missing)
        parts.append(f'<div class="lfx-st-failed">missing required: {_esc(names)}</div>')
    if state.get("error"):
        parts.append(f'<div class="lfx-st-failed">{_esc(_clip(str(state["error"]), 2000))}</div>')
    return f'{_CSS}<div class="lfx-fb">{"".join(parts)}</div>'


def stream_text(state: Mapping[str, Any]) -> str:
    status = str(state.get("status", "idle"))
    title = _stream_title(state)
    if state.get("mode") == "text":
        return f"{title}[{status}]: {_clip(str(state.get('text', '')), 2000)}"
    value = json.dumps(state.get("value"), ensure_ascii=False, sort_keys=True)
    return f"{title}[{status}]: {_clip(value, 2000)}"


# -- sessions and rich display ------------------------------------------------------------------


def session_html(session: Any) -> str:
    data = session.trace_json()
    if isinstance(data, str):
        data = json.loads(data)
    return trace_html(load_trace_nodes(data), title=type(session).__name__)


def register_formatters(ipython: Any) -> None:
    """Rich display for Message, pydantic models (typed results) and Session."""
    from ..messages import Message

    html_fmt = ipython.display_formatter.formatters["text/html"]
    html_fmt.for_type(Message, message_html)
    try:
        from pydantic import BaseModel

        html_fmt.for_type(BaseModel, value_html)
    except ImportError:  # pragma: no cover - pydantic is a core dependency
        pass
    try:
        from ..agentic.session import Session

        html_fmt.for_type(Session, session_html)
    except ImportError:
        pass


class WidgetDisplayMixin:
    """Adds a text/html fallback and a deterministic text/plain to an anywidget bundle, and
    refreshes the displayed fallback in place when a run ends (``update_display``)."""

    _display_handles: list[Any]

    def _fallback_html(self) -> str:
        raise NotImplementedError

    def _fallback_text(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {})
        data["text/plain"] = self._fallback_text()
        data["text/html"] = self._fallback_html()
        return (data, meta) if isinstance(bundle, tuple) else data

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, None)
        handle = display(data, metadata=meta, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        if handle is not None:
            if not hasattr(self, "_display_handles"):
                self._display_handles = []
            self._display_handles.append(handle)

    def _refresh_displays(self) -> None:
        handles = getattr(self, "_display_handles", None)
        if not handles:
            return
        bundle = self._repr_mimebundle_()
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, None)
        for handle in handles:
            with contextlib.suppress(Exception):  # a closed frontend must not break the run
                handle.update(data, metadata=meta, raw=True)
