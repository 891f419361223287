"""Token totals and cost: per model, kept exact even when trace details are evicted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ..messages import USAGE_FIELDS, Usage

__all__ = [
    "ModelUsage",
    "Price",
    "UsageMeter",
    "UsageSummary",
    "cost_label",
    "fmt_money",
    "total_tokens",
]


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars (or any currency) per million tokens for one model id.

    ``cached_prompt`` prices prompt tokens read from the provider's prompt cache
    (``Usage.cached_tokens``) and ``cache_write`` those written to it
    (``Usage.cache_write_tokens``); without them they cost the ``prompt`` price. Reasoning
    tokens are counted in completion tokens (every provider bills them as output).
    ``batch`` is the price of a request sent through a provider's batch API; without it a
    batch request costs half of every rate (what the providers' batch APIs charge).
    ``tiers`` are long-context prices as the providers bill them: when a request's prompt
    has more than ``threshold`` tokens, all of its tokens pay that tier's price.
    """

    prompt: float
    completion: float
    cached_prompt: float | None = None
    cache_write: float | None = None
    batch: Price | None = None
    tiers: tuple[tuple[int, Price], ...] = ()

    def cost(self, usage: Usage, *, batch: bool = False) -> float:
        """The cost of one request's (or, without tiers, of summed) ``usage``."""
        price = self
        if batch:
            price = self.batch if self.batch is not None else self.scaled(0.5)
        prompt = usage.prompt_tokens or 0
        for threshold, tier in price.tiers:
            if prompt > threshold:
                price = tier
        cached = min(usage.cached_tokens or 0, prompt)
        written = min(usage.cache_write_tokens or 0, prompt - cached)
        read_price = price.prompt if price.cached_prompt is None else price.cached_prompt
        write_price = price.prompt if price.cache_write is None else price.cache_write
        return (
            (prompt - cached - written) * price.prompt
            + cached * read_price
            + written * write_price
            + (usage.completion_tokens or 0) * price.completion
        ) / 1_000_000

    def scaled(self, factor: float) -> Price:
        """Every rate (and tier) times ``factor``."""

        def times(value: float | None) -> float | None:
            return None if value is None else value * factor

        return Price(
            self.prompt * factor,
            self.completion * factor,
            times(self.cached_prompt),
            times(self.cache_write),
            None,
            tuple((threshold, tier.scaled(factor)) for threshold, tier in self.tiers),
        )


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
    ``unpriced_models`` lists the others, so a partial cost is never mistaken for a total;
    ``unpriced_requests`` counts their requests (``cost_text`` labels the sum).
    ``counts`` is ``{kind: {status: n}}`` over every finished node, evicted or not."""

    requests: int
    usage: Usage
    cost: float | None
    by_model: Mapping[str, ModelUsage]
    unpriced_models: tuple[str, ...]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    evicted_nodes: int = 0
    unpriced_requests: int = 0

    @property
    def cost_text(self) -> str:
        """``$1.23``, ``≥ $1.23 (3 calls unpriced: fake:b)`` or ``cost unknown``."""
        return cost_label(self.cost, self.unpriced_requests, self.unpriced_models)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "usage": self.usage.to_json(),
            "cost": self.cost,
            "by_model": {k: v.to_json() for k, v in self.by_model.items()},
            "unpriced_models": list(self.unpriced_models),
            "unpriced_requests": self.unpriced_requests,
            "counts": {k: dict(v) for k, v in self.counts.items()},
            "evicted_nodes": self.evicted_nodes,
        }


def find_price(prices: Mapping[str, Price], model_id: str) -> Price | None:
    """Exact model id (``provider:model``) first, then the bare model name (a ``Prices``
    table then asks its default source)."""
    find = getattr(prices, "find", None)
    if find is not None:
        found: Price | None = find(model_id)
        return found
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

    __slots__ = ("_cost", "_pending", "_requests", "_unpriced", "_usage")

    def __init__(self) -> None:
        self._requests: dict[str, int] = {}
        self._usage: dict[str, Usage] = {}
        self._pending: list[tuple[str, Usage]] = []
        self._cost: dict[str, float] = {}
        self._unpriced: dict[str, int] = {}  # per model: requests of unknown cost

    def add(self, model_id: str, usage: Usage | None, cost: float | None = None) -> None:
        """One model request, the usage its response reported and what it cost (``None``:
        unknown)."""
        self._requests[model_id] = self._requests.get(model_id, 0) + 1
        if cost is None:
            self._unpriced[model_id] = self._unpriced.get(model_id, 0) + 1
        else:
            self._cost[model_id] = self._cost.get(model_id, 0.0) + cost
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

    def cost(self) -> tuple[float | None, tuple[str, ...]]:
        """(cost of the priced requests or ``None`` if none was priced, the models with a
        request of unknown cost)."""
        cost = sum(self._cost.values()) if self._cost else None
        return cost, tuple(m for m in self._requests if m in self._unpriced)

    @property
    def unpriced_requests(self) -> int:
        """How many requests have an unknown cost (left out of ``cost()``'s sum)."""
        return sum(self._unpriced.values())

    def to_json(self) -> dict[str, Any]:
        """Per model: its ``ModelUsage`` JSON (requests, tokens, cost of the priced ones),
        and how many of its requests have an unknown cost (what a run manifest stores)."""
        by_model = {
            m: ModelUsage(e.requests, e.usage, self._cost.get(m)).to_json()
            for m, e in self.by_model().items()
        }
        return {"by_model": by_model, "unpriced": dict(self._unpriced)}


def fmt_money(cost: float) -> str:
    """``$1.23``; below a cent, at least four decimals and as many more as keep two
    significant digits (``$0.0042``, ``$0.000011`` for 0.0000107), so a small known cost
    never reads as ``$0.0000``. Rounded as JavaScript's ``toFixed`` rounds (half up, on the
    exact value), with the digits chosen from the shortest repr (what JavaScript's
    ``toExponential`` shows), so the widgets show the same text (``js/src/dom.ts``)."""
    digits = 2
    if cost < 0.01:
        digits = 4
        if cost > 0:
            digits = min(100, max(4, 1 - Decimal(repr(cost)).adjusted()))
    exact = Decimal(cost).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"${exact:f}"


def cost_label(cost: float | None, unpriced: int = 0, models: Sequence[str] = ()) -> str:
    """A cost total as a reader should see it, never an unknown shown as ``$0``:
    ``$1.23`` when every call was priced; ``≥ $1.23 (3 calls unpriced)`` when ``unpriced``
    calls (or calls of ``models``) are left out of it; ``cost unknown (3 calls unpriced)``
    when nothing was priced. ``models`` (the unpriced model ids) are named after the count:
    ``≥ $1.23 (3 calls unpriced: fake:b)``."""
    names = ", ".join(models)
    if unpriced:
        why = f"{unpriced:,} call{'' if unpriced == 1 else 's'} unpriced"
        why += f": {names}" if names else ""
    else:
        why = f"no price for {names}" if names else ""
    if cost is None:
        return f"cost unknown ({why})" if why else "cost unknown"
    money = fmt_money(cost)
    return f"≥ {money} ({why})" if why else money


def total_tokens(usage: Usage) -> int:
    """``total_tokens``, or prompt plus completion when the provider gave no total."""
    if usage.total_tokens is not None:
        return usage.total_tokens
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
