"""The plain records a ``RunState`` is made of, and its format's name and version.

``runstate`` (the state and what resumes it) and ``runstate_check`` (its strict reader)
both build these; neither imports the other's internals through them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ..messages import ToolCall

__all__ = [
    "RUN_STATE_FORMAT",
    "RUN_STATE_VERSION",
    "AgentConfig",
    "BatchCall",
    "Key",
    "RunProgress",
    "SavedDecision",
]

RUN_STATE_FORMAT = "langfx_nb.run_state"
#: 2: ids are unique per turn (no ``progress.used_ids``), decisions strictly typed, an
#: optional ``mac``. Version 1 states are still read.
RUN_STATE_VERSION = 2

Key = bytes | str


@dataclass(frozen=True, slots=True)
class SavedDecision:
    """A decision the run's ``allow_tool`` made before the suspension: ``approve`` (with
    ``args`` when it edited the arguments) or ``deny`` (``message`` goes to the model)."""

    outcome: Literal["approve", "deny"]
    by: str | None = None
    args: dict[str, Any] | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"outcome": self.outcome, "by": self.by}
        if self.outcome == "deny":
            out["message"] = self.message or ""
        elif self.args is not None:
            out["args"] = self.args
        return out


@dataclass(frozen=True, slots=True)
class BatchCall:
    """One call of the suspended step; ``decision`` is ``None`` while it waits."""

    call: ToolCall
    decision: SavedDecision | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call.id,
            "name": self.call.name,
            "args": self.call.args,
            "decision": None if self.decision is None else self.decision.to_json(),
        }


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """What a ``RunState`` keeps of an agent: plain data (tool *names*, the answer type's
    name); tools, models and types are given again on resume."""

    name: str
    prompt: str | dict[str, Any]  # text, or a message's JSON
    instructions: str | None
    tools: tuple[str, ...]
    limits: dict[str, Any]  # ``AgentLimits`` fields
    parallel_tools: bool = False
    stream: bool = False
    output: str | None = None
    repair: int = 0
    protocol: str = "json"

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["tools"] = list(self.tools)
        return data


@dataclass(frozen=True, slots=True)
class RunProgress:
    """What the run had used when it was suspended (carried on by the resumed run)."""

    steps: int
    tool_calls: int
    repairs: int = 0
    budget_used: dict[str, float] | None = None  # ``lf.Budget`` usage, when limited
    agent_nodes: tuple[str, ...] = ()  # the run's agent nodes so far, the suspended one last

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "budget_used": self.budget_used,
            "agent_nodes": list(self.agent_nodes),
            "repairs": self.repairs,
        }
