"""Actions, sessions and their traces; tools and the bounded agent loop."""

from __future__ import annotations

from .action import Action
from .agent import Agent, AgentLimits, Approve, Deny, PolicyDecision, ToolPolicy
from .budget import Budget, BudgetScope
from .clock import Clock, FakeClock, MonotonicClock
from .prices import Prices
from .runstate import RunState
from .session import Session
from .tools import Tool, strict_json, tool
from .trace import NodeKind, NodeStatus, TraceNode, TraceStore
from .usage import ModelUsage, Price, UsageSummary

__all__ = [
    "Action",
    "Agent",
    "AgentLimits",
    "Approve",
    "Budget",
    "BudgetScope",
    "Clock",
    "Deny",
    "FakeClock",
    "ModelUsage",
    "MonotonicClock",
    "NodeKind",
    "NodeStatus",
    "PolicyDecision",
    "Price",
    "Prices",
    "RunState",
    "Session",
    "Tool",
    "ToolPolicy",
    "TraceNode",
    "TraceStore",
    "UsageSummary",
    "strict_json",
    "tool",
]
