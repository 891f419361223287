"""``%%lf`` and ``%lf``: run queries and agents from notebook cells.

Why an input transformer: a run may wait for a click (a tool approval). ipykernel ≥ 7.4
handles widget messages only while a cell is suspended at an ``await``, and IPython cell
magics are synchronous functions. So a cell starting with ``%%lf`` is rewritten *before* it
is compiled into one line of ordinary Python::

    await __import__('langfx_nb').nb.magics.run_cell_magic_async(
        'query --schema Answer', '<the cell body>', globals())

IPython's autoawait then runs that coroutine on the kernel's own event loop, like any other
top-level ``await``. Nothing blocks the loop; ``nest_asyncio`` and ``jupyter_ui_poll`` are not
used (both fail on ipykernel 7.x). The registered ``lf`` magic still exists, so ``%lf help``
and tab completion work; if the ``%%lf`` cell magic is ever reached directly (the
transformer bypassed), it explains that instead of blocking.

The cell body is a ``lf.Template``: ``{{name}}`` reads the notebook namespace, single braces
(code, JSON) are plain text.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import functools
import html
import os
import re
import shlex
import typing
from collections.abc import AsyncIterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from ..errors import LangFxError
from ..llms.base import LanguageModel
from ..template import Template

__all__ = [
    "APPROVE_ENV",
    "MarkdownText",
    "NotebookState",
    "run_cell_magic_async",
    "state",
    "transform_lf_cell",
    "use",
]

APPROVE_ENV = "LANGFX_NB_APPROVE"
"""When set (``deny``, ``allow`` or ``allow:add,search``), replaces every ``ask`` approval of
``%%lf agent`` — the unattended mode for headless runs (nbval, nbconvert, CI)."""

MAX_SESSIONS = 20  # the sessions of recent %%lf runs kept for %lf trace
ASK_TIMEOUT = 900.0  # default run deadline (s) when a person approves: 60 s is too short
_CELL_RE = re.compile(r"%%lf(?=\s|$)")


# ---------------------------------------------------------------------------------------------
# State shared by the magics of one kernel


@dataclass
class NotebookState:
    """What the notebook remembers between cells: the default model and the last runs."""

    lm: LanguageModel | None = None
    lm_name: str | None = None
    sessions: list[Any] = field(default_factory=list)

    @property
    def last_session(self) -> Any:
        return self.sessions[-1] if self.sessions else None


state = NotebookState()


def use(lm: LanguageModel | str, *, name: str | None = None) -> LanguageModel:
    """Make ``lm`` the model ``%%lf`` cells use when they have no ``--lm``.

    ``lm`` is a model or a registry id such as ``"fake:echo"``. Returns the model.
    """
    if isinstance(lm, str):
        name, lm = lm, _from_registry(lm)
    if not isinstance(lm, LanguageModel):
        raise TypeError(f"use() needs a LanguageModel, not {type(lm).__name__}")
    state.lm = lm
    state.lm_name = name
    return lm


def _from_registry(model_id: str) -> LanguageModel:
    from ..llms.registry import get

    try:
        return get(model_id)
    except ValueError as exc:
        raise UsageError(f"cannot resolve model {model_id!r}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Results


class MarkdownText(str):
    """A ``str`` that a notebook displays as Markdown: what ``%%lf query`` returns for text.

    Model text is untrusted, so HTML in it is shown as text (``<`` and ``&`` are escaped
    outside code spans and fences); Markdown emphasis, lists and code still render.
    """

    __slots__ = ()

    def _repr_markdown_(self) -> str:
        return escape_markdown_html(str(self))


_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def escape_markdown_html(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` everywhere except inside code fences and code spans.

    Markdown renderers pass raw HTML through (and entity references are decoded), so this
    is what keeps ``<img onerror=...>`` in a model answer visible as text. Inside code the
    renderer shows characters literally already, so escaping there would show ``&lt;``.
    """
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        m = _FENCE_RE.match(line)
        if fence is not None:
            out.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        out.append(_escape_outside_spans(line))
    return "".join(out)


def _escape_outside_spans(line: str) -> str:
    parts: list[str] = []
    pos = 0
    while pos < len(line):
        tick = line.find("`", pos)
        if tick < 0:
            break
        rest = line[tick:]
        run = len(rest) - len(rest.lstrip("`"))
        close = line.find("`" * run, tick + run)
        # A closing run must be exactly as long (CommonMark); otherwise it is literal text.
        while close >= 0 and line[close + run : close + run + 1] == "`":
            close = line.find("`" * run, close + run + 1)
        if close < 0:
            parts.append(_escape(line[pos : tick + run]))
            pos = tick + run
            continue
        parts.append(_escape(line[pos:tick]))
        parts.append(line[tick : close + run])
        pos = close + run
    parts.append(_escape(line[pos:]))
    return "".join(parts)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _present(value: Any) -> Any:
    return MarkdownText(value) if type(value) is str else value


# ---------------------------------------------------------------------------------------------
# The input transformer


def transform_lf_cell(lines: list[str]) -> list[str]:
    """IPython cleanup transform: a ``%%lf ...`` cell becomes one awaited call.

    Other cells pass through unchanged. The result is a single line, so a traceback's line 1
    points at the ``%%lf`` line of the cell the user wrote.
    """
    if not lines or not _CELL_RE.match(lines[0]):
        return lines
    line = lines[0][len("%%lf") :].strip()
    body = "".join(lines[1:])
    from IPython import get_ipython

    ip = get_ipython()
    if ip is not None and not getattr(ip, "autoawait", True):
        call = "__import__('langfx_nb').nb.magics._autoawait_off()"
        return [call + "\n"]
    call = (
        f"await __import__('langfx_nb').nb.magics.run_cell_magic_async({line!r}, {body!r}, "
        "globals())"
    )
    return [call + "\n"]


# Not run by IPython's check_complete, so a terminal still treats %%lf as a cell magic
# (a blank line ends it) instead of parsing the rewritten source.
transform_lf_cell.has_side_effects = True  # type: ignore[attr-defined]


def _autoawait_off() -> NoReturn:
    raise UsageError("%%lf cells need top-level await: run `%autoawait on` first")


# ---------------------------------------------------------------------------------------------
# Option parsing


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (a short message in the notebook) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or self.format_usage().strip())


def _query_parser() -> _Parser:
    p = _Parser(prog="%%lf query", add_help=False, allow_abbrev=False)
    p.add_argument("--lm", metavar="VAR", help="model variable (default: %%lf use / lf.nb.use)")
    p.add_argument("--schema", metavar="TYPE", help="answer type from the namespace")
    p.add_argument("-o", "--out", metavar="VAR", help="also store the result in VAR")
    p.add_argument("--protocol", choices=("python", "json"), default="python")
    p.add_argument("--stream", action="store_true", help="show the answer as it streams")
    p.add_argument("--system", metavar="TEXT", help="system message")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--returns-message", action="store_true", help="return the Message")
    return p


def _agent_parser() -> _Parser:
    p = _Parser(prog="%%lf agent", add_help=False, allow_abbrev=False)
    p.add_argument("--lm", metavar="VAR", help="model variable (default: %%lf use / lf.nb.use)")
    p.add_argument("--tools", metavar="A,B", default="", help="tools from the namespace")
    p.add_argument(
        "--approve",
        metavar="MODE",
        default="ask",
        help="ask | deny | allow | allow:add,search (default ask)",
    )
    p.add_argument("--instructions", metavar="TEXT", help="system instructions for the agent")
    p.add_argument("--max-steps", type=int, help="model steps (default 8)")
    p.add_argument("--max-tool-calls", type=int, help="tool calls (default 12)")
    p.add_argument(
        "--timeout", type=float, help="seconds for the whole run (default 60; 900 with ask)"
    )
    p.add_argument("-o", "--out", metavar="VAR", help="also store the answer in VAR")
    p.add_argument("--no-trace", action="store_true", help="do not show the live trace")
    return p


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%lf: cannot parse options: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Resolving names against the notebook namespace


def _resolve_lm(name: str | None, ns: Mapping[str, Any]) -> LanguageModel:
    if name is None:
        if state.lm is None:
            raise UsageError(
                "no model: pass --lm VAR, or set a default with `%lf use VAR` or lf.nb.use(lm)"
            )
        return state.lm
    if name in ns:
        value = ns[name]
        if not isinstance(value, LanguageModel):
            raise UsageError(f"--lm {name}: {name} is a {type(value).__name__}, not a model")
        return value
    if ":" in name:
        return _from_registry(name)
    raise UsageError(f"--lm {name}: no variable named {name!r} in the notebook")


_TYPE_NODES = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Tuple,
    ast.Constant,
    ast.BinOp,
    ast.BitOr,
    ast.Load,
)


def resolve_type(expr: str, ns: Mapping[str, Any]) -> Any:
    """A type named in an option: ``Answer``, ``list[Item]``, ``Literal['a', 'b']``, ``int | None``.

    Only names, attributes, subscripts, ``|`` and constants are accepted, looked up in the
    notebook namespace, then builtins and ``typing``; nothing is evaluated as code.
    """
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        raise UsageError(f"--schema {expr}: not a type expression") from None
    for node in ast.walk(tree):
        if not isinstance(node, _TYPE_NODES):
            raise UsageError(f"--schema {expr}: only names like Answer or list[Item] are allowed")

    def build(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            for scope in (ns, vars(builtins), vars(typing)):
                if node.id in scope:
                    return scope[node.id]
            raise UsageError(f"--schema {expr}: no type named {node.id!r} in the notebook")
        if isinstance(node, ast.Attribute):
            base = build(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise UsageError(f"--schema {expr}: {node.attr!r} not found") from None
        if isinstance(node, ast.Subscript):
            args = node.slice
            items = args.elts if isinstance(args, ast.Tuple) else [args]
            built = tuple(build(a) for a in items)
            return build(node.value)[built if len(built) > 1 else built[0]]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return build(node.left) | build(node.right)
        raise UsageError(f"--schema {expr}: unsupported syntax")

    return build(tree.body)


def _template_vars(template: Template, ns: Mapping[str, Any]) -> dict[str, Any]:
    return {name: ns[name] for name in template.variables if name in ns}


def _template(body: str) -> Template:
    if not body.strip():
        raise UsageError("%%lf: the cell body (the prompt) is empty")
    return Template(body)


# ---------------------------------------------------------------------------------------------
# The coroutine the rewritten cell awaits


async def run_cell_magic_async(line: str, body: str, ns: MutableMapping[str, Any]) -> Any:
    """Run one ``%%lf`` cell on the running event loop; the return value is the cell's value.

    Our own errors (``LangFxError``) display as one short line (``Type: message``) instead of
    a traceback through the library's internals; anything else shows its full traceback.
    """
    __tracebackhide__ = True
    args = _split(line)
    if not args:
        raise UsageError("%%lf needs a command: `%%lf query` or `%%lf agent` (see %lf help)")
    command, rest = args[0], args[1:]
    from . import control

    try:
        with control.track(label=f"%%lf {command}"):
            if command == "query":
                return await _run_query(rest, body, ns)
            if command == "agent":
                return await _run_agent(rest, body, ns)
    except LangFxError as exc:
        # Shown as one line (type: message); the full traceback stays on the exception for
        # %debug. IPython renders an exception through `_render_traceback_` when it has one.
        exc._render_traceback_ = functools.partial(_short_traceback, exc, command)  # type: ignore[attr-defined]
        raise
    if command in _LINE_COMMANDS:
        raise UsageError(f"`{command}` is a line command: write `%lf {command} ...`")
    raise UsageError(f"%%lf: unknown command {command!r}; use query or agent (see %lf help)")


def _short_traceback(exc: BaseException, command: str) -> list[str]:
    red, reset = "\x1b[0;31m", "\x1b[0m"
    return [
        f"{red}{type(exc).__name__}{reset}: {exc}",
        f"(raised by %%lf {command}; run %debug to inspect the full traceback)",
    ]


def _sampling(opts: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if opts.temperature is not None:
        out["temperature"] = opts.temperature
    if opts.max_tokens is not None:
        out["max_tokens"] = opts.max_tokens
    return out


async def _run_query(argv: Sequence[str], body: str, ns: MutableMapping[str, Any]) -> Any:
    opts = _query_parser().parse_args(argv)
    lm = _resolve_lm(opts.lm, ns)
    schema = resolve_type(opts.schema, ns) if opts.schema else None
    template = _template(body)
    kwargs: dict[str, Any] = dict(
        lm=lm,
        vars=_template_vars(template, ns),
        protocol=opts.protocol,
        system_message=opts.system,
        **_sampling(opts),
    )
    # A session per cell: `%lf trace` then shows the prompt, raw response, parsed value or
    # error of the last query, which is how a failed typed query is debugged.
    from ..agentic import Session

    session = _remember(Session(lm))
    try:
        if opts.stream:
            value = await _stream_query(session, template, schema, opts.returns_message, kwargs)
        else:
            value = await session.query(
                template, schema, returns_message=opts.returns_message, **kwargs
            )
    finally:
        await session.dispose()
    value = _present(value)
    if opts.out:
        ns[opts.out] = value
    return value


async def _stream_query(
    session: Any, template: Template, schema: Any, returns_message: bool, kwargs: dict[str, Any]
) -> Any:
    from .stream_view import StreamView

    if returns_message and schema is None:
        raise UsageError("--returns-message with --stream needs --schema (text streams as str)")
    seen: list[Any] = []

    async def events() -> AsyncIterator[Any]:
        async for event in session.query_stream(template, schema, **kwargs):
            if getattr(event, "type", None) == "generation_complete":
                seen.append(event.message)
            yield event

    value = await StreamView().consume(events())
    return seen[-1] if returns_message and seen else value


def _remember(session: Any) -> Any:
    state.sessions.append(session)
    del state.sessions[:-MAX_SESSIONS]
    return session


def _approval(mode: str, tools: Sequence[Any]) -> Any:
    """``--approve`` → an ``ApprovalPolicy``; ``$LANGFX_NB_APPROVE`` replaces ``ask``."""
    from .approval import ApprovalPolicy

    if mode == "ask" and os.environ.get(APPROVE_ENV):
        mode = os.environ[APPROVE_ENV].strip()
    if mode == "ask":
        return ApprovalPolicy(mode="ask", tools=tools)
    if mode == "deny":
        return ApprovalPolicy(mode="deny", tools=tools)
    if mode == "allow":
        return ApprovalPolicy(mode="allow", allow=[t.name for t in tools], tools=tools)
    if mode.startswith("allow:"):
        names = [n.strip() for n in mode[len("allow:") :].split(",") if n.strip()]
        return ApprovalPolicy(mode="allow", allow=names, tools=tools)
    raise UsageError(f"--approve {mode}: expected ask, deny, allow or allow:NAME,NAME")


async def _run_agent(argv: Sequence[str], body: str, ns: MutableMapping[str, Any]) -> Any:
    from IPython.display import display

    from ..agentic import Agent, AgentLimits, Session, Tool
    from .trace_explorer import TraceExplorer

    opts = _agent_parser().parse_args(argv)
    lm = _resolve_lm(opts.lm, ns)
    tools: list[Tool[Any, Any]] = []
    for name in (n.strip() for n in opts.tools.split(",")):
        if not name:
            continue
        if name not in ns:
            raise UsageError(f"--tools: no variable named {name!r} in the notebook")
        if not isinstance(ns[name], Tool):
            raise UsageError(f"--tools: {name} is not a tool (make it with @lf.tool)")
        tools.append(ns[name])
    template = _template(body)
    prompt = template.render(_template_vars(template, ns))
    policy = _approval(opts.approve, tools)
    timeout = opts.timeout
    if timeout is None and policy.mode == "ask":
        timeout = ASK_TIMEOUT  # waiting for a person counts against the run's deadline
    limits = {
        k: v
        for k, v in (
            ("max_steps", opts.max_steps),
            ("max_tool_calls", opts.max_tool_calls),
            ("max_execution_time", timeout),
        )
        if v is not None
    }
    try:
        agent_limits = AgentLimits(**limits) if limits else None
    except ValueError as exc:
        raise UsageError(f"%%lf agent: {exc}") from None
    agent = Agent(
        prompt,
        instructions=opts.instructions,
        tools=tools,
        limits=agent_limits,
        allow_tool=policy,
    )
    session = _remember(Session(lm))
    explorer = None
    if not opts.no_trace:
        first = body.strip().splitlines()[0]
        title = f"%%lf agent · {first if len(first) <= 60 else first[:57] + '...'}"
        explorer = TraceExplorer(session, title=title)
        display(explorer)  # type: ignore[no-untyped-call]
    try:
        answer = await agent.invoke(session)
    finally:
        # Ends the trace's root node (so the explorer shows the run finished) and drops the
        # observers; the trace stays readable for `%lf trace`.
        await session.dispose()
        if explorer is not None:
            explorer.flush()
    value = _present(answer)
    if opts.out:
        ns[opts.out] = value
    return value


# ---------------------------------------------------------------------------------------------
# Line commands: %lf use | trace | models | help


_HELP = """\
%%lf query [options]      the cell body is a prompt template; {{name}} reads the notebook
    --lm VAR              model variable or registry id (default: %lf use / lf.nb.use)
    --schema TYPE         answer type: Answer, list[Item], int, Literal['a','b'] ...
    -o, --out VAR         also store the result in VAR
    --protocol python|json  structured-answer protocol (default python)
    --stream              show the answer live as it streams (text or fields)
    --system TEXT         system message
    --temperature T, --max-tokens N, --returns-message (return the whole Message)
%%lf agent [options]      run a tool-using agent on the cell body, with a live trace
    --tools add,search    tools from the notebook (made with @lf.tool)
    --approve MODE        ask (click to approve, default) | deny | allow | allow:add,search
                          $LANGFX_NB_APPROVE replaces `ask` for headless runs
    --timeout S           deadline for the whole run (default 60 s; 900 s when asking)
    --instructions TEXT, --max-steps N, --max-tool-calls N, -o VAR, --no-trace
%lf use VAR               default model for %%lf cells (a variable or an id like fake:echo)
%lf trace [SESSION]       trace explorer on the last %%lf run, or on SESSION
%lf models                the default model, models in the notebook, provider keys present
%lf cancel                cancel running %%lf runs and waiting approvals (see docs/notebook.md)
%lf help                  this text
"""

_LINE_COMMANDS = ("use", "trace", "models", "cancel", "help")

_KEY_VARS = {
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
}


def _line_command(line: str, ns: MutableMapping[str, Any]) -> Any:
    args = _split(line)
    if not args or args[0] == "help":
        print(_HELP, end="")
        return None
    command, rest = args[0], args[1:]
    if command == "use":
        if len(rest) != 1:
            raise UsageError("usage: %lf use VAR (a model variable or an id like fake:echo)")
        name = rest[0]
        model = _resolve_lm(name, ns)
        use(model, name=name)
        return None
    if command == "trace":
        if len(rest) > 1:
            raise UsageError("usage: %lf trace [SESSION]")
        if rest:
            if rest[0] not in ns:
                raise UsageError(f"%lf trace: no variable named {rest[0]!r} in the notebook")
            session = ns[rest[0]]
        else:
            session = state.last_session
            if session is None:
                raise UsageError("%lf trace: no %%lf run yet; pass a session: %lf trace S")
        from .trace_explorer import TraceExplorer

        return TraceExplorer(session)
    if command == "models":
        print(_models_text(ns), end="")
        return None
    if command == "cancel":
        from .control import cancel

        n = cancel("the run was cancelled with %lf cancel")
        print(f"cancelled {n} run{'s' if n != 1 else ''}")
        return None
    if command in ("query", "agent"):
        raise UsageError(f"`{command}` is a cell command: start the cell with `%%lf {command}`")
    raise UsageError(f"%lf: unknown command {command!r} (see %lf help)")


def _models_text(ns: Mapping[str, Any]) -> str:
    lines = []
    if state.lm is None:
        lines.append("default model: none (set one with %lf use VAR)")
    else:
        label = f" ({state.lm_name})" if state.lm_name else ""
        lines.append(f"default model: {state.lm!r}{label}")
    found = sorted(
        (k, v) for k, v in ns.items() if not k.startswith("_") and isinstance(v, LanguageModel)
    )
    if found:
        lines.append("models in the notebook:")
        lines.extend(f"  {k} = {v!r}" for k, v in found)
    lines.append("provider keys in the environment (values never shown):")
    for provider, names in _KEY_VARS.items():
        present = [n for n in names if os.environ.get(n)]
        lines.append(f"  {provider}: {', '.join(present) if present else 'not set'}")
    return "\n".join(lines) + "\n"


@magics_class
class LfMagics(Magics):
    """The registered ``lf`` magic: line commands run here; cells go through the transformer."""

    @line_cell_magic
    def lf(self, line: str, cell: str | None = None) -> Any:
        __tracebackhide__ = True
        if cell is not None:
            raise UsageError(
                "%%lf runs as top-level async code through an input transformer, which did "
                "not handle this cell. Put %%lf on the first line of the cell and keep "
                "`%autoawait` on; it cannot be called via run_cell_magic or nested in "
                "another cell magic."
            )
        assert self.shell is not None
        return _line_command(line, self.shell.user_ns)


def _complete(ip: Any, event: Any) -> list[str]:
    words = event.line.split()
    cell = bool(words) and words[0].startswith("%%")
    if len(words) == 1 or (len(words) == 2 and not event.line.endswith(" ")):
        return ["query", "agent"] if cell else list(_LINE_COMMANDS)
    command = words[1] if len(words) > 1 else ""
    if cell and command in ("query", "agent"):
        parser = _query_parser() if command == "query" else _agent_parser()
        return [a for a in parser._option_string_actions if a.startswith("--")]
    if command in ("use", "trace"):
        return [k for k in ip.user_ns if not k.startswith("_")]
    return []


def register(ip: Any) -> None:
    """Install the transformer, the ``lf`` magic and option completion (idempotent)."""
    cleanup = ip.input_transformers_cleanup
    if transform_lf_cell not in cleanup:
        cleanup.append(transform_lf_cell)
    # IPython ships a shell alias `%lf` (ls -F -l | grep ^-); ours replaces it, and dropping it
    # from the defaults keeps `%reset` from logging "Invalid alias" when it re-adds aliases.
    aliases = ip.alias_manager
    aliases.default_aliases = [a for a in aliases.default_aliases if a[0] != "lf"]
    ip.register_magics(LfMagics)
    for key in ("%lf", "%%lf"):
        ip.set_hook("complete_command", _complete, str_key=key)
