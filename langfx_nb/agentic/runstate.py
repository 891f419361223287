"""RunState: an agent run suspended while tool calls wait for approval, as versioned JSON.

``await agent.invoke(..., on_approval="suspend")`` returns a ``RunState`` when a batch of
tool calls needs a person's decision; ``await lf.Agent.resume(state, decisions={...})``
continues it, in this process or another one (``state.to_json_str()`` /
``lf.RunState.from_json(text)``).

What it holds (typed fields; plain JSON, no pickles, no model objects, options or keys):
the agent's configuration (``agent``: prompt, instructions, limits, tool names), the
transcript so far (whose tool messages are the executed calls' results), the pending batch
(``batch``: every call of the model's last reply, with the decision already made for it, if
any), the steps, tool calls and budget used so far (``progress``), and the session trace
(previews, secrets redacted), so a resumed run continues under the same trace root.

A state read from JSON is checked by one strict reader (``runstate_check``): a malformed,
inconsistent or unknown-version state is an ``InvalidRunStateError`` naming what is wrong,
and the batch must be the model's tool calls in the transcript's last turn. Decisions saved
in the batch count only when the state is ``verified``: made by this process, or read with
the ``key`` it was signed with (``to_json(key=...)``, an HMAC-SHA256 over canonical JSON).

Tools that ran are never run again: their results are in the transcript, and a suspension
(its trace session, agent node and pending calls, whatever its ``id``) can be resumed only
once per process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..messages import Message, ToolCall
from .limits import AgentLimits
from .runstate_check import canonical_json, check_signature, read_state, sign
from .runstate_records import (
    RUN_STATE_FORMAT,
    RUN_STATE_VERSION,
    AgentConfig,
    BatchCall,
    Key,
    RunProgress,
    SavedDecision,
)

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .clock import Clock
    from .session import Session
    from .tools import Tool
    from .usage import Price

__all__ = [
    "RUN_STATE_FORMAT",
    "RUN_STATE_VERSION",
    "AgentConfig",
    "BatchCall",
    "RunProgress",
    "RunState",
    "SavedDecision",
]

_RESUMED: set[str] = set()  # fingerprints of the suspensions resumed in this process


@dataclass(frozen=True, slots=True)
class RunState:
    """A suspended agent run. ``pending`` lists the calls that need a decision.

    ``verified`` says whether the decisions saved in ``batch`` may be trusted: ``True`` for
    a state this process made (``invoke``) or read with its signing key; a state read from
    JSON without a key is not verified, and then its saved approvals must be decided again.
    """

    id: str
    created_at: str
    node_id: str
    agent: AgentConfig
    transcript_json: tuple[dict[str, Any], ...]
    batch: tuple[BatchCall, ...]
    progress: RunProgress
    trace: dict[str, Any] | None = None
    traceparent: str | None = None  # the suspended run's span, where it was exported
    verified: bool = dataclasses.field(default=False, compare=False, kw_only=True)
    #: the signature it was read with (written again by ``to_json`` without a key)
    mac: str | None = dataclasses.field(default=None, compare=False, repr=False, kw_only=True)
    messages: tuple[Message[Any], ...] | None = dataclasses.field(
        default=None, compare=False, repr=False, kw_only=True
    )

    # -- what a caller reads -------------------------------------------------------------
    @property
    def pending(self) -> list[ToolCall]:
        """The calls waiting for a decision, in the model's order."""
        return [b.call for b in self.batch if b.decision is None]

    @property
    def unverified_approvals(self) -> list[ToolCall]:
        """Calls approved before the suspension whose approval does not count, because the
        state is not verified: ``resume`` needs a decision for them too (or its
        ``allow_tool`` approves them again)."""
        if self.verified:
            return []
        return [
            b.call for b in self.batch if b.decision is not None and b.decision.outcome == "approve"
        ]

    @property
    def transcript(self) -> list[Message[Any]]:
        """The transcript as messages (a new list each time)."""
        if self.messages is not None:
            return list(self.messages)
        return [Message.from_json(m) for m in self.transcript_json]

    @property
    def fingerprint(self) -> str:
        """What identifies this suspension whatever its ``id``: its trace session, its agent
        node and its pending calls (ids, names, arguments). ``resume`` refuses a fingerprint
        it has resumed before in this process; to refuse replays across processes, keep the
        fingerprints of resumed states where every resumer looks."""
        session = (self.trace or {}).get("session")
        body = {
            "session": session.get("id") if isinstance(session, Mapping) else None,
            "node": self.node_id,
            "calls": [[b.call.id, b.call.name, b.call.args] for b in self.batch],
        }
        return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        names = ", ".join(f"{c.name}({c.id})" for c in self.pending)
        return f"RunState({self.agent.name!r}, pending: {names or 'none'})"

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self, *, key: Key | None = None) -> dict[str, Any]:
        """The state as JSON data; with ``key``, signed (``mac``) so that
        ``from_json(..., key=key)`` can tell that nothing in it was changed."""
        data: dict[str, Any] = {
            "format": RUN_STATE_FORMAT,
            "version": RUN_STATE_VERSION,
            "id": self.id,
            "created_at": self.created_at,
            "node_id": self.node_id,
            "agent": self.agent.to_json(),
            "transcript": list(self.transcript_json),
            "batch": [b.to_json() for b in self.batch],
            "progress": self.progress.to_json(),
        }
        if self.trace is not None:
            data["trace"] = self.trace
        if self.traceparent is not None:
            data["traceparent"] = self.traceparent
        if key is not None:
            data["mac"] = sign(data, key)
        elif self.mac is not None:
            data["mac"] = self.mac
        return data

    def to_json_str(self, *, key: Key | None = None, **kwargs: Any) -> str:
        return json.dumps(self.to_json(key=key), ensure_ascii=False, **kwargs)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str, *, key: Key | None = None) -> RunState:
        """Read a saved state strictly; ``InvalidRunStateError`` (a ``ValueError``) names
        what is wrong. With ``key`` the signature must match, and the state is verified."""
        return cls(**read_state(data, key))

    def verify(self, key: Key) -> RunState:
        """This state, verified with ``key`` (``InvalidRunStateError`` when its signature
        does not match). A state this process made is verified already."""
        if self.verified:
            return self
        check_signature(self.to_json(), key)
        return dataclasses.replace(self, verified=True)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    def check_fresh(self) -> None:
        """``RuntimeError`` when this suspension was resumed in this process already."""
        if self.fingerprint in _RESUMED:
            raise RuntimeError(
                "this RunState was already resumed: resuming it again would run its tools twice"
            )

    def consume(self) -> None:
        """Mark this suspension resumed; a second resume in this process is refused."""
        self.check_fresh()
        _RESUMED.add(self.fingerprint)


_NOT_FOR_THE_MODEL = ("usage", "metadata", "provenance", "result")


def transcript_json(message: Message[Any]) -> dict[str, Any]:
    """A transcript turn as a ``RunState`` keeps it: what a model is sent again (its parts,
    continuation data included); usage, metadata and provenance are already in the trace."""
    data = message.to_json()
    for key in _NOT_FOR_THE_MODEL:
        data.pop(key, None)
    return data


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


def agent_config(agent: _Configured) -> AgentConfig:
    """What a ``RunState`` keeps of an agent."""
    limits = agent.limits
    prompt = agent.prompt
    return AgentConfig(
        name=agent.trace_name(),
        prompt=prompt.to_json() if isinstance(prompt, Message) else prompt,
        instructions=agent.instructions,
        tools=tuple(agent.tools),
        limits={f.name: getattr(limits, f.name) for f in dataclasses.fields(limits)},
        parallel_tools=agent.parallel_tools,
        stream=agent.stream,
        output=agent.output_name,
        repair=agent.repair,
        protocol=agent.protocol,
    )


def resumed_limits(state: RunState, limits: AgentLimits | None) -> AgentLimits:
    """The limits a resumed run gets: ``limits`` when the resuming code gives them; else
    the saved ones when the state is verified (made by this process, or signed); else the
    saved ones bounded by the defaults (``AgentLimits()``), field by field. A state read
    from an unsigned file is data: it may lower a limit, never raise one."""
    if limits is not None:
        return limits
    saved = AgentLimits(**state.agent.limits)
    if state.verified:
        return saved
    default = AgentLimits()
    bounded: dict[str, Any] = {}
    for field in dataclasses.fields(AgentLimits):
        mine, cap = getattr(saved, field.name), getattr(default, field.name)
        bounded[field.name] = cap if mine is None else mine if cap is None else min(mine, cap)
    return AgentLimits(**bounded)


def rebuild_agent(
    cls: Callable[..., A],
    state: RunState,
    decisions: Mapping[str, Any] | None,
    tools: Sequence[Tool[Any, Any]],
    allow_tool: Any,
    output: Any,
    limits: AgentLimits | None = None,
) -> tuple[A, dict[str, Any]]:
    """The suspended run's agent, with checked decisions; ``ValueError`` before anything
    runs when a tool or the output type is missing or the decisions do not match. Its
    limits are ``resumed_limits(state, limits)``.

    Every pending call needs a decision; so does a call approved before the suspension
    when the state is not verified and no ``allow_tool`` is given to approve it again."""
    config = state.agent
    by_name = {t.name: t for t in tools}
    missing = [n for n in config.tools if n not in by_name]
    if missing:
        raise ValueError(f"resume needs the run's tools; missing: {', '.join(missing)}")
    if config.output is not None and output is None:
        raise ValueError(f"resume needs output= (the run's answer type, {config.output})")
    decided = dict(decisions or {})
    unknown = sorted(set(decided) - {b.call.id for b in state.batch})
    if unknown:
        raise ValueError(f"no pending call with id {', '.join(map(repr, unknown))}")
    undecided = [c.id for c in state.pending if c.id not in decided]
    if undecided:
        raise ValueError(f"a decision is needed for pending call(s) {', '.join(undecided)}")
    if allow_tool is None:
        unverified = [c.id for c in state.unverified_approvals if c.id not in decided]
        if unverified:
            raise ValueError(
                f"a decision is needed for call(s) {', '.join(unverified)}: approved before "
                "the suspension, but the state is not verified, so that approval does not "
                "count (sign states with to_json(key=...) and resume with key=...)"
            )
    prompt = config.prompt
    agent = cls(
        Message.from_json(prompt) if isinstance(prompt, dict) else prompt,
        config.instructions,
        tools=[by_name[n] for n in config.tools],
        limits=resumed_limits(state, limits),
        allow_tool=allow_tool,
        parallel_tools=config.parallel_tools,
        stream=config.stream,
        name=config.name,
        output=output,
        repair=config.repair,
        protocol=config.protocol,
    )
    return agent, decided


def _step_prompts(
    nodes: list[dict[str, Any]], transcript: Sequence[Any], agent_ids: set[str]
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
    trace: dict[str, Any], transcript: Sequence[dict[str, Any]], agent_ids: set[str]
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
    from .preview import MAX_PREVIEW_TURNS, turn_preview, turns_preview

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
