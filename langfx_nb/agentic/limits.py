"""AgentLimits: what one agent run may use (steps, tool calls, seconds, tokens and cost)."""

from __future__ import annotations

from dataclasses import dataclass

from .budget import Budget

__all__ = ["AgentLimits"]


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
