"""RunState: an agent run suspended while tool calls wait for approval, as versioned JSON.

``await agent.invoke(..., on_approval="suspend")`` returns a ``RunState`` when a batch of
tool calls needs a person's decision; ``await lf.Agent.resume(state, decisions={...})``
continues it, in this process or another one (``state.to_json_str()`` /
``lf.RunState.from_json(text)``).

What it holds (all plain JSON, no pickles, no model objects, options or keys): the agent's
configuration (prompt, instructions, limits, tool names), the transcript so far (whose tool
messages are the executed calls' results), the pending batch (every call of the model's
last reply, with the decision already made for it, if any), the steps, tool calls and
budget used so far, and the session trace (previews, secrets redacted), so a resumed run
continues under the same trace root.

Tools that ran are never run again: their results are in the transcript, and a ``RunState``
can be resumed only once per process.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..messages import Message, ToolCall
from .limits import AgentLimits

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .clock import Clock
    from .session import Session
    from .tools import Tool
    from .usage import Price

__all__ = ["RUN_STATE_FORMAT", "RUN_STATE_VERSION", "RunState"]

RUN_STATE_FORMAT = "langfx_nb.run_state"
RUN_STATE_VERSION = 1

_RESUMED: set[str] = set()  # suspension ids already resumed in this process


class _Configured(Protocol):
    """What a ``RunState`` reads of an agent (``lf.Agent`` is one)."""

    prompt: str | Message[Any]
    instructions: str | None
    tools: dict[str, Tool[Any, Any]]
    limits: AgentLimits
    parallel_tools: bool
    stream: bool
    repair: int
    protocol: str

    @property
    def output_name(self) -> str | None: ...
    def trace_name(self) -> str: ...


A = TypeVar("A", bound=_Configured)


class RunState:
    """A suspended agent run. ``pending`` lists the calls that need a decision."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    # -- what a caller reads -------------------------------------------------------------
    @property
    def id(self) -> str:
        """Unique per suspension (a resumed run that suspends again gets a new one)."""
        return str(self.data["id"])

    @property
    def pending(self) -> list[ToolCall]:
        """The calls waiting for a decision, in the model's order."""
        return [
            ToolCall(c["call_id"], c["name"], dict(c["args"]))
            for c in self.data["batch"]
            if c.get("decision") is None
        ]

    @property
    def batch(self) -> list[dict[str, Any]]:
        """Every call of the suspended step: ``{call_id, name, args, decision}``."""
        return list(self.data["batch"])

    @property
    def transcript(self) -> list[Message[Any]]:
        return [Message.from_json(m) for m in self.data["transcript"]]

    @property
    def trace(self) -> dict[str, Any] | None:
        return self.data.get("trace")

    def __repr__(self) -> str:
        names = ", ".join(f"{c.name}({c.id})" for c in self.pending)
        return f"RunState({self.data['agent']['name']!r}, pending: {names or 'none'})"

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return self.data

    def to_json_str(self, **kwargs: Any) -> str:
        return json.dumps(self.data, ensure_ascii=False, **kwargs)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> RunState:
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, Mapping) or data.get("format") != RUN_STATE_FORMAT:
            raise ValueError("not a langfx_nb run state")
        if data.get("version") != RUN_STATE_VERSION:
            raise ValueError(
                f"unsupported run state version {data.get('version')!r} "
                f"(this langfx_nb reads version {RUN_STATE_VERSION})"
            )
        for key in ("id", "agent", "transcript", "batch", "progress"):
            if key not in data:
                raise ValueError(f"run state is missing {key!r}")
        return cls(dict(data))

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    def consume(self) -> None:
        """Mark this suspension resumed; a second resume in this process is refused."""
        if self.id in _RESUMED:
            raise RuntimeError(
                "this RunState was already resumed: resuming it again would run its tools twice"
            )
        _RESUMED.add(self.id)


_NOT_FOR_THE_MODEL = ("usage", "metadata", "provenance", "result")


def transcript_json(message: Message[Any]) -> dict[str, Any]:
    """A transcript turn as a ``RunState`` keeps it: what a model is sent again (its parts,
    continuation data included); usage, metadata and provenance are already in the trace."""
    data = message.to_json()
    for key in _NOT_FOR_THE_MODEL:
        data.pop(key, None)
    return data


def agent_config(agent: _Configured) -> dict[str, Any]:
    """What a ``RunState`` keeps of an agent: plain data (tool *names*, the answer type's
    name); tools, models and types are given again on resume."""
    limits = agent.limits
    prompt = agent.prompt
    return {
        "name": agent.trace_name(),
        "prompt": prompt.to_json() if isinstance(prompt, Message) else prompt,
        "instructions": agent.instructions,
        "tools": list(agent.tools),
        "limits": {f.name: getattr(limits, f.name) for f in dataclasses.fields(limits)},
        "parallel_tools": agent.parallel_tools,
        "stream": agent.stream,
        "output": agent.output_name,
        "repair": agent.repair,
        "protocol": agent.protocol,
    }


def rebuild_agent(
    cls: Callable[..., A],
    state: RunState,
    decisions: Mapping[str, Any] | None,
    tools: Sequence[Tool[Any, Any]],
    allow_tool: Any,
    output: Any,
) -> tuple[A, dict[str, Any]]:
    """The suspended run's agent, with checked decisions; ``ValueError`` before anything
    runs when a tool or the output type is missing or the decisions do not match."""
    config = state.data["agent"]
    by_name = {t.name: t for t in tools}
    missing = [n for n in config["tools"] if n not in by_name]
    if missing:
        raise ValueError(f"resume needs the run's tools; missing: {', '.join(missing)}")
    if config.get("output") is not None and output is None:
        raise ValueError(f"resume needs output= (the run's answer type, {config['output']})")
    pending = {c.id for c in state.pending}
    decided = dict(decisions or {})
    unknown = sorted(set(decided) - pending)
    if unknown:
        raise ValueError(f"no pending call with id {', '.join(map(repr, unknown))}")
    undecided = sorted(pending - set(decided))
    if undecided:
        raise ValueError(f"a decision is needed for pending call(s) {', '.join(undecided)}")
    prompt = config["prompt"]
    agent = cls(
        Message.from_json(prompt) if isinstance(prompt, dict) else prompt,
        config.get("instructions"),
        tools=[by_name[n] for n in config["tools"]],
        limits=AgentLimits(**config["limits"]),
        allow_tool=allow_tool,
        parallel_tools=bool(config.get("parallel_tools")),
        stream=bool(config.get("stream")),
        name=config.get("name"),
        output=output,
        repair=int(config.get("repair") or 0),
        protocol=str(config.get("protocol") or "json"),
    )
    return agent, decided


def _step_prompts(
    nodes: list[dict[str, Any]], transcript: list[Any], agent_ids: set[str]
) -> list[tuple[dict[str, Any], int]]:
    """The run's ``step N`` query nodes with how many transcript turns each was sent.

    Step N was sent the transcript up to (not including) its N-th model reply.
    """
    replies = [i for i, m in enumerate(transcript) if _role(m) == "ai"]
    found = []
    for node in nodes:
        if node.get("kind") != "query" or node.get("parent_id") not in agent_ids:
            continue
        name = str(node.get("name", ""))
        if not name.startswith("step ") or not name[5:].isdigit():
            continue
        n = int(name[5:])
        if 1 <= n <= len(replies):
            found.append((node, replies[n - 1]))
    return found


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, Mapping) else message.role


def compact_trace(
    trace: dict[str, Any], transcript: list[dict[str, Any]], agent_ids: set[str]
) -> None:
    """Drop the step prompts the transcript already holds (a long run's step previews are
    mostly the same turns again); ``restore_session`` rebuilds them from the transcript."""
    for node, turns in _step_prompts(trace["nodes"], transcript, agent_ids):
        inputs = node.get("inputs")
        if isinstance(inputs, dict) and "prompt" in inputs:
            node["inputs"] = {k: v for k, v in inputs.items() if k != "prompt"}
            node.setdefault("metadata", {})["prompt_turns"] = turns


def restore_session(
    trace: Mapping[str, Any],
    lm: LanguageModel | None,
    *,
    prices: Mapping[str, Price] | None = None,
    clock: Clock | None = None,
    transcript: list[Message[Any]] | None = None,
    tracer_provider: Any = None,
) -> Session:
    """``Session.restore`` of a run's saved trace, with the step prompts ``compact_trace``
    left out given back from the transcript."""
    from .session import Session

    session = Session.restore(
        trace, lm, prices=prices, clock=clock, tracer_provider=tracer_provider
    )
    if transcript is not None:
        _expand_prompts(session, transcript)
    return session


def _expand_prompts(session: Session, transcript: list[Message[Any]]) -> None:
    """Give compacted step nodes their prompt previews back, as ``generate`` wrote them
    (``trace.turns_preview`` of the turns sent), each turn previewed once however many
    steps were sent it."""
    from .trace import MAX_PREVIEW_TURNS, turn_preview, turns_preview

    limit = session.max_text_chars
    flat: list[Message[Any]] = []
    ends = [0]  # ends[k]: turns in transcript[:k]
    for message in transcript:
        flat.extend(message.turns())
        ends.append(len(flat))
    shown: dict[int, dict[str, Any]] = {}
    for node in session.trace_store.nodes.values():
        count = node.metadata.pop("prompt_turns", None) if node.kind == "query" else None
        if not isinstance(count, int) or not 0 <= count < len(ends):
            continue
        end = ends[count]
        for i in range(max(0, end - MAX_PREVIEW_TURNS), end):
            if i not in shown:
                shown[i] = turn_preview(flat[i], limit)
        prompt = turns_preview(end, [shown[i] for i in range(max(0, end - MAX_PREVIEW_TURNS), end)])
        node.inputs = {**(node.inputs or {}), "prompt": prompt}
