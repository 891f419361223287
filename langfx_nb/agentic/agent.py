"""Agent: a bounded tool-using loop, run as an ``Action[str]``.

Each step asks the model (a traced query node) with the transcript and the tool specs. A
reply without tool calls ends the run with its text. A reply with tool calls is checked as
a whole batch *before anything runs*: a model step must remain to read the results, the
tool-call budget must cover the batch, every call must name a registered tool, carry an id
unique in that reply (servers may number calls per reply, so a later turn may reuse an id:
each call is keyed by its step and id) and valid arguments, and then pass the
``allow_tool`` policy. Only then do the tools run (in call order, or concurrently with
``parallel_tools=True``), each as a ``tool_call`` trace node (``metadata.step``: the step
that asked); their outputs are validated and sent back as strict-JSON ``ToolMessage``s
correlated by call id. Tools are never retried, so side effects never
repeat.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from ..errors import (
    BudgetExceededError,
    EmptyGenerationError,
    ExecutionTimeoutError,
    InvalidRunStateError,
    MappingError,
    RunSuspended,
    ToolDeniedError,
    ToolExecutionError,
)
from ..messages import (
    ComplexMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResultPart,
    UserMessage,
)
from ..structured.mapping import Mapping as StructuredMapping
from ..structured.mapping import Repairs, check_repair
from .action import Action
from .budget import Budget
from .fanout import settle_first_failure
from .limits import AgentLimits
from .query_node import TranscriptPreview
from .runstate import (
    RunState,
    agent_config,
    compact_trace,
    rebuild_agent,
    restore_session,
    transcript_json,
)
from .runstate_records import BatchCall, Key, RunProgress, SavedDecision
from .session import Session, Tracked
from .tools import Tool
from .trace import OPEN_STATUSES

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .usage import Price

__all__ = ["Agent", "AgentLimits", "Approve", "Deny", "PolicyDecision", "ToolPolicy"]


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call; with ``args`` run it with these arguments instead (re-validated)."""

    args: Mapping[str, Any] | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Skip the call and tell the model why, as that call's result; the run goes on."""

    message: str = "The user declined this tool call."
    by: str | None = None


PolicyDecision = bool | Approve | Deny
ToolPolicy = Callable[[ToolCall, Session], PolicyDecision | Awaitable[PolicyDecision]]


@dataclass(slots=True)
class _Planned:
    call: ToolCall
    tool: Tool[Any, Any]
    args: Any
    tracked: Tracked[Session]  # the call's tool_call node, started when it is decided
    deny: str | None = None
    pending: bool = False  # suspend mode: waiting for a person's decision
    decided: dict[str, Any] | None = None  # the decision as JSON (kept in a RunState)


@dataclass(slots=True)
class _Run:
    """What one run has done so far; all of it goes into a ``RunState``."""

    transcript: list[Message[Any]]
    repairs: Repairs  # final answers that failed to parse (``output=``)
    steps: int = 0
    calls_used: int = 0
    agent_nodes: list[str] = dataclasses.field(default_factory=list)  # earlier suspended parts

    @classmethod
    def from_state(cls, state: RunState, transcript: list[Message[Any]], repair: int) -> _Run:
        progress = state.progress
        return cls(
            transcript,
            Repairs(repair, progress.repairs),
            progress.steps,
            progress.tool_calls,
            agent_nodes=list(progress.agent_nodes),
        )


OnApproval = Literal["policy", "suspend"]


class Agent(Action[str]):
    """``await lf.Agent(prompt, tools=[...]).invoke(lm=lm)`` returns the final answer text.

    Errors (each also the outcome of the agent's trace node): ``ToolDeniedError`` when the
    policy returns ``False`` or fails; ``BudgetExceededError`` when steps or tool calls run
    out; ``ToolExecutionError`` for unknown tools, duplicate ids, bad arguments, a tool that
    raises (chained from its exception) or bad output; ``EmptyGenerationError`` for an empty
    reply; ``ExecutionTimeoutError`` on the deadline; cancellation propagates unchanged.
    """

    name = "Agent"
    #: Per-run switches, set on a shallow copy of the agent by ``invoke``/``resume`` (the
    #: agent object itself stays configuration only).
    _on_approval: OnApproval = "policy"
    _resume: tuple[RunState, Mapping[str, PolicyDecision], list[Message[Any]]] | None = None

    def __init__(
        self,
        prompt: str | Message[Any],
        instructions: str | None = None,
        tools: Sequence[Tool[Any, Any]] = (),
        limits: AgentLimits | None = None,
        allow_tool: ToolPolicy | None = None,
        parallel_tools: bool = False,
        *,
        stream: bool = False,
        name: str | None = None,
        output: Any = None,
        repair: int = 0,
        protocol: str = "json",
    ) -> None:
        self.prompt = prompt
        self.instructions = instructions
        self.tools: dict[str, Tool[Any, Any]] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise TypeError(f"not a Tool: {t!r} (use lf.Tool or @lf.tool)")
            if t.name in self.tools:
                raise ValueError(f"tool names must be unique: {t.name!r} appears twice")
            self.tools[t.name] = t
        self.limits = limits or AgentLimits()
        self.allow_tool = allow_tool
        self.parallel_tools = parallel_tools
        self.stream = stream
        if name is not None:
            self.name = name
        check_repair(repair)
        if repair and output is None:
            raise TypeError("repair= needs output= (a text answer cannot fail to parse)")
        self.output = output
        self.repair = repair
        self.protocol = protocol
        # With ``output``, the prompt is framed by the protocol (format instructions, the
        # answer's type) and the final answer is parsed and validated like ``lf.query``'s.
        self._mapping: StructuredMapping | None = None
        if output is not None:
            request = prompt if isinstance(prompt, Message) else UserMessage(prompt)
            self._mapping = StructuredMapping(request, output, protocol=protocol)

    @property
    def output_name(self) -> str | None:
        """The answer type's name (``output=``), or None for a text answer."""
        return self._mapping.schema.name if self._mapping is not None else None

    def trace_inputs(self) -> Any:
        return {
            "prompt": self.prompt,
            "instructions": self.instructions,
            "tools": list(self.tools),
            "limits": {
                "max_steps": self.limits.max_steps,
                "max_tool_calls": self.limits.max_tool_calls,
                "max_execution_time": self.limits.max_execution_time,
                **self.limits.budget.to_json(),
            },
            "parallel_tools": self.parallel_tools,
            **({"output": self._mapping.schema.name} if self._mapping is not None else {}),
            **({"repair": self.repair} if self.repair else {}),
        }

    @overload
    async def invoke(
        self,
        session: Session | None = None,
        *,
        lm: LanguageModel | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        on_approval: Literal["policy"] = "policy",
        **defaults: Any,
    ) -> str: ...

    @overload
    async def invoke(
        self,
        session: Session | None = None,
        *,
        lm: LanguageModel | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        on_approval: OnApproval,
        **defaults: Any,
    ) -> str | RunState: ...

    async def invoke(
        self,
        session: Session | None = None,
        *,
        lm: LanguageModel | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        on_approval: OnApproval = "policy",
        **defaults: Any,
    ) -> str | RunState:
        """As ``Action.invoke``; the deadline is the shorter of the limits' and this one, and
        each token/cost limit the smaller of the limits' and ``budget``'s.

        ``on_approval="suspend"``: a tool call that ``allow_tool`` does not decide (no
        policy, or the policy returns ``None``) suspends the run before anything in that
        step's batch runs, and a ``RunState`` is returned instead of the answer; continue
        with ``Agent.resume(state, decisions={call_id: lf.Approve() | lf.Deny(...)})``.
        """
        if on_approval not in ("policy", "suspend"):
            raise ValueError(f"on_approval must be 'policy' or 'suspend', not {on_approval!r}")
        runner = self
        if on_approval != self._on_approval:
            runner = copy.copy(self)
            runner._on_approval = on_approval
        owned = session is None and on_approval == "suspend"
        if session is None and owned:
            session, lm = Session(lm), None
        try:
            return await runner._invoke(
                session, lm, max_execution_time, budget, on_approval, defaults
            )
        finally:
            if owned and session is not None:
                await session.dispose()

    async def _invoke(
        self,
        session: Session | None,
        lm: LanguageModel | None,
        max_execution_time: float | None,
        budget: Budget | None,
        on_approval: OnApproval,
        defaults: dict[str, Any],
    ) -> str | RunState:
        limit = self.limits.max_execution_time
        if max_execution_time is not None:
            limit = max_execution_time if limit is None else min(limit, max_execution_time)
        try:
            return await Action.invoke(
                self,
                session,
                lm=lm,
                max_execution_time=limit,
                budget=self.limits.budget.tighter(budget),
                **defaults,
            )
        except RunSuspended as suspended:
            state: RunState = suspended.state
            if on_approval != "suspend":
                raise
            if session is not None:
                trace = session.trace_json()
                if state.progress.repairs < 2:  # else earlier failed answers were dropped
                    compact_trace(trace, state.transcript_json, set(state.progress.agent_nodes))
                from .otel import traceparent  # (no OpenTelemetry import unless exported)

                # The resumed run continues this run's trace (parent: None when unexported).
                parent = traceparent(session, state.node_id)
                state = dataclasses.replace(state, trace=trace, traceparent=parent)
            return state

    # -- the loop ------------------------------------------------------------------------
    async def call(self, session: Session) -> Any:
        resume = self._resume
        if resume is None:
            transcript: list[Message[Any]] = []
            if self.instructions:
                transcript.append(SystemMessage(self.instructions))
            if self._mapping is not None:
                transcript.append(self._mapping.render())
            else:
                transcript.append(
                    self.prompt if isinstance(self.prompt, Message) else UserMessage(self.prompt)
                )
            run = _Run(transcript, Repairs(self.repair))
        else:
            state, decisions, transcript = resume
            run = _Run.from_state(state, transcript, self.repair)
            session.node.metadata["resumed_from"] = state.node_id
            if state.traceparent is not None:  # its span, where it was exported
                session.node.metadata["resumed_traceparent"] = state.traceparent
            used = state.progress.budget_used
            if used and session.budget_scope is not None:
                session.budget_scope.restore(used)
            planned = await self._decide_resumed(state, decisions, run, session)
            try:  # every call is decided and none has run: from here it is resumed
                state.consume()
            except RuntimeError as exc:
                _abandon(planned, exc)
                raise
            run.calls_used += len(planned)
            session.node.metadata["tool_calls"] = run.calls_used
            run.transcript.extend(await self._execute(planned, session))
        return await self._loop(run, session)

    async def _loop(self, run: _Run, session: Session) -> Any:
        specs = [t.spec for t in self.tools.values()]
        options: dict[str, Any] = {"tools": specs} if specs else {}
        transcript = run.transcript
        limits = self.limits
        stats = session.node.metadata
        shown = TranscriptPreview(session.max_text_chars)
        for step in range(run.steps, limits.max_steps):
            stats["steps"] = run.steps = step + 1
            prompt: ComplexMessage[Any] = ComplexMessage(transcript)
            response = await session.generate(
                prompt,
                name=f"step {step + 1}",
                stream=self.stream,
                shown_prompt=shown(prompt),
                **options,
            )
            transcript.append(response)
            calls = response.tool_calls
            if not calls:
                if not response.text.strip():
                    raise EmptyGenerationError("the model replied with neither text nor tool calls")
                if self._mapping is None:
                    return response.text
                try:
                    return self._mapping.finish(response).result
                except MappingError as exc:
                    retry = run.repairs.failed(exc, more=step + 1 < limits.max_steps)
                    session.log(
                        "warning",
                        f"the answer did not parse (attempt {run.repairs.used})",
                        error=str(exc),
                        step=step + 1,
                    )
                    if not retry:
                        raise
                    _drop_earlier_repair(transcript)
                    transcript.append(Repairs.request(exc))
                    continue
            if step + 1 >= limits.max_steps:
                raise BudgetExceededError(
                    f"no model step left to read tool results (max_steps={limits.max_steps})",
                    budget="max_steps",
                    limit=limits.max_steps,
                    used=step + 1,
                )
            if run.calls_used + len(calls) > limits.max_tool_calls:
                raise BudgetExceededError(
                    f"the model asked for {len(calls)} tool call(s) with "
                    f"{limits.max_tool_calls - run.calls_used} left (max_tool_calls="
                    f"{limits.max_tool_calls})",
                    budget="max_tool_calls",
                    limit=limits.max_tool_calls,
                    used=run.calls_used + len(calls),
                )
            turn_ids: set[str] = set()  # ids are unique within one reply
            validated = [self._validate(call, turn_ids, session, step + 1) for call in calls]
            planned = await self._decide(validated, session, step + 1)
            if self._on_approval == "suspend" and any(e.pending for e in planned):
                raise self._suspend(planned, run, session)
            run.calls_used += len(calls)
            stats["tool_calls"] = run.calls_used
            transcript.extend(await self._execute(planned, session))
        raise BudgetExceededError(
            f"model-step limit reached (max_steps={limits.max_steps})",
            budget="max_steps",
            limit=limits.max_steps,
            used=limits.max_steps,
        )

    # -- suspend and resume --------------------------------------------------------------
    def _suspend(self, planned: list[_Planned], run: _Run, session: Session) -> RunSuspended:
        """End the batch's nodes as ``suspended`` (nothing ran) and capture the run."""
        batch = []
        for entry in planned:
            batch.append(BatchCall(entry.call, None if entry.pending else _saved(entry.decided)))
            entry.tracked.node.metadata["executed"] = False
            entry.tracked.end("suspended")
        scope = session.budget_scope
        state = RunState(
            RunState.new_id(),
            datetime.datetime.now(datetime.UTC).isoformat(),
            session.node.id,
            agent_config(self),
            tuple(transcript_json(m) for m in run.transcript),
            tuple(batch),
            RunProgress(
                run.steps,
                run.calls_used,
                run.repairs.used,
                scope.used() if scope is not None else None,
                (*run.agent_nodes, session.node.id),
            ),
            verified=True,  # made here: its saved decisions are this process's own
            messages=tuple(run.transcript),
        )
        names = ", ".join(f"{c.name} ({c.id})" for c in state.pending)
        return RunSuspended(f"waiting for approval of {names}", state)

    @classmethod
    async def resume(
        cls,
        state: RunState | Mapping[str, Any] | str,
        decisions: Mapping[str, PolicyDecision] | None = None,
        *,
        tools: Sequence[Tool[Any, Any]] = (),
        lm: LanguageModel | None = None,
        session: Session | None = None,
        allow_tool: ToolPolicy | None = None,
        on_approval: OnApproval = "policy",
        prices: Mapping[str, Price] | None = None,
        budget: Budget | None = None,
        output: Any = None,
        tracer_provider: Any = None,
        key: Key | None = None,
        limits: AgentLimits | None = None,
        **defaults: Any,
    ) -> str | RunState:
        """Continue a suspended run with a decision for each pending call.

        ``decisions`` maps call ids to ``True``/``lf.Approve(...)`` (run),
        ``lf.Deny(message)`` (skip, tell the model) or ``False`` (stop the run with
        ``ToolDeniedError``); every pending call needs one, and nothing runs otherwise.
        ``tools`` must include every tool the run was given (matched by name; ``lm`` is the
        model to continue with). Without ``session`` the saved trace is restored into a new
        session, so the trace continues under the same root (its id and nodes kept); with
        ``session`` (the one the run was suspended in, still open) work continues there.
        ``tracer_provider`` exports the new session's spans (``lf.otel``); the resumed run
        continues the suspended run's OpenTelemetry trace when that run was exported (its
        state carries the span's ``traceparent``), in this process or another.
        Later approvals are handled by ``allow_tool`` and ``on_approval`` like ``invoke``.

        A state given as JSON is read strictly (``InvalidRunStateError`` before anything
        runs). The calls decided before the suspension are asked of ``allow_tool`` again
        when one is given (its ``False``/``Deny`` applies; ``None`` keeps the saved
        decision); their saved approvals count only when the state is verified: made by
        this process, or signed (``to_json(key=...)``) and resumed with the same ``key``.
        Otherwise they need a decision in ``decisions`` (or ``allow_tool``'s approval).
        The deadline (``limits.max_execution_time``) starts again; steps, tool calls and
        the token/cost budget carry on from what the run had used.

        ``limits``: the resumed run's limits. Without it, a verified state keeps the limits
        it was saved with; an unverified one (JSON read without ``key``) gets them bounded
        by the defaults (``lf.AgentLimits()``), field by field: a file can lower a limit,
        never raise one.
        """
        if not isinstance(state, RunState):
            state = RunState.from_json(state, key=key)
        elif key is not None:
            state = state.verify(key)
        state.check_fresh()  # (marked resumed once every call is decided, before any runs)
        agent, decisions = rebuild_agent(cls, state, decisions, tools, allow_tool, output, limits)
        runner = copy.copy(agent)
        owned = session is None
        transcript = state.transcript
        if session is None:
            try:
                session = restore_session(
                    state.trace or _empty_trace(),
                    lm,
                    prices=prices,
                    transcript=transcript,
                    tracer_provider=tracer_provider,
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidRunStateError(f"run state: trace: {exc}") from None
        runner._resume = (state, decisions, transcript)
        runner._on_approval = on_approval
        try:
            return await runner._invoke(session, lm, None, budget, on_approval, defaults)
        finally:
            if owned:
                await session.dispose()

    async def _decide_resumed(
        self,
        state: RunState,
        decisions: Mapping[str, PolicyDecision],
        run: _Run,
        session: Session,
    ) -> list[_Planned]:
        """The suspended batch, decided: saved decisions first, the given ones for the
        pending calls. Each call gets a new ``tool_call`` node under the resumed run."""
        planned: list[_Planned] = []
        for item in state.batch:
            call = item.call
            found = self.tools[call.name]
            tracked = session.track(
                "tool_call",
                found.name,
                inputs={"call_id": call.id, "args": call.args},
                metadata={**(_source(found) or {}), "resumed": True, "step": run.steps},
            )
            entry = _Planned(call, found, None, tracked)
            planned.append(entry)
            try:
                entry.args = found.validate_args(call.args)
                decision: Any
                if call.id in decisions:
                    decision = decisions[call.id]
                    if isinstance(decision, (Approve, Deny)) and decision.by is None:
                        decision = dataclasses.replace(decision, by="resume")
                elif item.decision is not None and item.decision.outcome == "deny":
                    decision = Deny(item.decision.message or "", by=item.decision.by)
                else:
                    decision = await self._approve_again(entry, item.decision, state, session)
                self._record(entry, decision)
            except BaseException as exc:
                _abandon(planned, exc, culprit=entry)
                raise
        return planned

    async def _approve_again(
        self, entry: _Planned, saved: SavedDecision | None, state: RunState, session: Session
    ) -> Any:
        """A call approved before the suspension: the resume-time ``allow_tool`` decides
        first; its ``True`` or ``None`` keeps the saved approval, which counts only from a
        verified state (unverified, ``True`` runs the model's own arguments)."""
        asked = await self._ask_policy(entry) if self.allow_tool is not None else None
        if asked is not None and asked is not True:
            return asked
        if saved is not None and state.verified:
            return Approve(args=saved.args, by=saved.by)
        if asked is True:
            return True
        entry.tracked.decide("stop", "resume", note="not approved again on resume")
        raise ToolDeniedError(
            f"tool call {entry.call.name!r} ({entry.call.id}) was approved before the "
            "suspension, but the state is not verified and allow_tool did not approve it "
            "again; the call was not run"
        )

    # -- tool calls ------------------------------------------------------------------------
    def _validate(
        self, call: ToolCall, turn_ids: set[str], session: Session, step: int
    ) -> tuple[ToolCall, Tool[Any, Any], Any]:
        """Resolve and check one call; a failure is recorded as a tool_call node that never ran."""
        try:
            if call.id in turn_ids:
                raise ToolExecutionError(f"duplicate tool-call id {call.id!r}")
            turn_ids.add(call.id)
            found = self.tools.get(call.name)
            if found is None:
                raise ToolExecutionError(f"unknown tool {call.name!r}")
            return call, found, found.validate_args(call.args)
        except ToolExecutionError:
            with session.track(
                "tool_call",
                call.name,
                inputs={"call_id": call.id, "args": call.args},
                metadata={"executed": False, "phase": "validation", "step": step},
            ):
                raise

    async def _decide(
        self, validated: list[tuple[ToolCall, Tool[Any, Any], Any]], session: Session, step: int
    ) -> list[_Planned]:
        """Ask the policy about each call in order; nothing runs until all are decided."""
        planned: list[_Planned] = []
        for call, found, args in validated:
            tracked = session.track(
                "tool_call",
                found.name,
                inputs={"call_id": call.id, "args": call.args},
                metadata={**(_source(found) or {}), "step": step},
            )
            entry = _Planned(call, found, args, tracked)
            planned.append(entry)
            try:
                await self._apply_policy(entry)
            except BaseException as exc:
                _abandon(planned, exc, culprit=entry)
                raise
        return planned

    async def _apply_policy(self, entry: _Planned) -> None:
        if self.allow_tool is None:
            if self._on_approval == "suspend":
                self._record(entry, None)
            else:
                entry.tracked.decide("approve", "default")
                entry.decided = {"outcome": "approve", "by": "default"}
            return
        decision = await self._ask_policy(entry)
        if decision is None and self._on_approval != "suspend":
            decision = _INVALID
        self._record(entry, decision)

    async def _ask_policy(self, entry: _Planned) -> Any:
        """What ``allow_tool`` answers for a call (a failing policy is a ``ToolDeniedError``).
        The call's node is ``waiting`` meanwhile; the policy gets the call's own view."""
        tracked = entry.tracked
        policy = self.allow_tool
        assert policy is not None
        tracked.wait()
        try:
            decision: Any = policy(entry.call, tracked.session)
            if inspect.isawaitable(decision):
                decision = await decision
        except (asyncio.CancelledError, ExecutionTimeoutError):
            raise
        except ToolDeniedError as exc:
            # A policy that denies by raising (e.g. an approval prompt nobody saw in time)
            # already says why: keep its message as the run's error.
            tracked.decide("stop", "allow_tool", note=str(exc) or None)
            raise
        except Exception as exc:
            tracked.decide("error", "allow_tool", note=type(exc).__name__)
            raise ToolDeniedError(
                f"the allow_tool policy failed on {entry.call.name!r} ({type(exc).__name__}); "
                "the call was not run"
            ) from exc
        return decision

    def _record(self, entry: _Planned, decision: Any) -> None:
        """Apply one decision to a planned call and record it on its node. ``None`` (suspend
        mode) leaves the call pending for a person."""
        tracked = entry.tracked
        if decision is None:
            entry.pending = True
            tracked.decide("suspend", "on_approval")
        elif decision is True or (isinstance(decision, Approve) and decision.args is None):
            by = (decision.by if isinstance(decision, Approve) else None) or "allow_tool"
            tracked.decide("approve", by)
            entry.decided = {"outcome": "approve", "by": by}
        elif isinstance(decision, Approve):
            edited = dict(decision.args or {})
            by = decision.by or "allow_tool"
            tracked.decide("approve", by, args=edited)
            entry.args = entry.tool.validate_args(edited)
            entry.decided = {"outcome": "approve", "by": by, "args": edited}
        elif isinstance(decision, Deny):
            by = decision.by or "allow_tool"
            tracked.decide("deny", by, note=decision.message)
            entry.deny = decision.message
            entry.decided = {"outcome": "deny", "by": by, "message": decision.message}
            tracked.end("denied", outputs={"message": decision.message})
        elif decision is False:
            tracked.decide("stop", "allow_tool")
            raise ToolDeniedError(f"tool call {entry.call.name!r} ({entry.call.id}) was denied")
        else:
            tracked.decide("error", "allow_tool", note=f"not a decision: {type(decision).__name__}")
            raise ToolDeniedError(
                "allow_tool must return True, False, lf.Approve or lf.Deny, "
                f"not {type(decision).__name__}; the call was not run"
            )

    async def _execute(self, planned: list[_Planned], session: Session) -> list[ToolMessage[Any]]:
        results: list[ToolMessage[Any] | None] = [None] * len(planned)
        runnable: list[int] = []
        for i, entry in enumerate(planned):
            if entry.deny is not None:
                results[i] = ToolMessage(entry.deny, entry.call.id, entry.call.name, is_error=True)
            else:
                runnable.append(i)
        if not self.parallel_tools or len(runnable) < 2:
            for n, i in enumerate(runnable):
                try:
                    results[i] = await _run_tool(planned[i], session)
                except BaseException as exc:
                    _abandon([planned[j] for j in runnable[n + 1 :]], exc)
                    raise
        else:
            tasks = [asyncio.ensure_future(_run_tool(planned[i], session)) for i in runnable]
            await settle_first_failure(tasks)
            for i, t in zip(runnable, tasks, strict=True):
                results[i] = t.result()
        return [r for r in results if r is not None]


async def _run_tool(entry: _Planned, session: Session) -> ToolMessage[Any]:
    """Run one approved call under its node; every outcome is recorded on that node.

    A tool's own failure becomes a ``ToolExecutionError`` chained from it, except the run's
    own budget running out inside the tool, which stops the run as it is."""
    call = entry.call
    with entry.tracked as tracked:
        try:
            output = await entry.tool.execute(entry.args, tracked.session)
            message = entry.tool.result_message(output, call)
        except (asyncio.CancelledError, ExecutionTimeoutError, ToolExecutionError):
            raise
        except BudgetExceededError as exc:
            scope = session.budget_scope
            if scope is not None and scope.exhausted():  # the run's own budget ran out
                raise
            raise ToolExecutionError(
                f"tool {call.name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        except Exception as exc:
            raise ToolExecutionError(
                f"tool {call.name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        result = message.parts[0]
        assert isinstance(result, ToolResultPart)
        text = result.content
        if result.is_error:
            # The tool reported an error as its result (MCP's isError): the model reads it and
            # the run goes on; the node says the call failed.
            error = ToolExecutionError(f"tool {call.name!r} reported an error: {text[:200]}")
            tracked.end("failed", outputs={"json": text}, error=error)
        else:
            tracked.outputs = {"json": text}
    return message


_INVALID = object()  # a policy's None outside suspend mode: refused like any non-decision


def _saved(decided: Mapping[str, Any] | None) -> SavedDecision:
    """A decision made before a suspension, as the ``RunState`` keeps it."""
    assert decided is not None and decided["outcome"] in ("approve", "deny")
    if decided["outcome"] == "deny":
        return SavedDecision("deny", decided.get("by"), message=decided.get("message") or "")
    return SavedDecision("approve", decided.get("by"), decided.get("args"))


def _empty_trace() -> dict[str, Any]:
    return Session().trace_json()


def _source(tool: Tool[Any, Any]) -> dict[str, Any] | None:
    """Where a tool comes from, for the trace and the policy (``None`` for local tools)."""
    server = getattr(tool, "mcp_server", None)
    return None if server is None else {"source": "mcp", "mcp_server": server}


def _drop_earlier_repair(transcript: list[Message[Any]]) -> None:
    """Before re-asking, take the previous failed answer and its re-ask out of the
    transcript: as ``lf.query`` does, only the latest failed answer is sent back, so a run
    of failing answers does not grow every later prompt (``Repairs``)."""
    for i in range(len(transcript) - 2, 0, -1):
        if Repairs.is_request(transcript[i]):
            del transcript[i - 1 : i + 1]
            return


def _abandon(
    entries: Sequence[_Planned], exc: BaseException, culprit: _Planned | None = None
) -> None:
    """Close the nodes of calls that will not run: the culprit gets the error's outcome, the
    others ``cancelled``; all are marked ``executed: false``."""
    for entry in entries:
        node = entry.tracked.node
        if node.status not in OPEN_STATUSES:
            continue
        node.metadata["executed"] = False
        if entry is culprit:
            entry.tracked.fail(exc)
        else:
            entry.tracked.end("cancelled")
