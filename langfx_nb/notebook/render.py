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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
# Inline as well as in _CSS: GitHub and nbviewer drop the <style>, and the copy must still have
# no bullets and the same indentation there.
_UL = '<ul style="list-style:none;margin:0;padding-left:1.1em">'


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


def _tree_html(
    nodes: Sequence[Mapping[str, Any]],
    row: Callable[[Mapping[str, Any], str], str],
    *,
    ul: str,
) -> tuple[str, int]:
    """The first ``MAX_ROWS`` nodes in tree order, each ``row(node, children_list_html)``; a node
    whose parent is not in the trace is a root. Returns the roots' html and the rows shown."""
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    ids = {str(n["id"]) for n in nodes}
    for node in nodes:
        parent = str(node.get("parent"))
        children.setdefault(parent if parent in ids else None, []).append(node)
    shown = 0

    def visit(node: Mapping[str, Any]) -> str:
        nonlocal shown
        shown += 1
        kids = children.get(str(node["id"]), [])
        inner = ""
        if kids and shown < MAX_ROWS:
            inner = ul + "".join(visit(k) for k in kids if shown < MAX_ROWS) + "</ul>"
        return row(node, inner)

    body = "".join(visit(n) for n in children.get(None, []) if shown < MAX_ROWS)
    return body, shown


def trace_html(nodes: Sequence[Mapping[str, Any]], *, title: str = "") -> str:
    """The trace as nested lists (first ``MAX_ROWS`` nodes), with status, duration and roll-ups."""
    # Roll-ups over a huge trace would make every display slower; the live view has them.
    sums = rollups(nodes) if len(nodes) <= MAX_ROLLUP_NODES else _own_values(nodes)

    def row(node: Mapping[str, Any], inner: str) -> str:
        status = str(node.get("status", ""))
        tok, cost = sums.get(str(node["id"]), (0, 0.0))
        extra = f" · {tok} tok" if tok else ""
        extra += f" · ${cost:.4f}" if cost else ""
        err = node.get("error")
        err_html = (
            f'<div class="lfx-st-failed">{_esc(_clip(_error_text(err), 500))}</div>' if err else ""
        )
        return (
            f'<li><span class="lfx-k">{_esc(node.get("kind", ""))}</span> '
            f"<b>{_esc(_clip(str(node.get('name', '')), 200))}</b> "
            f'<span class="lfx-st-{_esc(status)}">{_esc(status)}</span>'
            f"{_duration(node)}{_esc(extra)}{err_html}{inner}</li>"
        )

    body, shown = _tree_html(nodes, row, ul=_UL)
    more = (
        f"<div>… {len(nodes) - shown} more nodes (open the live explorer)</div>"
        if shown < len(nodes)
        else ""
    )
    head = f"<b>{_esc(title)}</b> " if title else ""
    summary = _esc(trace_text(nodes))
    head += f'<div class="lfx-k">{summary}</div>'
    return f'{_CSS}<div class="lfx-fb">{head}{_UL}{body}</ul>{more}</div>'


BAD_STATUSES = ("failed", "denied", "cancelled", "timed_out")
WAITING = "waiting for approval"


def problems_below(nodes: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per node: how many descendants ended failed / denied / cancelled / timed out, so a
    parent that itself ended "ok" can say what went wrong beneath it."""
    parent_of = {str(n["id"]): n.get("parent") for n in nodes}
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        status = str(node.get("status", ""))
        if status not in BAD_STATUSES:
            continue
        seen: set[str] = {str(node["id"])}
        cur = parent_of.get(str(node["id"]))
        while cur is not None and str(cur) in parent_of and str(cur) not in seen:
            seen.add(str(cur))
            counts = out.setdefault(str(cur), {})
            counts[status] = counts.get(status, 0) + 1
            cur = parent_of.get(str(cur))
    return out


def _below_text(counts: Mapping[str, int] | None) -> str:
    if not counts:
        return ""
    return ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(counts.items())) + " below"


def _local_time(at: Any, offset: float | None) -> str:
    """A trace time (seconds on the session's clock) as a local wall-clock time."""
    import datetime as dt

    if isinstance(at, str):
        try:
            when = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            return at
        return when.astimezone().strftime("%H:%M:%S")
    if isinstance(at, int | float) and offset is not None:
        return dt.datetime.fromtimestamp(at + offset).astimezone().strftime("%H:%M:%S")
    return ""


def arg_changes(proposed: Any, ran: Any) -> list[str]:
    """What an edit changed: ``a: 2 → 20`` per key (added / removed keys too)."""
    if not isinstance(proposed, Mapping) or not isinstance(ran, Mapping):
        return [] if proposed == ran else [f"{_short(proposed)} → {_short(ran)}"]
    out = []
    for key in list(proposed) + [k for k in ran if k not in proposed]:
        before = _short(proposed[key]) if key in proposed else "∅"
        after = _short(ran[key]) if key in ran else "∅"
        if before != after:
            out.append(f"{key}: {before} → {after}")
    return out


def _short(value: Any) -> str:
    return _clip(json.dumps(value, ensure_ascii=False, default=str), 200)


def node_detail_rows(node: Mapping[str, Any], offset: float | None) -> list[tuple[str, Any]]:
    """(label, value) pairs describing one node, in reading order: shared by the static copy;
    the live view shows the same labels."""
    rows: list[tuple[str, Any]] = []
    if node.get("error"):
        rows.append(("Error", _error_text(node["error"])))
    inputs = node.get("inputs")
    decision = node.get("decision") if isinstance(node.get("decision"), Mapping) else None
    proposed = inputs.get("args") if isinstance(inputs, Mapping) else None
    if decision is not None and isinstance(decision.get("args"), Mapping):
        rows.append(("Arguments that ran (edited)", decision["args"]))
        rows.append(("Model's proposal", proposed))
        rows.append(("Changed", arg_changes(proposed, decision["args"])))
    elif proposed is not None:
        rows.append(("Arguments", proposed))
    if isinstance(inputs, Mapping):
        rest = {k: v for k, v in inputs.items() if k != "args"}
        if rest:
            rows.append(("Inputs", rest))
    elif inputs is not None:
        rows.append(("Inputs", inputs))
    if node.get("outputs") is not None:
        rows.append(("Output", node["outputs"]))
    if decision is not None:
        shown = {k: v for k, v in decision.items() if k not in ("args", "at")}
        when = _local_time(decision.get("at"), offset)
        if when:
            shown["at"] = when
        rows.append(("Policy decision", shown))
    timing = node_timing(node)
    if timing:
        rows.append(("Time", timing))
    if node.get("usage"):
        rows.append(("Usage", node["usage"]))
    return rows


def node_timing(node: Mapping[str, Any]) -> dict[str, str]:
    """Wall time of a node split into human wait (approval) and the rest."""
    start, end = node.get("start"), node.get("end")
    if not isinstance(start, int | float) or not isinstance(end, int | float):
        return {}
    total = max(0.0, end - start)
    wait = node.get("wait_s")
    if not isinstance(wait, int | float) or wait <= 0:
        return {}
    label = "tool" if node.get("kind") == "tool_call" else "work"
    return {
        "total": f"{total:.2f} s",
        "waiting for a person": f"{wait:.2f} s",
        label: f"{max(0.0, total - wait):.2f} s",
    }


def trace_static_html(
    nodes: Sequence[Mapping[str, Any]], *, title: str = "", offset: float | None = None
) -> str:
    """The trace for a saved notebook: the tree (first ``MAX_ROWS`` nodes), each node with its
    status, what went wrong below it, and its details in a ``<details>`` element."""
    below = problems_below(nodes) if len(nodes) <= MAX_ROLLUP_NODES else {}

    def row(node: Mapping[str, Any], inner: str) -> str:
        node_id = str(node["id"])
        status = str(node.get("status", ""))
        extra = _below_text(below.get(node_id))
        detail = "".join(
            f'<div><span class="lfx-k">{_esc(label)}:</span> '
            f"{value_html(value, depth=1) if not isinstance(value, str) else _esc(_clip(value))}"
            "</div>"
            for label, value in node_detail_rows(node, offset)
        )
        details = f'<details class="lfx-nd"><summary>details</summary>{detail}</details>'
        return (
            f'<li data-node="{_esc(node_id)}" data-kind="{_esc(node.get("kind", ""))}">'
            f'<span class="lfx-k">{_esc(node.get("kind", ""))}'
            f"</span> <b>{_esc(_clip(str(node.get('name', '')), 200))}</b> "
            f'<span class="lfx-st-{_esc(status.replace(" ", "_"))}">{_esc(status)}</span>'
            f"{_duration(node)}"
            + (f' <span class="lfx-st-failed">({_esc(extra)})</span>' if extra else "")
            + f"{details if detail else ''}{inner}</li>"
        )

    body, shown = _tree_html(nodes, row, ul=_UL)
    more = f"<div>… {len(nodes) - shown} more nodes</div>" if shown < len(nodes) else ""
    head = f"<b>{_esc(title)}</b> " if title else ""
    head += f'<div class="lfx-k">{_esc(trace_text(nodes))}</div>'
    return f'{_CSS}<div class="lfx-fb lfx-trace-static">{head}{_UL}{body}</ul>{more}</div>'


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


# In JupyterLab a saved widget output names a model that no longer exists once the kernel is
# gone ("Error displaying widget: model not found"), and JupyterLab always prefers the widget
# view over the text/html in the same output. So every widget is displayed as two outputs: the
# live view, and a static copy (this HTML, refreshed when the run ends). The rules below show
# exactly one of them: while a live view is on the page (`.lfx` is the views' root class) the
# copy is hidden; a widget output whose view has not drawn (kernel gone, notebook reopened,
# widget manager still loading: no `lfx-live-child` mark, which the views put on their output
# when they draw and which is never saved) is hidden next to a copy. nbconvert and GitHub show
# the copy (the widget output there falls back to a one-line note with a mime type).
# (`:has()` cannot nest, hence the class mark instead of `:not(:has(.lfx))`.)
STATIC_CSS = (
    "<style>"
    ".jp-OutputArea:has(.lfx) > .jp-OutputArea-child:has(.lfx-static){display:none}"
    ".jp-OutputArea:has(.lfx-static) > .jp-OutputArea-child:not(.lfx-live-child)"
    ":has(> .jp-OutputArea-output:not([data-mime-type])){display:none}"
    ".lfx-static ul{list-style:none!important;margin:0!important;padding-left:1.1em!important}"
    ".lfx-static details.lfx-nd>summary{cursor:pointer;color:#666}"
    ".lfx-static .lfx-closed{color:#8a5a00}"
    "</style>"
)


class WidgetDisplayMixin:
    """Displays an anywidget as a live view plus a static copy that outlives the kernel.

    ``display(widget)`` emits two outputs with display ids: the widget view (its text/html is a
    one-line summary for viewers without widgets) and ``_static_html()`` wrapped with
    ``STATIC_CSS``. ``_refresh_displays()`` (called when a run ends or a prompt closes) updates
    both in place, so a saved notebook holds the final state as plain HTML."""

    _display_handles: list[Any]
    _static_handles: list[Any]

    def _fallback_html(self) -> str:
        raise NotImplementedError

    def _fallback_text(self) -> str:
        raise NotImplementedError

    def _static_html(self) -> str:
        """The final state as self-contained HTML (defaults to the fallback)."""
        return self._fallback_html()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {})
        data["text/plain"] = self._fallback_text()
        data["text/html"] = self._fallback_html()
        return (data, meta) if isinstance(bundle, tuple) else data

    def _live_bundle(self) -> tuple[dict[str, Any], Any]:
        bundle = self._repr_mimebundle_()
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, None)
        data = dict(data)
        name = _esc(type(self).__name__)
        data["text/html"] = f"<div>{name}: live view (needs its kernel); static copy below</div>"
        return data, meta

    def _static_bundle(self) -> dict[str, Any]:
        return {"text/html": f'{STATIC_CSS}<div class="lfx-static">{self._static_html()}</div>'}

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        data, meta = self._live_bundle()
        handle = display(data, metadata=meta, raw=True, display_id=True)  # type: ignore[no-untyped-call]
        static = display(self._static_bundle(), raw=True, display_id=True)  # type: ignore[no-untyped-call]
        if handle is not None:
            if not hasattr(self, "_display_handles"):
                self._display_handles = []
            self._display_handles.append(handle)
        if static is not None:
            if not hasattr(self, "_static_handles"):
                self._static_handles = []
            self._static_handles.append(static)

    def _refresh_displays(self) -> None:
        """Update the static copies in place (the live views update themselves; re-sending
        their output would only make the page redraw them)."""
        statics = getattr(self, "_static_handles", None)
        if not statics:
            return
        static = self._static_bundle()
        for handle in statics:
            with contextlib.suppress(Exception):  # a closed frontend must not break the run
                handle.update(static, raw=True)


# -- evaluation reports -------------------------------------------------------------------------

MAX_EVAL_ROWS = 200  # the static copy of a report: the metrics and this many rows


def _metric_text(m: Mapping[str, Any]) -> str:
    value, low, high, n = m.get("value"), m.get("low"), m.get("high"), m.get("n", 0)
    if value is None:
        text = "—"
    elif m.get("kind") == "pass_rate":
        text = f"{value:.1%} [{(low or 0):.1%}, {(high or 0):.1%}]"
    elif m.get("se") is not None:
        text = f"{value:.4g} ± {m['se']:.2g}"
    else:
        text = f"{value:.4g}"
    errors = f", {m['errors']} errors" if m.get("errors") else ""
    return f"{text} (n={n}{errors})"


def _score_cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "pass" if value else "fail"
    return f"{float(value):.3g}"


def _delta_text(m: Mapping[str, Any]) -> str:
    delta = m.get("delta")
    if delta is None:
        return "—"
    low, high = m.get("low"), m.get("high")
    interval = "" if low is None or high is None else f" [{low:+.3g}, {high:+.3g}]"
    noise = "beyond noise" if m.get("beyond_noise") else "within noise"
    return f"{delta:+.3g}{interval}, {noise}"


def eval_text(state: Mapping[str, Any], *, title: str = "") -> str:
    """One deterministic line: trials and each metric (what nbval compares)."""
    summary = state.get("summary") or {}
    name = f"EvalReport {title!r}" if title else "EvalReport"
    if state.get("mode") == "compare":
        counts = summary.get("counts") or {}
        head = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        return f"{name} (compare): {head}"
    parts = [f"{len(state.get('rows') or ())} trials"]
    parts += [f"{m['name']} {_metric_text(m)}" for m in summary.get("metrics") or ()]
    return f"{name}: " + "; ".join(parts)


def eval_static_html(state: Mapping[str, Any], *, title: str = "") -> str:
    """The report for a saved notebook: the metrics, then the first ``MAX_EVAL_ROWS`` rows
    (a comparison: regressions first). Every value is escaped text."""
    summary = state.get("summary") or {}
    rows = list(state.get("rows") or ())
    compare = state.get("mode") == "compare"
    metrics = list(summary.get("metrics") or ())
    names = [str(m["name"]) for m in metrics]
    cell = 'style="padding:1px 8px;text-align:left;border-bottom:1px solid #8884"'
    head = f"<b>{_esc(title)}</b> " if title else ""
    head += f'<div class="lfx-k">{_esc(eval_text(state, title=title))}</div>'
    if compare:
        mrows = "".join(
            f"<tr><td {cell}>{_esc(m['name'])}</td>"
            f"<td {cell}>{_esc(_metric_text(m.get('a') or {}))}</td>"
            f"<td {cell}>{_esc(_metric_text(m.get('b') or {}))}</td>"
            f"<td {cell}>{_esc(_delta_text(m))}</td></tr>"
            for m in metrics
        )
        mhead = (
            f"<tr><th {cell}>metric</th><th {cell}>a</th><th {cell}>b</th>"
            f"<th {cell}>b − a [95% interval]</th></tr>"
        )
    else:
        mrows = "".join(
            f"<tr><td {cell}>{_esc(m['name'])}</td><td {cell}>{_esc(_metric_text(m))}</td></tr>"
            for m in metrics
        )
        mhead = f"<tr><th {cell}>metric</th><th {cell}>value [95% interval]</th></tr>"
    table = f'<table style="border-collapse:collapse">{mhead}{mrows}</table>'
    cols = ["case", "change" if compare else "status", *names, "output"]
    body = []
    for row in rows[:MAX_EVAL_ROWS]:
        if compare:
            scores = [
                f"{_score_cell(row['a'].get(n))} → {_score_cell(row['b'].get(n))}" for n in names
            ]
            values = [row["id"], row["change"], *scores, row.get("output_b", "")]
        else:
            scores = [_score_cell((row.get("scores") or {}).get(n)) for n in names]
            output = row.get("error") or row.get("output", "")
            values = [row["key"], row["status"], *scores, output]
        body.append(
            "<tr>"
            + "".join(f"<td {cell}>{_esc(_clip(str(v), 300))}</td>" for v in values)
            + "</tr>"
        )
    more = (
        f"<div>… {len(rows) - MAX_EVAL_ROWS} more rows</div>" if len(rows) > MAX_EVAL_ROWS else ""
    )
    cases = (
        '<table style="border-collapse:collapse;margin-top:6px"><tr>'
        + "".join(f"<th {cell}>{_esc(c)}</th>" for c in cols)
        + "</tr>"
        + "".join(body)
        + "</table>"
    )
    return f'{_CSS}<div class="lfx-fb lfx-eval-static">{head}{table}{cases}{more}</div>'
