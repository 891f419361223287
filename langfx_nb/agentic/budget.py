"""Token and cost budgets for whole runs: a session, an invocation, an agent.

A ``Budget`` is configuration (limits); a ``BudgetScope`` is one run's spending against it.
Scopes nest: an invocation's scope has its caller's as parent, and every model response
is charged to the scope it was made in *and all of its ancestors*, so concurrent branches
and nested agents draw on the same remaining amount. Each model request is checked first
against the usage known so far (a scope already at or over a limit refuses it) and each
response afterwards (a scope pushed over a limit raises). Either way the error is a
``BudgetExceededError`` that names the budget, its limit and what was used.

Usage the provider did not report is not guessed: unknown counts charge nothing. Cost is
the session's price table applied to each response (batch prices for a provider batch's
answers, nothing for an LLM-cache hit); a ``max_cost`` with a model that has no price is
refused before the request, since the budget could not be enforced. Prompt-cache reads and
writes count as input tokens (the providers bill them as such) and are kept apart in
``used()`` too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import BudgetExceededError
from ..messages import AIMessage, Usage
from .prices import is_batch
from .usage import Price, find_price

__all__ = ["BUDGET_FIELDS", "Budget", "BudgetScope"]

BUDGET_FIELDS = ("max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost")


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on what a run may spend (``None`` = no limit). Tokens as the provider reports
    them; ``max_cost`` in the currency of the session's ``prices``."""

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None

    def __post_init__(self) -> None:
        for name in BUDGET_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "max_cost":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                ok = ok and math.isfinite(value) and value >= 0
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            if not ok:
                raise ValueError(f"{name} must be a non-negative number (or None), not {value!r}")

    @property
    def is_unlimited(self) -> bool:
        return all(getattr(self, name) is None for name in BUDGET_FIELDS)

    def tighter(self, other: Budget | None) -> Budget:
        """Each limit the smaller of the two."""
        if other is None:
            return self
        values = {}
        for name in BUDGET_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            values[name] = mine if theirs is None else theirs if mine is None else min(mine, theirs)
        return Budget(**values)

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


class BudgetScope:
    """What one run has spent against its ``Budget``; charged together with its ancestors."""

    __slots__ = (
        "budget",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost",
        "input_tokens",
        "output_tokens",
        "parent",
        "total_tokens",
    )

    def __init__(self, budget: Budget, parent: BudgetScope | None = None) -> None:
        self.budget = budget
        self.parent = parent
        self.input_tokens = 0
        self.output_tokens = 0
        self.total_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.cost = 0.0

    def used(self) -> dict[str, Any]:
        """Spent so far, as JSON data (saved in a ``RunState``)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost": self.cost,
        }

    def restore(self, used: Mapping[str, Any]) -> None:
        self.input_tokens = int(used.get("input_tokens", 0))
        self.output_tokens = int(used.get("output_tokens", 0))
        self.total_tokens = int(used.get("total_tokens", 0))
        self.cache_read_tokens = int(used.get("cache_read_tokens", 0))
        self.cache_write_tokens = int(used.get("cache_write_tokens", 0))
        self.cost = float(used.get("cost", 0.0))

    def _spent(self, name: str) -> float:
        if name == "max_input_tokens":
            return self.input_tokens
        if name == "max_output_tokens":
            return self.output_tokens
        if name == "max_total_tokens":
            return self.total_tokens
        return self.cost

    def check_request(self, model_id: str, prices: Mapping[str, Price]) -> None:
        """Before a model request: refuse it if any scope up the chain has nothing left."""
        scope: BudgetScope | None = self
        while scope is not None:
            budget = scope.budget
            for name in BUDGET_FIELDS:
                limit = getattr(budget, name)
                if limit is None:
                    continue
                if name == "max_cost" and find_price(prices, model_id) is None:
                    raise BudgetExceededError(
                        f"max_cost={limit} cannot be enforced: the session has no price for "
                        f"model {model_id!r} (Session(prices={{...}}))"
                    )
                spent = scope._spent(name)
                if spent >= limit:
                    raise _exceeded(name, limit, spent, "before the next model request")
            scope = scope.parent

    def hooks(
        self, model_id: str, prices: Mapping[str, Price]
    ) -> tuple[Callable[[], None], Callable[[AIMessage[Any]], None]]:
        """(check before a request, charge after a response) for one model's calls."""

        def before() -> None:
            self.check_request(model_id, prices)

        def after(response: AIMessage[Any]) -> None:
            provenance = response.provenance
            self.charge(
                (provenance.model if provenance else None) or model_id,
                response.usage,
                prices,
                batch=is_batch(response),
                replayed=bool(response.metadata.get("cache_hit")),
            )

        return before, after

    def exhausted(self) -> bool:
        """Whether this scope or an ancestor has reached one of its limits."""
        scope: BudgetScope | None = self
        while scope is not None:
            for name in BUDGET_FIELDS:
                limit = getattr(scope.budget, name)
                if limit is not None and scope._spent(name) >= limit:
                    return True
            scope = scope.parent
        return False

    def charge(
        self,
        model_id: str,
        usage: Usage | None,
        prices: Mapping[str, Price],
        *,
        batch: bool = False,
        replayed: bool = False,
    ) -> None:
        """After a response: add its usage (and cost: batch prices for a provider batch's
        answer, none for an LLM-cache replay) to every scope up the chain, then raise for
        the first limit that is now exceeded."""
        if usage is None:
            return
        prompt = usage.prompt_tokens or 0
        completion = usage.completion_tokens or 0
        total = usage.total_tokens if usage.total_tokens is not None else prompt + completion
        price = find_price(prices, model_id)
        cost = price.cost(usage, batch=batch) if price is not None and not replayed else 0.0
        cache_read, cache_write = usage.cached_tokens or 0, usage.cache_write_tokens or 0
        over: BudgetExceededError | None = None
        scope: BudgetScope | None = self
        while scope is not None:
            scope.input_tokens += prompt
            scope.output_tokens += completion
            scope.total_tokens += total
            scope.cache_read_tokens += cache_read
            scope.cache_write_tokens += cache_write
            scope.cost += cost
            if over is None:
                for name in BUDGET_FIELDS:
                    limit = getattr(scope.budget, name)
                    if limit is not None and scope._spent(name) > limit:
                        over = _exceeded(name, limit, scope._spent(name), "after a model response")
                        break
            scope = scope.parent
        if over is not None:
            raise over


def _exceeded(name: str, limit: float, spent: float, when: str) -> BudgetExceededError:
    shown = f"{spent:.6g}" if name == "max_cost" else str(int(spent))
    return BudgetExceededError(
        f"budget {name}={limit} exceeded {when} ({shown} used)",
        budget=name,
        limit=limit,
        used=spent,
    )
