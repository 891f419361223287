"""StreamView: ``query_stream`` events shown live — the object filling in field by field.

Stream events (``langfx_nb.structured.events``) become small patches (``open`` / ``append`` /
``done`` / ``text`` / ``tool`` / ``status``) that the JS view applies with the same rules as
:class:`StreamReducer` here, which keeps the cumulative state for re-displays, page reloads and
the static fallback. Text streams (plain ``str`` chunks or ``StreamChunk``s) render as growing
Markdown built from text nodes only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, Mapping
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .bridge import BridgedView, Clock, EventBridge, MessageKind, to_jsonable
from .render import WidgetDisplayMixin, stream_html, stream_text

__all__ = ["StreamReducer", "StreamView", "path_key"]

_STATIC = Path(__file__).parent / "static"


STREAM_END = "stream_end"  # synthetic: the iterator finished without a terminal event


def path_key(path: Any) -> str:
    """The same key as ``JSON.stringify(path)`` in the view."""
    return json.dumps(list(path), separators=(",", ":"), ensure_ascii=False)


def _set_at(root: Any, path: list[Any], fn: Any) -> Any:
    if not path:
        return fn(root)
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        container: Any = root if isinstance(root, list) else []
        while len(container) <= head:
            container.append(None)
        container[head] = _set_at(container[head], rest, fn)
    else:
        container = root if isinstance(root, dict) else {}
        container[head] = _set_at(container.get(head), rest, fn)
    return container


def _copy(value: Any) -> Any:
    """A structural copy of JSON data: the state must never share a container with a patch
    (patches wait up to one batch interval before they are sent, while the state keeps
    growing)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _event_type(event: Any) -> str:
    if isinstance(event, Mapping):
        return str(event.get("type", ""))
    return str(getattr(event, "type", "") or "")


def _get(event: Any, name: str, default: Any = None) -> Any:
    if isinstance(event, Mapping):
        return event.get(name, default)
    return getattr(event, name, default)


#: The view's status for a ``parsing_failed`` event whose answer parsed but whose fields did
#: not validate (the error names them): "parsing failed" would send a reader to the syntax.
VALIDATION_FAILED = "validation_failed"


def _field_errors(error: Any) -> tuple[dict[str, str], list[str]]:
    """Validation failures of a ``MappingError`` by field path, and the missing fields' keys.

    ``MappingError.detail`` holds pydantic's error list (``loc``, ``msg``, ``type``)."""
    detail = getattr(error, "detail", None)
    if not isinstance(error, BaseException) or not isinstance(detail, list):
        return {}, []
    errors: dict[str, str] = {}
    missing: list[str] = []
    for item in detail:
        if not isinstance(item, Mapping) or not isinstance(item.get("loc"), list | tuple):
            continue
        key = path_key(to_jsonable(item["loc"]))
        if item.get("type") == "missing":
            missing.append(key)
        else:
            errors.setdefault(key, str(item.get("msg", "invalid")))
    return errors, missing


def schema_fields(schema: Any) -> list[dict[str, Any]]:
    """The top-level fields of a pydantic model schema (name, required), in order; else []."""
    fields = getattr(schema, "model_fields", None)
    if not isinstance(schema, type) or not isinstance(fields, Mapping):
        return []
    return [
        {"name": str(getattr(info, "alias", None) or name), "required": bool(info.is_required())}
        for name, info in fields.items()
    ]


def _error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, Mapping):
        return f"{error.get('type', 'Error')}: {error.get('message', '')}"
    return str(error)


class StreamReducer:
    """Cumulative view state of one stream, built from the same patches the view applies."""

    def __init__(self, fields: list[dict[str, Any]] | None = None, title: str = "") -> None:
        self.fields = list(fields or [])
        self.title = title
        self.reset("idle")

    def reset(self, mode: str) -> None:
        self.mode = mode
        self.value: Any = None
        self.text = ""
        self.open: list[str] = []
        self.done: list[str] = []
        self.status = "idle" if mode == "idle" else "streaming"
        self.error: str | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.field_errors: dict[str, str] = {}
        self.missing: list[str] = []

    def patches(self, event: Any) -> list[dict[str, Any]]:
        """The patches for one event (without applying them)."""
        kind = _event_type(event)
        out: list[dict[str, Any]] = []
        if not kind:  # a text chunk: str or StreamChunk
            delta = event if isinstance(event, str) else _get(event, "delta", "")
            if self.mode != "text":
                out.append({"op": "reset", "mode": "text"})
            if delta:
                out.append({"op": "text", "delta": str(delta)})
            if _get(event, "final", False):
                out.append({"op": "status", "status": "done"})
            return out
        if kind == STREAM_END:
            return [{"op": "status", "status": "done" if self.mode == "text" else "ended"}]
        if self.mode == "idle" or (
            self.mode == "text" and kind.startswith(("object", "array", "field"))
        ):
            out.append({"op": "reset", "mode": "object"})
        path = list(to_jsonable(_get(event, "path", ()) or ()))
        if kind == "object_start":
            out.append({"op": "open", "path": path, "value": {}})
        elif kind == "array_start":
            out.append({"op": "open", "path": path, "value": []})
        elif kind == "field_start":
            out.append({"op": "open", "path": path})
        elif kind == "string_field_delta":
            out.append({"op": "append", "path": path, "delta": str(_get(event, "delta", ""))})
        elif kind == "field_end":
            out.append({"op": "done", "path": path, "value": to_jsonable(_get(event, "value"))})
        elif kind in ("object_end", "array_end"):
            out.append({"op": "done", "path": path})
        elif kind == "tool_call_start":
            out.append(
                {"op": "tool", "id": str(_get(event, "id")), "name": str(_get(event, "name"))}
            )
        elif kind == "tool_call_delta":
            out.append(
                {"op": "tool", "id": str(_get(event, "id")), "delta": str(_get(event, "delta", ""))}
            )
        elif kind == "tool_call_end":
            call = _get(event, "call")
            out.append(
                {
                    "op": "tool",
                    "id": str(_get(call, "id")),
                    "name": str(_get(call, "name")),
                    "args": to_jsonable(_get(call, "args", {})),
                }
            )
        elif kind == "generation_complete":
            out.append(
                {"op": "status", "status": "complete", "value": to_jsonable(_get(event, "value"))}
            )
        elif kind in ("parsing_failed", "generation_failed"):
            error = _get(event, "error")
            patch: dict[str, Any] = {"op": "status", "status": kind, "error": _error_text(error)}
            field_errors, missing = _field_errors(error)
            if field_errors or missing:  # the answer parsed: its fields did not validate
                patch["status"] = VALIDATION_FAILED
                patch["field_errors"], patch["missing"] = field_errors, missing
            out.append(patch)
        elif kind == "cancelled":
            out.append({"op": "status", "status": "cancelled"})
        elif kind == "repairing":  # the answer failed; the re-asked attempt starts afresh
            out.append({"op": "reset", "mode": "object"})
        return out

    def apply_patch(self, p: Mapping[str, Any]) -> None:
        op = p.get("op")
        path = list(p.get("path") or [])
        if op == "reset":
            self.reset(str(p.get("mode", "object")))
        elif op == "open":
            key = path_key(path)
            if key not in self.open:
                self.open.append(key)
            if "value" in p:
                self.value = _set_at(
                    self.value, path, lambda old: _copy(p["value"]) if old is None else old
                )
        elif op == "append":
            delta = str(p.get("delta", ""))
            self.value = _set_at(
                self.value, path, lambda old: (old if isinstance(old, str) else "") + delta
            )
        elif op == "done":
            key = path_key(path)
            self.open = [k for k in self.open if k != key]
            if key not in self.done:
                self.done.append(key)
            if "value" in p:
                value = p["value"]
                self.value = _set_at(self.value, path, lambda _old: _copy(value))
        elif op == "text":
            self.mode = "text"
            self.text += str(p.get("delta", ""))
        elif op == "tool":
            tool = self.tools.setdefault(str(p["id"]), {"name": "", "args_text": "", "done": False})
            if "name" in p:
                tool["name"] = p["name"]
            if "delta" in p:
                tool["args_text"] += p["delta"]
            if "args" in p:
                tool["args"], tool["done"] = _copy(p["args"]), True
        elif op == "status":
            self.status = str(p.get("status"))
            if p.get("error") is not None:
                self.error = str(p["error"])
            if "value" in p:
                self.value = _copy(p["value"])
            if "field_errors" in p:
                self.field_errors = dict(p["field_errors"])
                self.missing = list(p.get("missing") or [])

    def apply(self, event: Any) -> list[dict[str, Any]]:
        patches = self.patches(event)
        for p in patches:
            self.apply_patch(p)
        return patches

    def snapshot(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "value": self.value,
            "text": self.text,
            "open": list(self.open),
            "done": list(self.done),
            "status": self.status,
            "error": self.error,
            "tools": {k: dict(v) for k, v in self.tools.items()},
            "fields": [dict(f) for f in self.fields],
            "field_errors": dict(self.field_errors),
            "missing": list(self.missing),
            "title": self.title,
        }


class StreamView(BridgedView, WidgetDisplayMixin, anywidget.AnyWidget):
    """Live view of a structured or text stream.

    ``value = await StreamView().consume(lf.query_stream(...))`` displays the view, feeds it
    every event and returns the validated value (or the text); a parsing or generation failure
    is shown in the view and raised. ``push(event)`` feeds events one at a time instead.
    """

    _esm = _STATIC / "stream_view.js"
    state = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        *,
        schema: Any = None,
        title: str = "",
        interval: float = 0.05,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._reducer = StreamReducer(schema_fields(schema), title)
        self._bridge = EventBridge(
            self._send_message,
            self._reducer,
            on_state=self._set_state,
            interval=interval,
            clock=clock,
        )
        self._displayed = False
        # the view knows its title and the schema's fields before the first event
        self.state = {**self._reducer.snapshot(), "seq": 0}
        self.on_msg(self._on_view_message)

    def push(self, event: Any) -> None:
        """Feed one stream event (or a text chunk)."""
        self._bridge.push(event)
        if _event_type(event) in (
            "generation_complete",
            "parsing_failed",
            "generation_failed",
            "cancelled",
        ):
            self.flush()

    def flush(self) -> None:
        self._bridge.flush()
        self._refresh_displays()

    async def consume(self, stream: AsyncIterable[Any], *, display: bool = True) -> Any:
        """Stream every event into the view (displayed once, at the first event), return the
        outcome. A stream that fails before its first event displays nothing; one that raises
        later shows the error in the view."""
        outcome: Any = None
        failure: BaseException | None = None
        text: list[str] = []
        try:
            async for event in stream:
                self.push(event)
                if display and not self._displayed:
                    self._displayed = True
                    self._ipython_display_()
                kind = _event_type(event)
                if kind == "generation_complete":
                    outcome = _get(event, "value")
                elif kind in ("parsing_failed", "generation_failed"):
                    error = _get(event, "error")
                    failure = (
                        error if isinstance(error, BaseException) else RuntimeError(str(error))
                    )
                elif not kind:
                    text.append(event if isinstance(event, str) else str(_get(event, "delta", "")))
        except asyncio.CancelledError:  # the consumer was cancelled: show it, then propagate
            self._bridge.push({"type": "cancelled"})
            raise
        except Exception as exc:
            if self._displayed and self._reducer.status in ("idle", "streaming"):
                self._bridge.push({"type": "generation_failed", "error": exc})
            raise
        finally:
            if self._reducer.status == "streaming":  # a text stream simply ends
                self._bridge.push({"type": STREAM_END})
            self.flush()
        if failure is not None:
            raise failure
        return "".join(text) if self._reducer.mode == "text" else outcome

    @property
    def value(self) -> Any:
        return self._reducer.value

    @property
    def text(self) -> str:
        return self._reducer.text

    @property
    def status(self) -> str:
        return self._reducer.status

    def _fallback_html(self) -> str:
        return stream_html(self._reducer.snapshot())

    def _fallback_text(self) -> str:
        return stream_text(self._reducer.snapshot())

    def _set_state(self, state: dict[str, Any]) -> None:
        self.state = state

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, Mapping) and content.get("kind") == MessageKind.SYNC.value:
            self._answer_sync(content)
