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
from collections.abc import Callable, Mapping
from typing import Any

import traitlets

from ..agentic.trace_reader import LIVE
from ..agentic.usage import cost_label
from ..batch.progress import provider_lines
from ..jsonable import walk
from .trace_live import index_of
from .trace_rows import duration_ms, human_wait, row_values

__all__ = [
    "WidgetDisplayMixin",
    "batch_html",
    "batch_text",
    "message_html",
    "message_text",
    "register_formatters",
    "session_html",
    "stream_html",
    "stream_text",
    "trace_html",
    "trace_text",
    "value_html",
    "value_text",
]

MAX_ROWS = 300  # a static page is not the place for 10,000 rows; the live widget is
MAX_TEXT = 4000

CSS = (
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
# Inline as well as in CSS: GitHub and nbviewer drop the <style>, and the copy must still have
# no bullets and the same indentation there.
UL = '<ul style="list-style:none;margin:0;padding-left:1.1em">'


def counted(n: int, noun: str, *, grouped: bool = True) -> str:
    """``1 node``, ``1,200 nodes`` (``1200 nodes`` unless ``grouped``): a count with its
    noun, plural unless it is 1 (the widgets' rule: ``js/src/dom.ts`` plural)."""
    return (f"{n:,}" if grouped else str(n)) + f" {noun}{'' if n == 1 else 's'}"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


# -- values -------------------------------------------------------------------------------------


def value_html(value: Any, *, depth: int = 0) -> str:
    """A typed result (pydantic model, dataclass, dict, list, scalar) as a readable tree."""
    name = type(value).__name__
    if hasattr(value, "model_dump") or (hasattr(value, "__dataclass_fields__")):
        data = walk(value)
        inner = value_html(data, depth=depth + 1) if isinstance(data, dict) else esc(data)
        body = f'<span class="lfx-k">{esc(name)}</span>{inner}'
    elif isinstance(value, Mapping):
        items = "".join(
            f'<li><span class="lfx-k">{esc(k)}:</span> {value_html(v, depth=depth + 1)}</li>'
            for k, v in value.items()
        )
        body = f"{UL}{items}</ul>" if items else "{}"
    elif isinstance(value, list | tuple):
        items = "".join(
            f'<li><span class="lfx-k">-</span> {value_html(v, depth=depth + 1)}</li>' for v in value
        )
        body = f"{UL}{items}</ul>" if items else "[]"
    elif isinstance(value, str):
        body = f"<pre>{esc(clip(value))}</pre>" if "\n" in value else esc(clip(value))
    else:
        body = esc(clip(repr(value)))
    return body if depth else f'{CSS}<div class="lfx-fb">{body}</div>'


def value_text(value: Any) -> str:
    data = walk(value)
    text = json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)
    prefix = f"{type(value).__name__} " if hasattr(value, "model_dump") else ""
    return prefix + clip(text)


# -- messages -----------------------------------------------------------------------------------


def message_html(message: Any) -> str:
    """A Message: role, text (escaped, never interpreted), tool calls, parsed result, usage."""
    parts = [f'<div class="lfx-k">{esc(type(message).__name__)}</div>']
    for turn in getattr(message, "messages", None) or [message]:
        if turn is not message:
            parts.append(f'<div class="lfx-k">{esc(type(turn).__name__)}</div>')
        text = getattr(turn, "text", "")
        if text:
            parts.append(f"<pre>{esc(clip(text))}</pre>")
        for call in getattr(turn, "tool_calls", None) or ():
            args = json.dumps(walk(getattr(call, "args", {})), ensure_ascii=False)
            parts.append(
                f"<div>tool call <b>{esc(call.name)}</b> "
                f'<span class="lfx-k">{esc(call.id)}</span> <code>{esc(clip(args))}</code></div>'
            )
    result = getattr(message, "result", None)
    if result is not None:
        parts.append(f"<div>result: {value_html(result, depth=1)}</div>")
    usage = getattr(message, "usage", None)
    if usage is not None and any(v is not None for v in walk(usage).values()):
        parts.append(f'<div class="lfx-k">usage: {esc(_usage_str(walk(usage)))}</div>')
    return f'{CSS}<div class="lfx-fb">{"".join(parts)}</div>'


def message_text(message: Any) -> str:
    return repr(message)


def _usage_str(usage: Mapping[str, Any]) -> str:
    return ", ".join(f"{k.replace('_tokens', '')} {v}" for k, v in usage.items() if v is not None)


# -- traces -------------------------------------------------------------------------------------
# Every value a trace row shows (status label, sums, duration, what went wrong below) comes from
# ``row_values`` of a window row, which the live view matches (js/test/fixtures/trace_parity.json).


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    return str(error)


def local_time(at: Any, offset: float | None) -> str:
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
    return clip(json.dumps(value, ensure_ascii=False, default=str), 200)


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
    if decision is not None:  # its times as local times; edited arguments shown above
        shown = {
            k: local_time(v, offset) if k in ("asked_at", "decided_at") else v
            for k, v in decision.items()
            if k != "args" and v is not None
        }
        rows.append(("Policy decision", {k: v for k, v in shown.items() if v != ""}))
    total_ms, wait = duration_ms(node), human_wait(node)
    if total_ms is not None and wait:  # a person's decision time (approval) and the rest
        total = total_ms / 1000
        work = "tool" if node.get("kind") == "tool_call" else "work"
        split = {"total": total, "waiting for a person": wait, work: max(0.0, total - wait)}
        rows.append(("Time", {k: f"{v:.2f} s" for k, v in split.items()}))
    if node.get("usage"):
        rows.append(("Usage", node["usage"]))
    return rows


def _statuses(index: Any, ended: bool) -> dict[str, int]:
    """Nodes per status: as recorded while the trace is live, none running once it ended."""
    counts: dict[str, int] = {}
    for status, n in index.counts()["status"].items():
        label = "unfinished" if ended and status in LIVE else status
        counts[label] = counts.get(label, 0) + n
    return counts


def trace_text(index: Any, *, title: str = "", ended: bool = False) -> str:
    """Counts per status of a trace (a stored trace or a live index; stable: nbval compares
    it), as :func:`_statuses` gives them."""
    detail = ", ".join(f"{k} {v}" for k, v in sorted(_statuses(index, ended).items()))
    name = f"TraceExplorer {title!r}" if title else "TraceExplorer"
    return f"{name}: {counted(len(index), 'node', grouped=False)}" + (
        f" ({detail})" if detail else ""
    )


# -- streams ------------------------------------------------------------------------------------


def _stream_title(state: Mapping[str, Any]) -> str:
    return str(state.get("title") or "Answer")


def stream_html(state: Mapping[str, Any]) -> str:
    status = str(state.get("status", "idle"))
    parts = [
        f'<div class="lfx-k">{esc(_stream_title(state))} · '
        f'<span class="lfx-st-{esc(status)}">{esc(status)}</span></div>'
    ]
    if state.get("mode") == "text":
        parts.append(f"<pre>{esc(clip(str(state.get('text', '')), 20_000))}</pre>")
    elif state.get("value") is not None:
        parts.append(value_html(state.get("value"), depth=1))
    missing = state.get("missing") or []
    if missing:
        names = ", ".join(".".join(map(str, json.loads(k))) for k in missing)
        parts.append(f'<div class="lfx-st-failed">missing required: {esc(names)}</div>')
    if state.get("error"):
        parts.append(f'<div class="lfx-st-failed">{esc(clip(str(state["error"]), 2000))}</div>')
    return f'{CSS}<div class="lfx-fb">{"".join(parts)}</div>'


def stream_text(state: Mapping[str, Any]) -> str:
    status = str(state.get("status", "idle"))
    title = _stream_title(state)
    if state.get("mode") == "text":
        return f"{title}[{status}]: {clip(str(state.get('text', '')), 2000)}"
    value = json.dumps(state.get("value"), ensure_ascii=False, sort_keys=True)
    return f"{title}[{status}]: {clip(value, 2000)}"


# -- batches ------------------------------------------------------------------------------------


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def batch_text(state: Mapping[str, Any]) -> str:
    """``BatchView 'name' [done]: 20 items · 18 done · 2 failed (ValueError 2)``: counts and
    error classes only (no rates or times), so nbval can compare it."""
    name = str(state.get("title") or state.get("name") or "batch")
    status = str(state.get("status") or "running")
    parts = [f"{_count(state.get('total'))} items", f"{_count(state.get('done'))} done"]
    for key in ("failed", "running", "left"):
        if state.get(key):
            parts.append(f"{_count(state.get(key))} {key}")
    if state.get("resumed"):
        parts.append(f"{_count(state['resumed'])} resumed")
    groups = [g for g in state.get("errors") or () if isinstance(g, Mapping)]
    text = f"BatchView {name!r} [{status}]: " + " · ".join(parts)
    if groups:
        text += " (" + ", ".join(f"{g.get('type')} {_count(g.get('count'))}" for g in groups) + ")"
    note = state.get("note")
    return f"{text} — {note}" if note else text


def _tokens_text(usage: Any) -> str:
    usage = usage if isinstance(usage, Mapping) else {}
    total = usage.get("total_tokens")
    inp, out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(total, int) and isinstance(inp, int) and isinstance(out, int):
        total = inp + out
    if not isinstance(total, int):
        return "tokens unknown"
    split = f" ({inp:,} in · {out:,} out)" if isinstance(inp, int) and isinstance(out, int) else ""
    return f"{total:,} tokens{split}"


def _cost_text(state: Mapping[str, Any]) -> str:
    """``cost_label`` of a snapshot's JSON: ``≥ $1.23 (3 calls unpriced: fake:b)`` when
    requests had no price, ``cost unknown`` when none had one, never ``$0`` for unknown."""
    cost, n = state.get("cost"), state.get("unpriced_requests")
    models = [str(m) for m in state.get("unpriced_models") or ()]
    return cost_label(
        float(cost) if isinstance(cost, int | float) else None,
        n if isinstance(n, int) else 0,
        models,
    )


def batch_html(state: Mapping[str, Any]) -> str:
    """A batch's counts, usage, cost (``cost unknown`` when no price is known, never $0) and
    its error groups with their first message (escaped: model text) and first items."""
    status = str(state.get("status") or "running")
    chip = {"done": "ok", "stopped": "cancelled", "some failed": "failed"}.get(status, status)
    name = str(state.get("title") or state.get("name") or "batch")
    counts = " · ".join(
        f'<span data-count="{key}"><b>{_count(state.get(key))}</b> {key}</span>'
        for key in ("done", "failed", "running", "left")
    )
    resumed = f" ({_count(state['resumed'])} resumed)" if state.get("resumed") else ""
    elapsed = state.get("elapsed_s")
    took = (
        f' · took <span class="lfx-dur">{elapsed:.1f} s</span>'
        if isinstance(elapsed, int | float) and state.get("finished")
        else ""
    )
    note = str(state.get("note") or "")
    parts = [
        f'<div><b>{esc(name)}</b> <span class="lfx-st-{esc(chip)}" '
        f'data-status="{esc(status)}">{esc(status)}</span></div>',
        f'<div class="lfx-st-failed" data-note="">{esc(note)}</div>' if note else "",
        f"<div>{counts} of {_count(state.get('total'))}{esc(resumed)}</div>",
        f'<div class="lfx-k">{_count(state.get("requests"))} requests · '
        f"{esc(_tokens_text(state.get('usage')))} · "
        f'<span data-cost="">{esc(_cost_text(state))}</span>{took}</div>',
    ]
    provider = state.get("provider")
    if isinstance(provider, Mapping):  # engine=ProviderBatch(): the provider's own counts
        head, *each = provider_lines(provider)
        items = "".join(f"<li>{esc(line)}</li>" for line in each)
        parts.append(
            f'<div class="lfx-k" data-provider="">{esc(head)}</div>'
            + (f"{UL}{items}</ul>" if items else "")
        )
    groups = [g for g in state.get("errors") or () if isinstance(g, Mapping)]
    if groups:
        rows = []
        for g in groups:
            items = ", ".join(str(i) for i in list(g.get("items") or ())[:10])
            more = ", …" if int(g.get("count") or 0) > len(g.get("items") or ()) else ""
            rows.append(
                f'<li data-error="{esc(g.get("type", ""))}">'
                f'<b class="lfx-st-failed">{esc(g.get("type", ""))}</b> × {_count(g.get("count"))}'
                f": {esc(clip(str(g.get('first_message', '')), 500))}"
                + (f' <span class="lfx-k">(items {esc(items)}{more})</span>' if items else "")
                + "</li>"
            )
        parts.append(f"<div>errors by class:</div>{UL}{''.join(rows)}</ul>")
    return f'{CSS}<div class="lfx-fb lfx-batch-static">{"".join(parts)}</div>'


# -- sessions and rich display ------------------------------------------------------------------


def session_html(session: Any) -> str:
    """A ``Session``'s trace so far, as the explorer's static copy shows it."""
    trace = session.trace_json()
    nodes = {str(n["id"]): n for n in trace["nodes"]}
    index = index_of(nodes.values(), trace)
    return trace_html(index, title=type(session).__name__, record=nodes.get, ended=False)


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
# Classic Notebook 6.5 (and Colab's page) names its outputs `.output > .output_area`, and a
# widget view's area holds `.jupyter-widgets-view` (empty, or ipywidgets' "could not be
# displayed" note, until a view draws), or the text/html note when the page renders the saved
# output before its widget extension loads (`.lfx-fallback`): the same choices, in its classes
# (`:not(:has())` next to `:has()` is not nesting; Chromium applies it).
STATIC_CSS = (
    "<style>"
    ".jp-OutputArea:has(.lfx) > .jp-OutputArea-child:has(.lfx-static){display:none}"
    ".jp-OutputArea:has(.lfx-static) > .jp-OutputArea-child:not(.lfx-live-child)"
    ":has(> .jp-OutputArea-output:not([data-mime-type])){display:none}"
    ".output:has(.lfx) > .output_area:has(.lfx-static){display:none}"
    ".output:has(.lfx-static) > .output_area:has(.lfx-fallback){display:none}"
    ".output:has(.lfx-static) > .output_area:has(> .jupyter-widgets-view):not(:has(.lfx))"
    "{display:none}"
    ".lfx-static ul{list-style:none!important;margin:0!important;padding-left:1.1em!important}"
    ".lfx-static details.lfx-nd>summary{cursor:pointer;color:#666}"
    ".lfx-static .lfx-closed{color:#8a5a00}"
    "</style>"
)


ANYWIDGET_RANGE = ">=0.9.0"  # the anywidget releases a page may draw the views with


class WidgetDisplayMixin(traitlets.HasTraits):
    """Displays an anywidget as a live view plus a static copy that outlives the kernel.

    ``display(widget)`` emits two outputs with display ids: the widget view (its text/html is a
    one-line summary for viewers without widgets) and ``_static_html()`` wrapped with
    ``STATIC_CSS``. ``_refresh_displays()`` (called when a run ends or a prompt closes) updates
    both in place, so a saved notebook holds the final state as plain HTML."""

    _display_handles: list[Any]
    _static_handles: list[Any]

    # The page's anywidget draws the views whatever its release: a kernel's anywidget names
    # its own minor release ("~0.9.*" on Colab's pins) and a page from another environment
    # (JupyterLab with a host's kernel) has another (0.11), which the widget manager refuses
    # by that range. The views use only what anywidget 0.9 already had (ESM render, traits,
    # custom messages), so any release from 0.9 on will do.
    _model_module_version = traitlets.Unicode(ANYWIDGET_RANGE).tag(sync=True)
    _view_module_version = traitlets.Unicode(ANYWIDGET_RANGE).tag(sync=True)

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
        name = esc(type(self).__name__)
        data["text/html"] = (
            f'<div class="lfx-fallback">{name}: live view (needs its kernel); static copy below'
            "</div>"
        )
        return data, meta

    def _static_bundle(self) -> dict[str, Any]:
        return {"text/html": f'{STATIC_CSS}<div class="lfx-static">{self._static_html()}</div>'}

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        from . import marimo_host

        if marimo_host.running():  # marimo draws the anywidget itself; no static copy there
            marimo_host.show(self)
            return
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


def trace_html(
    index: Any,
    *,
    title: str = "",
    record: Callable[[str], Mapping[str, Any] | None] | None = None,
    offset: float | None = None,
    ended: bool = True,
) -> str:
    """A trace (a stored trace or a live index, see ``agentic/trace_reader.py``) as HTML,
    bounded to about ``MAX_ROWS`` rows whatever its size: exact counts by status and kind,
    then the first rows depth first, each with its status (as shown once the trace has
    ``ended`` or its kernel is gone: the saved-notebook copy; else as recorded), duration,
    exact subtree sums, what went wrong below it, its error, and, when ``record`` gives the
    node's record, its details in a ``<details>`` element (``offset`` shows decision times
    as local times); for every row whose subtree is not all shown, "… N more nodes" (and the
    same for the whole trace)."""
    rows = index.first_rows(MAX_ROWS)
    out: list[str] = []
    listed: list[tuple[int, int, int]] = []  # rows whose children are listed: depth, k, desc

    def close_to(depth: int, k: int) -> None:
        """End the lists of the rows at ``depth`` or deeper (``k`` rows written so far)."""
        while listed and listed[-1][0] >= depth:
            _depth, at, desc = listed.pop()
            if desc > k - at - 1:
                out.append(f'<li class="lfx-k">… {desc - (k - at - 1):,} more nodes</li>')
            out.append("</ul></li>")

    for k, row in enumerate(rows):
        close_to(row["depth"], k)
        values = row_values(row, ended=ended)
        status, err = values["status"], row["node"].get("error")
        html_row = (
            f'<li data-node="{esc(values["id"])}" data-kind="{esc(values["kind"])}">'
            f'<span class="lfx-k">{esc(values["kind"])}</span> '
            f"<b>{esc(clip(values['name'], 200))}</b> "
            f'<span class="lfx-st-{esc(status.replace(" ", "_"))}">{esc(status)}</span>'
        )
        if values["duration"]:
            html_row += f' <span class="lfx-dur">{esc(values["duration"])}</span>'
        html_row += esc("".join(f" · {values[f]}" for f in ("tokens", "cost") if values[f]))
        if values["below"]:
            html_row += f' <span class="lfx-st-failed">({esc(values["below"])})</span>'
        if err:
            html_row += f'<div class="lfx-st-failed">{esc(clip(_error_text(err), 500))}</div>'
        full = record(values["id"]) if record is not None else None
        detail = "".join(
            f'<div><span class="lfx-k">{esc(label)}:</span> '
            f"{value_html(value, depth=1) if not isinstance(value, str) else esc(clip(value))}"
            "</div>"
            for label, value in (node_detail_rows(full, offset) if full is not None else ())
        )
        if detail:
            html_row += f'<details class="lfx-nd"><summary>details</summary>{detail}</details>'
        out.append(html_row + UL)
        listed.append((row["depth"], k, row["roll"][3]))
    close_to(0, len(rows))
    total, more, shown = len(index), "", ""
    if len(rows) < total:
        more = f"<div>… {total - len(rows):,} more nodes</div>"
        shown = f" (first {len(rows):,} shown)"
    head = f"<b>{esc(title)}</b> " if title else ""
    head += f"<div>{counted(total, 'node')}{shown}</div>"
    by_kind = index.counts()["kind"]
    for name, values in (("by status", _statuses(index, ended)), ("by kind", by_kind)):
        cells = ", ".join(f"{esc(k or '—')} {v:,}" for k, v in sorted(values.items()))
        head += f'<div class="lfx-k">{name}: {cells}</div>'
    return f'{CSS}<div class="lfx-fb lfx-trace-static">{head}{UL}{"".join(out)}</ul>{more}</div>'
