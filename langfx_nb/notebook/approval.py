"""ApprovalPolicy: an ``allow_tool`` policy that asks a person in the notebook, or runs unattended.

Modes:
- ``"ask"``: each call not on the allow-list is shown in an :class:`ApprovalWidget` (tool name,
  description, validated arguments as a tree) with Approve / Approve with edited arguments /
  Deny / Deny with a note / "always allow this tool for this run". The policy ``await``s a
  future that the widget's message handler resolves (``call_soon_threadsafe``: handlers may run
  on another thread). Nothing blocks the loop, so a kernel that dispatches widget messages
  while a cell awaits (approval mode ``live``, ``hosts``) delivers the click to the waiting
  cell; elsewhere the run must go on between cells (``background``), and a prompt awaited by a
  cell on such a kernel is denied at once with the reason, never left hanging.
- ``"allow"``: unattended; tools on ``allow`` run, all others are denied.
- ``"deny"``: unattended; every call is denied.

Safety properties a user relies on:
- A decision is bound to one prompt: it must carry that prompt's id *and* call id, and only the
  first decision counts. A stale click (an old prompt) or a second click is refused.
- Fail closed: if no frontend reports the prompt as rendered within ``render_timeout`` seconds
  (nbconvert, nbval, a closed browser tab; in a background run, seconds while no cell runs),
  the call is denied with a message naming the kernel and what to do.
- Who decided and when is returned in the decision (``by``); the core records it on the tool
  call's node (status ``waiting`` while this policy is awaited, then the decision record), and
  a readable note is logged under the call. The trace views read the node, never the notes.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import getpass
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anywidget
import traitlets

from ..errors import ToolDeniedError, ToolExecutionError
from . import control, hosts
from .bridge import MessageKind, to_jsonable
from .render import CSS, UL, WidgetDisplayMixin, esc, value_html

if TYPE_CHECKING:
    from ..agentic.agent import PolicyDecision
    from ..agentic.session import Session
    from ..messages import ToolCall

__all__ = ["ApprovalPolicy", "ApprovalWidget", "Decision", "ask"]

_STATIC = Path(__file__).parent / "static"

Mode = Literal["ask", "allow", "deny"]
Action = Literal["approve", "approve_edited", "deny", "deny_note"]
_ACTIONS = ("approve", "approve_edited", "deny", "deny_note")


@dataclass(frozen=True, slots=True)
class Decision:
    """What a person decided for one prompt (as received from the frontend, validated)."""

    action: Action
    args: dict[str, Any] | None = None
    note: str | None = None
    always: bool = False


@dataclass(slots=True)
class _Prompt:
    prompt_id: str
    call_id: str
    tool: str
    loop: asyncio.AbstractEventLoop
    decided: asyncio.Future[Decision]
    rendered: asyncio.Future[bool]
    validate: Callable[[Mapping[str, Any]], Any] | None
    closed: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    task: asyncio.Task[Any] | None = None  # the run waiting on this prompt (Cancel run)

    @classmethod
    def for_call(cls, call: Any, tool: Any, task: asyncio.Task[Any] | None = None) -> _Prompt:
        """A new prompt for ``call`` (a ``ToolCall``) on the running loop, with what the page
        shows of it (``info``: the call, the tool's description and argument schema)."""
        loop = asyncio.get_running_loop()
        prompt = cls(
            prompt_id=secrets.token_hex(8),
            call_id=str(call.id),
            tool=str(call.name),
            loop=loop,
            decided=loop.create_future(),
            rendered=loop.create_future(),
            validate=getattr(tool, "validate_args", None),
            task=task,
        )
        spec = getattr(tool, "spec", None)
        prompt.info = {
            "prompt_id": prompt.prompt_id,
            "call_id": prompt.call_id,
            "tool": prompt.tool,
            "description": _describe(tool),
            "args": to_jsonable(getattr(call, "args", {})),
            "schema": to_jsonable(getattr(spec, "input_schema", None)),
        }
        return prompt


LOOP_HELD_S = 1.0  # a render wait this late was held up by a cell that blocked the loop
_now = time.monotonic  # the render wait's clock (tests replace it)


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


class ApprovalWidget(WidgetDisplayMixin, anywidget.AnyWidget):
    """Shows the pending tool call (if any) and the decisions made so far."""

    _esm = _STATIC / "approval.js"
    state: Any = traitlets.Dict({"pending": None, "history": [], "notice": None}).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._prompts: dict[str, _Prompt] = {}
        self.on_msg(self._on_view_message)

    # -- kernel side ----------------------------------------------------------------------------

    def open_prompt(self, prompt: _Prompt) -> None:
        with self._lock:
            self._prompts[prompt.prompt_id] = prompt
        self.state = {**self.state, "pending": prompt.info, "notice": None}
        self._refresh_displays()

    def close_prompt(
        self, prompt: _Prompt, entry: dict[str, Any], notice: str | None = None
    ) -> None:
        with self._lock:
            prompt.closed = True
            self._prompts.pop(prompt.prompt_id, None)
        pending = self.state.get("pending")
        still = pending if pending and pending.get("prompt_id") != prompt.prompt_id else None
        self.state = {
            "pending": still,
            "history": [*self.state.get("history", []), entry],
            "notice": notice,
        }
        self._refresh_displays()

    def waiting_for(self) -> str | None:
        """The call a prompt here waits for (``"add (c1)"``) while no decision has arrived;
        None once a click (or a cancellation) was received for it."""
        with self._lock:
            open_ = [p for p in self._prompts.values() if not p.closed]
        return f"{open_[0].tool} ({open_[0].call_id})" if open_ else None

    # -- messages from the view -----------------------------------------------------------------

    def _reply(
        self,
        prompt_id: Any,
        ok: bool,
        error: str | None = None,
        field_errors: list[dict[str, Any]] | None = None,
    ) -> None:
        msg: dict[str, Any] = {
            "kind": MessageKind.DECISION_RESULT.value,
            "prompt_id": prompt_id,
            "ok": ok,
        }
        if error:
            msg["error"] = error
        if field_errors:
            msg["field_errors"] = field_errors
        if self.comm is not None:
            self.send(msg)

    def _on_view_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, Mapping):
            return
        kind = content.get("kind")
        if kind == MessageKind.RENDERED.value:
            with self._lock:
                prompt = self._prompts.get(str(content.get("prompt_id")))
            if prompt is not None:
                prompt.loop.call_soon_threadsafe(_resolve, prompt.rendered, True)
        elif kind == MessageKind.DECISION.value:
            self.handle_decision(content)
        elif kind == MessageKind.CANCEL.value:
            self.cancel_prompt(content.get("prompt_id"))

    def cancel_prompt(
        self, prompt_id: Any, reason: str = "the run was cancelled from the approval prompt"
    ) -> bool:
        """Cancel the run waiting on this prompt (the Cancel-run button): the call is recorded
        as cancelled and never runs; any later click is refused."""
        with self._lock:
            prompt = self._prompts.get(str(prompt_id))
            if prompt is None or prompt.closed or prompt.task is None:
                prompt = None
            else:
                prompt.closed = True  # no click can count from now on
        if prompt is None or prompt.task is None:
            self._reply(prompt_id, False, "This approval prompt is no longer waiting.")
            return False
        why = f"{reason}; tool {prompt.tool} ({prompt.call_id}) did not run"
        prompt.loop.call_soon_threadsafe(control.cancel_task, prompt.task, why)
        self._reply(prompt_id, True)
        return True

    def handle_decision(self, content: Mapping[str, Any]) -> bool:
        """Accept a decision for exactly the prompt it names, once. Returns whether accepted."""
        prompt_id = content.get("prompt_id")
        action = content.get("action")
        with self._lock:
            prompt = self._prompts.get(str(prompt_id))
            if prompt is None or prompt.closed or prompt.decided.done():
                stale = True
            else:
                stale = str(content.get("call_id")) != prompt.call_id
        if stale or prompt is None:
            self._reply(
                prompt_id,
                False,
                "This approval prompt is no longer waiting (stale or already decided).",
            )
            return False
        if action not in _ACTIONS:
            self._reply(prompt_id, False, f"unknown action {action!r}")
            return False
        args: dict[str, Any] | None = None
        if action == "approve_edited":
            raw = content.get("args")
            if not isinstance(raw, Mapping):
                self._reply(prompt_id, False, "edited arguments must be a JSON object")
                return False
            args = dict(raw)
            if prompt.validate is not None:
                try:
                    prompt.validate(args)
                except Exception as exc:  # shown in the form; the prompt keeps waiting
                    self._reply(prompt_id, False, str(exc)[:500], _field_errors(exc))
                    return False
        note = content.get("note")
        decision = Decision(
            action=action,
            args=args,
            note=str(note)[:2000] if isinstance(note, str) and note.strip() else None,
            # "always allow" belongs to a plain Approve only, whatever else the page sends: a
            # denial (or an edited call) never grants later calls of the tool.
            always=action == "approve" and content.get("always") is True,
        )
        with self._lock:  # first decision wins, even if two arrive on different threads
            if prompt.closed:
                accepted = False
            else:
                object.__setattr__(prompt, "closed", True)
                accepted = True
        if not accepted:
            self._reply(prompt_id, False, "This approval prompt was already decided.")
            return False
        prompt.loop.call_soon_threadsafe(_resolve, prompt.rendered, True)
        prompt.loop.call_soon_threadsafe(_resolve, prompt.decided, decision)
        self._reply(prompt_id, True)
        return True

    # -- fallbacks ------------------------------------------------------------------------------

    def _fallback_text(self) -> str:
        history = self.state.get("history", [])
        pending = self.state.get("pending")
        approved = sum(1 for h in history if h.get("approved"))
        denied = len(history) - approved
        text = f"ApprovalWidget: {len(history)} decisions ({approved} approved, {denied} denied)"
        if pending:
            text += f"; waiting: {pending.get('tool')} ({pending.get('call_id')})"
        return text

    def _static_html(self) -> str:
        return _approval_static_html(self.state)

    def _fallback_html(self) -> str:
        rows = []
        pending = self.state.get("pending")
        if pending:
            args = value_html(pending.get("args") or {}, depth=1)
            rows.append(
                f"<div><b>waiting for approval:</b> {esc(pending.get('tool'))} "
                f"({esc(pending.get('call_id'))}) {args}</div>"
            )
        for h in self.state.get("history", []):
            note = f" — “{esc(h['note'])}”" if h.get("note") else ""
            rows.append(
                f"<li>{esc(h.get('decision'))}: <b>{esc(h.get('tool'))}</b> "
                f"({esc(h.get('call_id'))}) by {esc(h.get('who'))}{note}</li>"
            )
        notice = self.state.get("notice")
        if notice:
            rows.append(f'<div class="lfx-st-failed">{esc(notice)}</div>')
        head = f'<div class="lfx-k">{esc(self._fallback_text())}</div>'
        return f'{CSS}<div class="lfx-fb">{head}{UL}{"".join(rows)}</ul></div>'


def _approval_static_html(state: Mapping[str, Any]) -> str:
    """The prompt as a page without its live view shows it (a saved notebook, nbconvert, a
    host without a widget manager): decisions with local times, and a prompt that was waiting
    when the copy was written. That copy may show while the run still waits (a page whose
    widgets have not drawn, the saved file read mid-run), so it never says the call did not
    run: only the live prompt or the run's end can say."""
    from .render import local_time

    rows = []
    for h in state.get("history", []):
        note = f" — “{esc(h['note'])}”" if h.get("note") else ""
        when = local_time(h.get("when"), None)
        waited = h.get("waited_s")
        wait = f", after {waited:.1f} s" if isinstance(waited, int | float) else ""
        rows.append(
            f"<li>{esc(h.get('decision'))}: <b>{esc(h.get('tool'))}</b> "
            f"({esc(h.get('call_id'))}) by {esc(h.get('who'))}"
            f"{' at ' + esc(when) if when else ''}{esc(wait)}{note}</li>"
        )
    pending = state.get("pending")
    if pending:
        rows.append(
            f'<li class="lfx-closed">waiting: tool call <b>{esc(pending.get("tool"))}</b> '
            f"({esc(pending.get('call_id'))}) was waiting for approval when this copy was "
            "written; this copy cannot answer it (the live prompt can, while its kernel "
            "runs)</li>"
        )
    notice = state.get("notice")
    if notice:
        rows.append(f'<li class="lfx-st-failed">{esc(notice)}</li>')
    if not rows:
        rows.append("<li>no tool calls were decided here</li>")
    head = '<div class="lfx-k">Tool approvals</div>'
    return f'{CSS}<div class="lfx-fb">{head}{UL}{"".join(rows)}</ul></div>'


class ApprovalPolicy:
    """``allow_tool`` for ``lf.Agent``: ``Agent(..., allow_tool=ApprovalPolicy())``.

    ``tools`` (the agent's ``Tool``s) give the prompt each tool's description and input schema
    and re-validate edited arguments; without them the agent still re-validates on its side.
    ``deny_message``: for unattended denials, tell the model this instead of stopping the run.
    """

    def __init__(
        self,
        mode: Mode = "ask",
        *,
        allow: Iterable[str] = (),
        tools: Iterable[Any] = (),
        render_timeout: float = 15.0,
        who: str | None = None,
        deny_message: str | None = None,
        display: Callable[[Any], Any] | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        if mode not in ("ask", "allow", "deny"):
            raise ValueError(f"mode must be 'ask', 'allow' or 'deny', not {mode!r}")
        if render_timeout <= 0:
            raise ValueError("render_timeout must be positive")
        self.mode: Mode = mode
        self.allow = frozenset(allow)
        self.tools: dict[str, Any] = {}
        self.register(tools)
        self.render_timeout = render_timeout
        self.who = who or _default_who()
        self.deny_message = deny_message
        self.display = display  # how the prompt is shown (None: in the running cell)
        self._sleep = sleep
        self._always: dict[tuple[str, ...], set[str]] = {}
        self._widget: ApprovalWidget | None = None
        self._shown_for: set[tuple[str, ...]] = set()
        from . import marimo_host

        if mode == "ask" and marimo_host.running():
            # marimo makes a widget only inside a running cell (this one), never in the
            # background task that asks
            self._widget = ApprovalWidget()

    def register(self, tools: Iterable[Any]) -> None:
        """Tell the policy about tools (for descriptions, schemas and re-validation)."""
        for tool in tools:
            self.tools[str(tool.name)] = tool

    @property
    def widget(self) -> ApprovalWidget:
        if self._widget is None:
            self._widget = ApprovalWidget()
        return self._widget

    def __repr__(self) -> str:
        allow = f", allow={sorted(self.allow)!r}" if self.allow else ""
        return f"ApprovalPolicy(mode={self.mode!r}{allow})"

    async def __call__(self, call: ToolCall, session: Session) -> PolicyDecision:
        """The ``allow_tool`` policy: ``session`` is the view bound to the waiting call."""
        from ..agentic.agent import Approve, Deny

        name = str(call.name)
        run = _run_key(session)
        if name in self.allow:
            return Approve(by=f"allow-list ({self.who})")
        if name in self._always.get(run, set()):
            return Approve(by=f"{self.who} (always allow for this run)")
        if self.mode != "ask":
            why = (
                f"tool {name!r} is not on the allow-list" if self.mode == "allow" else "mode='deny'"
            )
            _log(
                session, "warning", f"tool call {name} ({call.id}) denied: {why}", call.id, "policy"
            )
            return Deny(f"{self.deny_message} ({why})", by="policy") if self.deny_message else False
        return await self._ask(call, session, run, Approve, Deny)

    async def _ask(
        self, call: Any, session: Any, run: tuple[str, ...], approve: Any, deny: Any
    ) -> Any:
        tool = self.tools.get(str(call.name))
        prompt = _Prompt.for_call(call, tool)
        widget = self.widget
        widget.open_prompt(prompt)
        if run not in self._shown_for:  # once per agent run, in the cell that runs it
            self._shown_for.add(run)
            self._show(widget)
        entry: dict[str, Any] = {
            "prompt_id": prompt.prompt_id,
            "call_id": prompt.call_id,
            "tool": prompt.tool,
        }
        prompt.task = asyncio.current_task()
        asked = time.monotonic()
        _log(
            session,
            "info",
            f"waiting for approval: {prompt.tool} ({prompt.call_id})",
            prompt.call_id,
            "policy",
        )
        with control.track(session, label=f"approval {prompt.tool} ({prompt.call_id})"):
            return await self._decide(prompt, entry, session, widget, approve, deny, run, asked)

    async def _decide(
        self,
        prompt: _Prompt,
        entry: dict[str, Any],
        session: Any,
        widget: ApprovalWidget,
        approve: Any,
        deny: Any,
        run: tuple[str, ...],
        asked: float,
    ) -> Any:
        try:
            unreachable = _click_cannot_arrive()
            if unreachable or not await self._wait_rendered(prompt):
                message = unreachable or hosts.explain_no_click(
                    prompt.tool,
                    prompt.call_id,
                    self.render_timeout,
                    in_cell=not control.in_background(),
                )
                entry.update(
                    decision="denied (no answer possible)" if unreachable else "denied (no page)",
                    approved=False,
                    who="policy",
                    when=_now_iso(),
                )
                widget.close_prompt(prompt, entry, notice=message)
                _log(session, "warning", message, prompt.call_id, "policy")
                raise ToolDeniedError(message)
            decision = await prompt.decided
        except asyncio.CancelledError as exc:
            if not prompt.closed or prompt.prompt_id in widget._prompts:
                why = str(exc.args[0]) if exc.args else "the run was cancelled"
                control.add_detail(
                    prompt.task, f"tool {prompt.tool} ({prompt.call_id}) did not run"
                )
                entry.update(decision="cancelled", approved=False, who="-", when=_now_iso())
                widget.close_prompt(prompt, entry, notice=f"Cancelled: {why}")
                _log(
                    session,
                    "warning",
                    f"tool call {prompt.tool} ({prompt.call_id}) cancelled while waiting for "
                    f"approval: {why}",
                    prompt.call_id,
                    "-",
                )
            raise
        waited = round(time.monotonic() - asked, 3)
        by, when = f"{self.who} (notebook)", _now_iso()
        entry.update(who=self.who, when=when)
        if decision.action == "approve" and decision.always:
            self._always.setdefault(run, set()).add(prompt.tool)
        if decision.action == "approve":
            entry.update(
                decision="approved" + (" (always)" if decision.always else ""), approved=True
            )
            result: Any = approve(by=by)
        elif decision.action == "approve_edited":
            entry.update(
                decision="approved with edited arguments", approved=True, args=decision.args
            )
            result = approve(args=decision.args, by=by)
        elif decision.action == "deny_note":
            note = decision.note or "The user declined this tool call."
            entry.update(decision="denied with note", approved=False, note=note)
            result = deny(note, by=by)
        else:
            entry.update(decision="denied", approved=False)
            result = False
        entry["waited_s"] = waited
        widget.close_prompt(prompt, entry)
        _log(
            session,
            "info",
            f"tool call {prompt.tool} ({prompt.call_id}) {entry['decision']}",
            prompt.call_id,
            by,
            when,
        )
        return result

    async def _wait_rendered(self, prompt: _Prompt) -> bool:
        """Whether a page reports the prompt drawn within ``render_timeout`` s. In a background
        run only idle time counts: while a cell runs, such a kernel holds the page's message."""
        background = control.in_background()
        while not prompt.rendered.done():
            before, start = hosts.cell_activity(), _now()
            timer = asyncio.ensure_future(self._sleep(self.render_timeout))
            try:
                await asyncio.wait({prompt.rendered, timer}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                timer.cancel()
            after = hosts.cell_activity()
            # a wait that ended well past its time: a cell held the loop (and the page's message)
            held = _now() - start > self.render_timeout + LOOP_HELD_S
            if not background or (after == before and not after[1] and not held):
                break
        return prompt.rendered.done()

    def _show(self, widget: ApprovalWidget) -> None:
        if self.display is not None:
            self.display(widget)
            return
        host = hosts.current()
        if host is not None and host.marimo:  # the running cell's output, if a cell runs
            from . import marimo_host

            marimo_host.show(widget)
            return
        try:
            from IPython import get_ipython

            if get_ipython() is None:
                return
            widget._ipython_display_()
        except ImportError:
            return


async def ask(widget: ApprovalWidget, call: Any, tool: Any = None) -> Decision:
    """Show ``call`` (a ``ToolCall``) in ``widget`` and return the first decision clicked for
    it. Cancelling the caller closes the prompt as cancelled. A decision is not yet an
    outcome: the caller records it (the prompt's history shows what was clicked)."""
    prompt = _Prompt.for_call(call, tool, asyncio.current_task())
    entry: dict[str, Any] = {"prompt_id": prompt.prompt_id, "call_id": prompt.call_id}
    entry["tool"] = prompt.tool
    widget.open_prompt(prompt)
    try:
        decision = await prompt.decided
    except asyncio.CancelledError:
        entry.update(decision="cancelled", approved=False, who="-", when=_now_iso())
        widget.close_prompt(prompt, entry, notice="Cancelled")
        raise
    approved = decision.action.startswith("approve")
    entry.update(decision=decision.action, approved=approved, who=_default_who(), when=_now_iso())
    if decision.note:
        entry["note"] = decision.note
    widget.close_prompt(prompt, entry)
    return decision


def _click_cannot_arrive() -> str | None:
    """Why no click can reach this prompt, when that is known before showing it: a cell in a
    kernel that queues widget messages behind the running cell awaits it (approval mode not
    ``live``, and not a background run)."""
    host = hosts.current()
    if host is None or not host.in_kernel or host.mode == "live" or control.in_background():
        return None
    if host.marimo:
        return (
            f"{host.kernel} hands a click to Python only while no cell runs, so an approval "
            "prompt in a cell that awaits the run could never be answered; the call was denied "
            "without asking. Start the run with `run = lf.nb.background(agent.invoke(session), "
            "widgets=[policy.widget])` as the cell's last expression and click while no cell "
            "runs; `await run` in a later cell gives the answer."
        )
    return (
        f"{hosts.why_not_live(host)}, so an "
        "approval prompt in a cell that awaits the run could never be answered; the call was "
        "denied without asking. Use `%%lf agent` (it runs in the background here and the cell "
        "returns at once), or start the run with `run = lf.nb.background(agent.invoke(...))` "
        "and click while no cell runs; `%lf doctor` explains."
    )


def _field_errors(exc: BaseException) -> list[dict[str, Any]] | None:
    """The per-argument problems behind a rejected edit (``ToolExecutionError
    .field_errors``: ``[{"loc": [...], "msg": ...}]``, no input values), so the prompt can
    show each at its field; ``None`` when the failure says nothing per field (the page then
    shows the whole message)."""
    cause: BaseException | None = exc
    for _ in range(8):  # a tool may wrap the validation error (``raise ... from``)
        if cause is None:
            return None
        if isinstance(cause, ToolExecutionError) and cause.field_errors:
            return cause.field_errors
        cause = cause.__cause__
    return None


def _describe(tool: Any) -> str:
    """The tool's description; an MCP tool says which server it comes from."""
    text = str(getattr(tool, "description", "") or "")
    server = getattr(tool, "mcp_server", None)
    return f"[MCP server {server}] {text}".rstrip() if server else text


def _default_who() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "notebook user"


def _run_key(session: Session) -> tuple[str, ...]:
    """The agent run a tool call belongs to: the session id and the run's node
    (``Session.run_node``)."""
    return (session.id, session.run_node.id)


def _log(
    session: Any,
    level: str,
    message: str,
    call_id: str,
    by: str,
    when: str | None = None,
    **extra: Any,
) -> None:
    log = getattr(session, "log", None)
    if callable(log):
        # a read-only or closed session view must not break the decision
        with contextlib.suppress(Exception):
            log(level, message, call_id=call_id, by=by, at=when or _now_iso(), **extra)
