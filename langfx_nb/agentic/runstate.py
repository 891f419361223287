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

import contextlib
import dataclasses
import functools
import gc
import json
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import Message, ToolCall

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .agent import Agent
    from .clock import Clock
    from .session import Session
    from .tools import Tool
    from .usage import Price

__all__ = ["RUN_STATE_FORMAT", "RUN_STATE_VERSION", "RunState"]

RUN_STATE_FORMAT = "langfx_nb.run_state"
RUN_STATE_VERSION = 1

_RESUMED: set[str] = set()  # suspension ids already resumed in this process


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
            with bulk_load():
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


@contextlib.contextmanager
def bulk_load() -> Iterator[None]:
    """Pause the cyclic garbage collector while a saved run is rebuilt.

    Loading a long run creates tens of thousands of acyclic containers at once; each one
    counts towards a collection, and every full collection walks the whole heap, which in a
    busy process cost more than the loading itself (about 25 ms vs 50–120 ms with collections
    for a 1,000-step run). Nothing made here forms a cycle, so nothing is left for later.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def agent_config(agent: Agent) -> dict[str, Any]:
    """What a ``RunState`` keeps of an agent: plain data (tool *names*, the answer type's
    name); tools, models and types are given again on resume."""
    limits = agent.limits
    prompt = agent.prompt
    mapping = agent._mapping
    return {
        "name": agent.trace_name(),
        "prompt": prompt.to_json() if isinstance(prompt, Message) else prompt,
        "instructions": agent.instructions,
        "tools": list(agent.tools),
        "limits": {f.name: getattr(limits, f.name) for f in dataclasses.fields(limits)},
        "parallel_tools": agent.parallel_tools,
        "stream": agent.stream,
        "output": mapping.schema.name if mapping is not None else None,
        "repair": agent.repair,
        "protocol": agent.protocol,
    }


def rebuild_agent(
    cls: type[Agent],
    state: RunState,
    decisions: Mapping[str, Any] | None,
    tools: Sequence[Tool[Any, Any]],
    allow_tool: Any,
    output: Any,
) -> tuple[Agent, dict[str, Any]]:
    """The suspended run's agent, with checked decisions; ``ValueError`` before anything
    runs when a tool or the output type is missing or the decisions do not match."""
    from .agent import AgentLimits

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
    """A live session that continues a saved trace: same session id and root node, the
    saved nodes kept, new nodes numbered after them and timed after the last saved one.
    With ``tracer_provider`` its new nodes are exported as OpenTelemetry spans (the saved
    ones were exported where they ran)."""
    from .session import Session
    from .trace import TraceStore

    loaded = TraceStore.from_json(trace, prices)
    session = Session(lm, prices=prices, clock=clock, max_trace_nodes=loaded.max_nodes)
    store = session._state.store
    store.nodes = loaded.nodes
    store.root = root = loaded.root
    store.session_id = loaded.session_id
    store.requests = loaded.requests
    store._usage = loaded._usage
    store.started = loaded.started
    store._counts = loaded._counts
    store.evicted = loaded.evicted
    store._finished = deque(
        n for n in loaded.nodes.values() if n.status != "running" and n is not loaded.root
    )
    store._next_id = 1 + max((int(i) for i in loaded.nodes if i.isdigit()), default=0)
    last = max(
        (n.end if n.end is not None else n.start for n in loaded.nodes.values()), default=0.0
    )
    store.t0 = store._now() - last
    if root.status != "running":  # the saved session had ended: it is running again
        key = ("session", root.status)
        if store._counts.get(key):
            store._counts[key] -= 1
        root.status, root.end = "running", None
    header = trace.get("session") or {}
    session._state.metadata.update(header.get("metadata") or {})
    session._node = root
    session._ancestry = (root.id,)
    if transcript is not None:
        _expand_prompts(session, transcript)
    if tracer_provider is not None:
        from .otel import export

        export(session, tracer_provider, backfill=False)
    return session


def _expand_prompts(session: Session, transcript: list[Message[Any]]) -> None:
    """Give compacted step nodes their prompt previews back (computed on first read)."""
    limit = session._state.max_text_chars
    for node in session._state.store.nodes.values():
        turns = node.metadata.pop("prompt_turns", None) if node.kind == "query" else None
        if isinstance(turns, int):
            node.defer("inputs", functools.partial(_prompt, transcript[:turns], limit))


def _prompt(sent: list[Message[Any]], limit: int) -> dict[str, Any]:
    from ..messages import ComplexMessage
    from .trace import message_preview

    return {"prompt": message_preview(ComplexMessage(sent), limit)}
