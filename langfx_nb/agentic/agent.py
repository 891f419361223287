"""Agent: a bounded tool-using loop, run as an ``Action[str]``.

Each step asks the model (a traced query node) with the transcript and the tool specs. A
reply without tool calls ends the run with its text. A reply with tool calls is checked as
a whole batch *before anything runs*: a model step must remain to read the results, the
tool-call budget must cover the batch, every call must name a registered tool, carry an id
unused in this run and valid arguments, and then pass the ``allow_tool`` policy. Only then
do the tools run (in call order, or concurrently with ``parallel_tools=True``), each as a
``tool_call`` trace node; their outputs are validated and sent back as strict-JSON
``ToolMessage``s correlated by call id. Tools are never retried, so side effects never
repeat.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import (
    BudgetExceededError,
    EmptyGenerationError,
    ExecutionTimeoutError,
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
from .action import Action
from .budget import Budget
from .session import Session
from .tools import Tool
from .trace import TraceNode

if TYPE_CHECKING:
    from ..llms.base import LanguageModel

__all__ = ["Agent", "AgentLimits", "Approve", "Deny", "PolicyDecision", "ToolPolicy"]


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """Model steps, tool calls and seconds one run may use (``None`` time = no limit), and
    optionally its tokens and cost (``lf.Budget`` fields; ``None`` = no limit), which cover
    nested agents and tools' own model calls too."""

    max_steps: int = 8
    max_tool_calls: int = 12
    max_execution_time: float | None = 60
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ValueError("max_steps must be a positive integer")
        if not isinstance(self.max_tool_calls, int) or self.max_tool_calls < 0:
            raise ValueError("max_tool_calls must be a non-negative integer")
        if self.max_execution_time is not None and self.max_execution_time <= 0:
            raise ValueError("max_execution_time must be positive (or None)")
        self.budget  # noqa: B018  (validates the token and cost limits now)

    @property
    def budget(self) -> Budget:
        """The token and cost limits as a ``Budget``."""
        return Budget(
            self.max_input_tokens, self.max_output_tokens, self.max_total_tokens, self.max_cost
        )


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
    node: TraceNode
    deny: str | None = None


class Agent(Action[str]):
    """``await lf.Agent(prompt, tools=[...]).invoke(lm=lm)`` returns the final answer text.

    Errors (each also the outcome of the agent's trace node): ``ToolDeniedError`` when the
    policy returns ``False`` or fails; ``BudgetExceededError`` when steps or tool calls run
    out; ``ToolExecutionError`` for unknown tools, duplicate ids, bad arguments, a tool that
    raises (chained from its exception) or bad output; ``EmptyGenerationError`` for an empty
    reply; ``ExecutionTimeoutError`` on the deadline; cancellation propagates unchanged.
    """

    name = "Agent"

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
        }

    async def invoke(
        self,
        session: Session | None = None,
        *,
        lm: LanguageModel | None = None,
        max_execution_time: float | None = None,
        budget: Budget | None = None,
        **defaults: Any,
    ) -> str:
        """As ``Action.invoke``; the deadline is the shorter of the limits' and this one, and
        each token/cost limit the smaller of the limits' and ``budget``'s."""
        limit = self.limits.max_execution_time
        if max_execution_time is not None:
            limit = max_execution_time if limit is None else min(limit, max_execution_time)
        return await super().invoke(
            session,
            lm=lm,
            max_execution_time=limit,
            budget=self.limits.budget.tighter(budget),
            **defaults,
        )

    # -- the loop ------------------------------------------------------------------------
    async def call(self, session: Session) -> str:
        transcript: list[Message[Any]] = []
        if self.instructions:
            transcript.append(SystemMessage(self.instructions))
        transcript.append(
            self.prompt if isinstance(self.prompt, Message) else UserMessage(self.prompt)
        )
        specs = [t.spec for t in self.tools.values()]
        options: dict[str, Any] = {"tools": specs} if specs else {}
        used_ids: set[str] = set()
        calls_used = 0
        limits = self.limits
        stats = session.node.metadata
        for step in range(limits.max_steps):
            stats["steps"] = step + 1
            response = await session.generate(
                ComplexMessage(transcript), name=f"step {step + 1}", stream=self.stream, **options
            )
            transcript.append(response)
            calls = response.tool_calls
            if not calls:
                if not response.text.strip():
                    raise EmptyGenerationError("the model replied with neither text nor tool calls")
                return response.text
            if step + 1 >= limits.max_steps:
                raise BudgetExceededError(
                    f"no model step left to read tool results (max_steps={limits.max_steps})",
                    budget="max_steps",
                    limit=limits.max_steps,
                    used=step + 1,
                )
            if calls_used + len(calls) > limits.max_tool_calls:
                raise BudgetExceededError(
                    f"the model asked for {len(calls)} tool call(s) with "
                    f"{limits.max_tool_calls - calls_used} left (max_tool_calls="
                    f"{limits.max_tool_calls})",
                    budget="max_tool_calls",
                    limit=limits.max_tool_calls,
                    used=calls_used + len(calls),
                )
            validated = [self._validate(call, used_ids, session) for call in calls]
            planned = await self._decide(validated, session)
            calls_used += len(calls)
            stats["tool_calls"] = calls_used
            transcript.extend(await self._execute(planned, session))
        raise BudgetExceededError(
            f"model-step limit reached (max_steps={limits.max_steps})",
            budget="max_steps",
            limit=limits.max_steps,
            used=limits.max_steps,
        )

    def _validate(
        self, call: ToolCall, used_ids: set[str], session: Session
    ) -> tuple[ToolCall, Tool[Any, Any], Any]:
        """Resolve and check one call; a failure is recorded as a tool_call node that never ran."""
        try:
            if call.id in used_ids:
                raise ToolExecutionError(f"duplicate tool-call id {call.id!r}")
            used_ids.add(call.id)
            found = self.tools.get(call.name)
            if found is None:
                raise ToolExecutionError(f"unknown tool {call.name!r}")
            return call, found, found.validate_args(call.args)
        except ToolExecutionError as exc:
            node = session._start(
                "tool_call",
                call.name,
                inputs={"call_id": call.id, "args": session._preview(call.args)},
                metadata={"executed": False, "phase": "validation"},
            )
            session._finish(node, "failed", error=exc)
            raise

    async def _decide(
        self, validated: list[tuple[ToolCall, Tool[Any, Any], Any]], session: Session
    ) -> list[_Planned]:
        """Ask the policy about each call in order; nothing runs until all are decided."""
        planned: list[_Planned] = []
        for call, found, args in validated:
            node = session._start(
                "tool_call",
                found.name,
                inputs={"call_id": call.id, "args": session._preview(call.args)},
                metadata=_source(found),
            )
            entry = _Planned(call, found, args, node)
            planned.append(entry)
            try:
                await self._apply_policy(entry, session)
            except BaseException as exc:
                _abandon(planned, session, exc, culprit=entry)
                raise
        return planned

    async def _apply_policy(self, entry: _Planned, session: Session) -> None:
        store = session._state.store
        node = entry.node
        policy = self.allow_tool
        if policy is None:
            store.update(node, decision={"outcome": "approve", "by": "default", "at": store.time()})
            return
        view = session._bind(node)
        try:
            decision: Any = policy(entry.call, view)
            if inspect.isawaitable(decision):
                decision = await decision
        except (asyncio.CancelledError, ExecutionTimeoutError):
            raise
        except ToolDeniedError:
            # A policy that denies by raising (e.g. an approval prompt nobody saw in time)
            # already says why: keep its message as the run's error.
            store.update(node, decision={"outcome": "stop", "by": "allow_tool", "at": store.time()})
            raise
        except Exception as exc:
            store.update(
                node, decision={"outcome": "error", "by": "allow_tool", "at": store.time()}
            )
            raise ToolDeniedError(
                f"the allow_tool policy failed on {entry.call.name!r} ({type(exc).__name__}); "
                "the call was not run"
            ) from exc
        finally:
            view._close_view()
        at = store.time()
        if decision is True or (isinstance(decision, Approve) and decision.args is None):
            by = decision.by if isinstance(decision, Approve) else None
            store.update(node, decision={"outcome": "approve", "by": by or "allow_tool", "at": at})
        elif isinstance(decision, Approve):
            edited = dict(decision.args or {})
            record = {
                "outcome": "approve",
                "by": decision.by or "allow_tool",
                "at": at,
                "args": session._preview(edited),
            }
            store.update(node, decision=record)
            entry.args = entry.tool.validate_args(edited)
        elif isinstance(decision, Deny):
            record = {
                "outcome": "deny",
                "by": decision.by or "allow_tool",
                "at": at,
                "message": decision.message,
            }
            store.update(node, decision=record)
            entry.deny = decision.message
            session._finish(node, "denied", outputs={"message": decision.message})
        elif decision is False:
            store.update(node, decision={"outcome": "stop", "by": "allow_tool", "at": at})
            raise ToolDeniedError(f"tool call {entry.call.name!r} ({entry.call.id}) was denied")
        else:
            store.update(node, decision={"outcome": "error", "by": "allow_tool", "at": at})
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
                    _abandon([planned[j] for j in runnable[n + 1 :]], session, exc)
                    raise
        else:
            tasks = [asyncio.ensure_future(_run_tool(planned[i], session)) for i in runnable]
            try:
                pending: set[asyncio.Future[ToolMessage[Any]]] = set(tasks)
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
                    for t in done:
                        if t.cancelled():
                            raise asyncio.CancelledError()
                        failure = t.exception()
                        if failure is not None:
                            raise failure
            finally:
                for t in tasks:
                    if not t.done():
                        t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            for i, t in zip(runnable, tasks, strict=True):
                results[i] = t.result()
        return [r for r in results if r is not None]


async def _run_tool(entry: _Planned, session: Session) -> ToolMessage[Any]:
    """Run one approved call under its node; every outcome is recorded on that node."""
    node = entry.node
    call = entry.call
    view = session._bind(node)
    try:
        view._check_usable()
        output = await entry.tool.execute(entry.args, view)
        message = entry.tool.result_message(output, call)
    except (asyncio.CancelledError, ExecutionTimeoutError, ToolExecutionError) as exc:
        session._finish(node, view._status_for(exc), error=exc)
        raise
    except BudgetExceededError as exc:
        scope = session.budget_scope
        if scope is not None and scope.exhausted():  # the run's own budget ran out in the tool
            session._finish(node, "failed", error=exc)
            raise
        error = ToolExecutionError(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        session._finish(node, "failed", error=error)
        raise error from exc
    except Exception as exc:
        error = ToolExecutionError(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        session._finish(node, "failed", error=error)
        raise error from exc
    finally:
        view._close_view()
    result = message.parts[0]
    assert isinstance(result, ToolResultPart)
    text = result.content
    if result.is_error:
        # The tool reported an error as its result (MCP's isError): the model reads it and
        # the run goes on; the node says the call failed.
        error = ToolExecutionError(f"tool {call.name!r} reported an error: {text[:200]}")
        session._finish(node, "failed", outputs={"json": session._preview(text)}, error=error)
    else:
        session._finish(node, "ok", outputs={"json": session._preview(text)})
    return message


def _source(tool: Tool[Any, Any]) -> dict[str, Any] | None:
    """Where a tool comes from, for the trace and the policy (``None`` for local tools)."""
    server = getattr(tool, "mcp_server", None)
    return None if server is None else {"source": "mcp", "mcp_server": server}


def _abandon(
    entries: Sequence[_Planned],
    session: Session,
    exc: BaseException,
    culprit: _Planned | None = None,
) -> None:
    """Close the nodes of calls that will not run: the culprit gets the error's outcome, the
    others ``cancelled``; all are marked ``executed: false``."""
    for entry in entries:
        node = entry.node
        if node.status != "running":
            continue
        node.metadata["executed"] = False
        if entry is culprit:
            session._finish(node, session._status_for(exc), error=exc)
        else:
            session._finish(node, "cancelled")
