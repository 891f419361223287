"""Token totals and cost: per model, kept exact even when trace details are evicted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import USAGE_FIELDS, Usage

__all__ = ["ModelUsage", "Price", "UsageMeter", "UsageSummary", "total_tokens"]


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


class UsageMeter:
    """Counts the model requests, tokens and cost of one piece of work, exactly.

    ``Session.track(..., meter=m)`` charges ``m`` with every model response recorded under
    the tracked node, its descendants included (a view passes its meters on to the views it
    binds), however many trace nodes the store has evicted since. ``lf.batch`` reads its
    totals and progress from one.
    """

    __slots__ = ("_pending", "_requests", "_usage")

    def __init__(self) -> None:
        self._requests: dict[str, int] = {}
        self._usage: dict[str, Usage] = {}
        self._pending: list[tuple[str, Usage]] = []

    def add(self, model_id: str, usage: Usage | None) -> None:
        """One model request and the usage its response reported (``None``: unknown)."""
        self._requests[model_id] = self._requests.get(model_id, 0) + 1
        if usage is not None:
            self._pending.append((model_id, usage))
            if len(self._pending) >= 1024:
                self._fold()

    def _fold(self) -> None:
        pending, self._pending = self._pending, []
        sums: dict[str, list[list[int]]] = {}
        for model_id, usage in pending:
            rows = sums.get(model_id)
            if rows is None:
                rows = sums[model_id] = [[] for _ in USAGE_FIELDS]
            for row, name in zip(rows, USAGE_FIELDS, strict=True):
                value = getattr(usage, name)
                if value is not None:
                    row.append(value)
        for model_id, rows in sums.items():
            folded = Usage(*(sum(row) if row else None for row in rows))
            prior = self._usage.get(model_id)
            self._usage[model_id] = folded if prior is None else prior + folded

    @property
    def requests(self) -> int:
        return sum(self._requests.values())

    def by_model(self) -> dict[str, ModelUsage]:
        """Requests and usage per model id (cost not set: see ``summary``)."""
        self._fold()
        return {m: ModelUsage(n, self._usage.get(m, Usage())) for m, n in self._requests.items()}

    @property
    def usage(self) -> Usage:
        total = Usage()
        for entry in self.by_model().values():
            total = total + entry.usage
        return total

    def cost(self, prices: Mapping[str, Price]) -> tuple[float | None, tuple[str, ...]]:
        """(cost of the priced models or ``None`` if none was priced, the unpriced ones)."""
        cost: float | None = None
        unpriced: list[str] = []
        for model_id, entry in self.by_model().items():
            price = find_price(prices, model_id)
            if price is None:
                unpriced.append(model_id)
            else:
                cost = (cost or 0.0) + price.cost(entry.usage)
        return cost, tuple(unpriced)


def total_tokens(usage: Usage) -> int:
    """``total_tokens``, or prompt plus completion when the provider gave no total."""
    if usage.total_tokens is not None:
        return usage.total_tokens
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
