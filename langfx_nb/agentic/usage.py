"""Token totals and cost: per model, kept exact even when trace details are evicted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import Usage

__all__ = ["ModelUsage", "Price", "UsageSummary"]


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars (or any currency) per million tokens for one model id.

    ``cached_prompt`` prices the cached share of prompt tokens; without it cached tokens cost
    the ``prompt`` price. Reasoning tokens are assumed to be counted in completion tokens.
    """

    prompt: float
    completion: float
    cached_prompt: float | None = None

    def cost(self, usage: Usage) -> float:
        prompt = usage.prompt_tokens or 0
        cached = min(usage.cached_tokens or 0, prompt)
        cached_price = self.prompt if self.cached_prompt is None else self.cached_prompt
        return (
            (prompt - cached) * self.prompt
            + cached * cached_price
            + (usage.completion_tokens or 0) * self.completion
        ) / 1_000_000


@dataclass(frozen=True, slots=True)
class ModelUsage:
    requests: int
    usage: Usage
    cost: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": self.requests, "usage": self.usage.to_json()}
        if self.cost is not None:
            out["cost"] = self.cost
        return out


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """What a session spent. ``cost`` sums the models with a known price (``None`` if none);
    ``unpriced_models`` lists the others, so a partial cost is never mistaken for a total.
    ``counts`` is ``{kind: {status: n}}`` over every finished node, evicted or not."""

    requests: int
    usage: Usage
    cost: float | None
    by_model: Mapping[str, ModelUsage]
    unpriced_models: tuple[str, ...]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    evicted_nodes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "usage": self.usage.to_json(),
            "cost": self.cost,
            "by_model": {k: v.to_json() for k, v in self.by_model.items()},
            "unpriced_models": list(self.unpriced_models),
            "counts": {k: dict(v) for k, v in self.counts.items()},
            "evicted_nodes": self.evicted_nodes,
        }


def find_price(prices: Mapping[str, Price], model_id: str) -> Price | None:
    """Exact model id (``provider:model``) first, then the bare model name."""
    price = prices.get(model_id)
    if price is None and ":" in model_id:
        price = prices.get(model_id.split(":", 1)[1])
    return price
