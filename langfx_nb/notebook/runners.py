"""What a ``%%lf query`` or ``%%lf agent`` cell does once its options are parsed.

Each run gets its own ``Session`` (kept for ``%lf trace``), so a failed typed query can be
debugged from its prompt, raw response and error. The value returned is the cell's value:
text comes back as :class:`~langfx_nb.notebook.markdown.MarkdownText`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping, Sequence
from typing import Any

from IPython.core.error import UsageError

from ..template import Template
from . import hosts, options
from .kernel_state import new_session
from .markdown import present

__all__ = ["ASK_TIMEOUT", "run_agent", "run_query"]

ASK_TIMEOUT = 900.0  # default run deadline (s) when a person approves: 60 s is too short


async def run_query(argv: Sequence[str], body: str, ns: MutableMapping[str, Any]) -> Any:
    """``%%lf query``: the cell body as a prompt; returns the (typed) answer."""
    opts = options.query_parser().parse_args(argv)
    lm = options.resolve_lm(opts.lm, ns)
    schema = options.resolve_type(opts.schema, ns) if opts.schema else None
    template = options.template(body)
    kwargs: dict[str, Any] = dict(
        lm=lm,
        vars=options.template_vars(template, ns),
        protocol=opts.protocol,
        system_message=opts.system,
        **options.sampling(opts),
    )
    if opts.repair:
        kwargs["repair"] = opts.repair
    session = new_session(lm)
    try:
        if opts.stream:
            value = await _stream_query(session, template, schema, opts.returns_message, kwargs)
        else:
            value = await session.query(
                template, schema, returns_message=opts.returns_message, **kwargs
            )
    finally:
        await session.dispose()
    value = present(value)
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
            kind = getattr(event, "type", None)
            if kind == "generation_complete":
                seen.append(event.message)
            elif kind == "parsing_failed":
                event = _as_query_failure(event)
            yield event

    first = template.text.strip().splitlines()[0] if template.text.strip() else ""
    title = f"%%lf query --stream · {first if len(first) <= 60 else first[:57] + '...'}"
    value = await StreamView(schema=schema, title=title).consume(events())
    return seen[-1] if returns_message and seen else value


def _as_query_failure(event: Any) -> Any:
    """A stream's parse failure as the error ``%%lf query`` without ``--stream`` raises:
    the notebook shows one wording for one answer (``ParsingFailed.query_error``, whose
    cause is the stream parser's error)."""
    from ..structured.events import ParsingFailed

    if event.query_error is event.error:
        return event
    return ParsingFailed(event.query_error, event.text)


async def run_agent(argv: Sequence[str], body: str, ns: MutableMapping[str, Any]) -> Any:
    """``%%lf agent``: a tool-using agent on the cell body, with a live trace explorer."""
    from IPython.display import display

    from ..agentic import Agent, AgentLimits, Tool
    from .trace_explorer import TraceExplorer

    opts = options.agent_parser().parse_args(argv)
    lm = options.resolve_lm(opts.lm, ns)
    tools: list[Tool[Any, Any]] = []
    for name in (n.strip() for n in opts.tools.split(",")):
        if not name:
            continue
        if name not in ns:
            raise UsageError(f"--tools: no variable named {name!r} in the notebook")
        if not isinstance(ns[name], Tool):
            raise UsageError(f"--tools: {name} is not a tool (make it with @lf.tool)")
        tools.append(ns[name])
    template = options.template(body)
    prompt = template.render(options.template_vars(template, ns))
    policy = options.approval_policy(opts.approve, tools)
    timeout = opts.timeout
    if timeout is None and policy.mode == "ask" and not opts.suspend:
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
        raise UsageError(f"%%lf agent: {exc}") from exc
    asks = policy.mode == "ask" and not opts.suspend
    mode = hosts.approval_mode()
    if asks and mode == "suspend":
        print(hosts.meaning("suspend"))
    suspend = opts.suspend or (asks and mode == "suspend")
    if suspend:  # calls that need a person end the run: `%lf resume` continues it
        from .suspended import suspend_policy

        policy = suspend_policy(policy)
    agent = Agent(
        prompt,
        instructions=opts.instructions,
        tools=tools,
        limits=agent_limits,
        allow_tool=policy,
    )
    session = new_session(lm)
    explorer = None
    first = next(iter(body.strip().splitlines()), "")
    short = first if len(first) <= 60 else first[:57] + "..."
    if not opts.no_trace:
        explorer = TraceExplorer(session, title=f"%%lf agent · {short}")
    if asks and mode == "background":
        return _in_background(agent, session, explorer, policy, ns, opts.out, short)
    if explorer is not None:
        display(explorer)  # type: ignore[no-untyped-call]
    answer = await _invoke(agent, session, explorer, suspend)
    if not isinstance(answer, str):  # suspended: a RunState
        from .suspended import saved

        state = saved(answer, ns, opts.out)
        host = hosts.current()
        if host is not None and host.loop_between_cells:  # buttons that resume it
            from .resume_buttons import offer

            display(offer(state, ns, opts.out, opts.lm))  # type: ignore[no-untyped-call]
        return state
    value = present(answer)
    if opts.out:
        ns[opts.out] = value
    return value


async def _invoke(agent: Any, session: Any, explorer: Any, suspend: bool) -> Any:
    try:
        return await agent.invoke(session, on_approval="suspend" if suspend else "policy")
    finally:
        # Ends the trace's root node (so the explorer shows the run finished) and drops the
        # observers; the trace stays readable for `%lf trace`.
        await session.dispose()
        if explorer is not None:
            explorer.flush()


def _in_background(
    agent: Any,
    session: Any,
    explorer: Any,
    policy: Any,
    ns: MutableMapping[str, Any],
    out: str | None,
    title: str,
) -> Any:
    """Approval mode ``background``: the run as a task between cells; the cell's value is its
    handle, drawn as the prompt and the trace (``background``)."""
    from . import control
    from .background import background

    widget = policy.widget
    policy.display = lambda _widget: None  # the handle shows the prompt in this cell
    label = f"%%lf agent · {title}"

    async def tracked() -> Any:  # Cancel run and %lf cancel reach it at every step
        with control.track(session, label=label):
            return await _invoke(agent, session, explorer, False)

    return background(  # the prompt among its widgets: a cell awaiting the run stops when it asks
        tracked(),
        label=label,
        widgets=[w for w in (widget, explorer) if w is not None],
        out=out,
        ns=ns,
        present=present,
    )
