"""Token and cost budgets for whole runs: a session, an invocation, an agent.

A ``Budget`` is configuration (limits); a ``BudgetScope`` is one run's spending against it.
Scopes nest: an invocation's scope has its caller's as parent, and every model response
is charged to the scope it was made in *and all of its ancestors*, so concurrent branches
and nested agents draw on the same remaining amount.

Each model request first *reserves* what it may spend, in every scope up the chain: its
prompt (estimated at four characters a token) and its ``max_tokens``, which the budget caps
at what is left once the calls already in flight have reserved theirs. A request that does
not fit waits for calls in flight (other tasks') to come back and return what they did not
use; with nothing in flight it goes out with the cap that is left, or is refused when
nothing is. When the response comes back the reservation is replaced by the real usage, and
a scope pushed over a limit raises; an error or a cancellation just releases it. A stream is
stopped as soon as the output it has received (estimated from its text) passes what the
budget has for it. Every error is a ``BudgetExceededError`` that names the budget, its limit
and what was used.

So a model that honours ``max_tokens`` overshoots a limit only by what the prompt estimate
under-counted, for one request; one that ignores it is stopped mid-stream, or, answering in
one piece, after that answer (which the budget cannot prevent). A response without usage is
charged its estimate (prompt and answer text), and so is what a stream received before it
stopped. Cost is the session's price table applied to each response (batch prices for a
provider batch's answer). An answer replayed from the LLM cache was not paid for and is not
charged at all, and the budget's cap on ``max_tokens`` is not part of the cache key, so it
never hides a stored answer. A ``max_cost`` with a model that has no price is refused before
the request, since it could not be enforced. Prompt-cache reads and
writes count as input tokens (the providers bill them as such) and are kept apart in
``used()`` too.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import BudgetExceededError
from ..llms.base import LMRequest
from ..llms.streaming import StreamChunk, ToolCallDelta
from ..messages import AIMessage, Usage
from .prices import is_batch
from .usage import Price, find_price

__all__ = ["BUDGET_FIELDS", "Budget", "BudgetMeter", "BudgetScope", "Reservation"]

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
    """What one run has spent against its ``Budget``, and what the calls in flight reserved;
    charged together with its ancestors."""

    __slots__ = (
        "_in_flight",
        "_reserved",
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
        self._reserved: dict[str, float] = dict.fromkeys(BUDGET_FIELDS, 0.0)
        self._in_flight: set[Reservation] = set()

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

    def reserved(self) -> dict[str, float]:
        """What the model calls in flight have reserved, per limit this scope has (empty when
        none is in flight)."""
        return {
            name: amount
            for name, amount in self._reserved.items()
            if amount and getattr(self.budget, name) is not None
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

    def _chain(self) -> Iterator[BudgetScope]:
        scope: BudgetScope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def _limits(self) -> Iterator[tuple[BudgetScope, str, float]]:
        """Each limit set here and up the chain, with its scope, nearest scope first."""
        for scope in self._chain():
            for name in BUDGET_FIELDS:
                limit = getattr(scope.budget, name)
                if limit is not None:
                    yield scope, name, limit

    def meter(self, model_id: str, prices: Mapping[str, Price]) -> BudgetMeter:
        """What reserves, caps and charges one model's calls against this scope."""
        return BudgetMeter(self, model_id, prices)

    def exhausted(self) -> bool:
        """Whether this scope or an ancestor has reached one of its limits."""
        return any(scope._spent(name) >= limit for scope, name, limit in self._limits())

    def charge(
        self,
        model_id: str,
        usage: Usage | None,
        prices: Mapping[str, Price],
        *,
        batch: bool = False,
    ) -> None:
        """After a response: add its usage (and cost: batch prices for a provider batch's
        answer) to every scope up the chain, then raise for the first limit that is now
        exceeded."""
        if usage is None:
            return
        price = find_price(prices, model_id)
        cost = price.cost(usage, batch=batch) if price is not None else 0.0
        over = self._add(usage, cost)
        if over is not None:
            raise over

    def _add(self, usage: Usage, cost: float) -> BudgetExceededError | None:
        """Add ``usage`` up the chain; the error for the first limit now exceeded, if any."""
        prompt = usage.prompt_tokens or 0
        completion = usage.completion_tokens or 0
        total = usage.total_tokens if usage.total_tokens is not None else prompt + completion
        cache_read, cache_write = usage.cached_tokens or 0, usage.cache_write_tokens or 0
        for scope in self._chain():
            scope.input_tokens += prompt
            scope.output_tokens += completion
            scope.total_tokens += total
            scope.cache_read_tokens += cache_read
            scope.cache_write_tokens += cache_write
            scope.cost += cost
        for scope, name, limit in self._limits():
            if scope._spent(name) > limit:
                return _exceeded(name, limit, scope._spent(name), "after a model response")
        return None


#: Characters per token when a count has to be estimated (a prompt before it is sent, a
#: stream's output before its usage arrives): about right for English text and code.
CHARS_PER_TOKEN = 4
_TURN_OVERHEAD = 4  # tokens a provider adds around each turn (role markers)


def estimate_tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def prompt_estimate(request: LMRequest) -> int:
    """Tokens ``request``'s prompt is expected to cost: its text, tool calls, tool specs and
    schema at four characters a token, plus a few per turn (media count as placeholders)."""
    chars = len(request.system or "")
    for m in request.messages:
        chars += len(m.text) + sum(len(c.name) + len(json.dumps(c.args)) for c in m.tool_calls)
    if request.tools:
        chars += len(json.dumps([t.to_json() for t in request.tools], default=str))
    if request.response_schema is not None:
        chars += len(json.dumps(request.response_schema, default=str))
    return estimate_tokens(chars) + _TURN_OVERHEAD * len(request.messages)


def _output_chars(message: AIMessage[Any]) -> int:
    return len(message.text) + sum(len(json.dumps(c.args)) for c in message.tool_calls)


class BudgetMeter:
    """Reserves, caps and charges one model's requests against a scope and its ancestors."""

    __slots__ = ("model_id", "price", "prices", "scope")

    def __init__(self, scope: BudgetScope, model_id: str, prices: Mapping[str, Price]) -> None:
        self.scope = scope
        self.model_id = model_id
        self.prices = prices
        self.price = find_price(prices, model_id)

    def check_request(self) -> None:
        """Refuse a request when any scope up the chain has nothing left (a cached answer
        is checked only so)."""
        for scope, name, limit in self._limits():
            spent = scope._spent(name)
            if spent >= limit:
                raise _exceeded(name, limit, spent, "before the next model request")

    def _limits(self) -> Iterator[tuple[BudgetScope, str, float]]:
        """The scope chain's limits; a ``max_cost`` this model has no price for is refused."""
        for scope, name, limit in self.scope._limits():
            if name == "max_cost" and self.price is None:
                raise BudgetExceededError(
                    f"max_cost={limit} cannot be enforced: the session has no price for "
                    f"model {self.model_id!r} (Session(prices={{...}}))"
                )
            yield scope, name, limit

    def _room(
        self, prompt: int, mine: Reservation | None = None
    ) -> tuple[float, str | None, BudgetScope]:
        """Output tokens the budget has for a request with a ``prompt``-token prompt, after
        what is spent and what the other calls in flight reserved (``mine`` excluded), and
        the limit that binds and its scope (``math.inf, None``: nothing bounds it). Negative
        when the prompt alone does not fit."""
        room, binding, where = math.inf, None, self.scope
        for scope, name, limit in self._limits():
            left = limit - scope._spent(name) - scope._reserved[name]
            if mine is not None:
                left += mine.amounts[name]
            here = self._room_for(name, left, prompt)
            if here < room:
                room, binding, where = here, name, scope
        return room, binding, where

    def _room_for(self, name: str, left: float, prompt: int) -> float:
        if name == "max_output_tokens":
            return left
        if name == "max_total_tokens":
            return left - prompt
        if name == "max_input_tokens":  # it bounds no output: all or nothing
            return math.inf if left - prompt >= 0 else -1.0
        assert self.price is not None
        left -= prompt * self.price.prompt / 1_000_000
        if left < 0:
            return -1.0
        per_token = self.price.completion / 1_000_000
        return left / per_token if per_token > 0 else math.inf

    def _amounts(self, prompt: int, cap: int | None) -> dict[str, float]:
        out = cap or 0
        cost = 0.0
        if self.price is not None:
            cost = (prompt * self.price.prompt + out * self.price.completion) / 1_000_000
        return {
            "max_input_tokens": prompt,
            "max_output_tokens": out,
            "max_total_tokens": prompt + out,
            "max_cost": cost,
        }

    async def reserve(self, request: LMRequest) -> Reservation:
        """Reserve what ``request`` may spend; its ``max_tokens`` capped by what is left.

        A scope at or over a limit refuses it (``BudgetExceededError``). A request that does
        not fit (its own ``max_tokens``, or any amount when it has none) waits while other
        tasks' calls are in flight; then it goes with the cap that is left, at least one
        token more than its ``thinking_budget`` (so it passes a limit by at most its own
        prompt and that token). Cancellation while waiting reserves nothing."""
        prompt = prompt_estimate(request)
        want = request.options.max_tokens
        least = (request.options.thinking_budget or 0) + 1
        while True:
            self.check_request()
            room, _, _ = self._room(prompt)
            if room >= (want if want is not None else math.inf):
                return self._take(prompt, want)
            others = self._others()
            if not others:
                return self._take(prompt, max(least, int(room)))
            await asyncio.wait(others, return_when=asyncio.FIRST_COMPLETED)

    def _others(self) -> set[asyncio.Future[None]]:
        """The completion futures of calls in flight in this chain, from other tasks."""
        task = asyncio.current_task()
        return {
            r.done for scope in self.scope._chain() for r in scope._in_flight if r.task is not task
        }

    def _take(self, prompt: int, cap: int | None) -> Reservation:
        reservation = Reservation(self, prompt, cap, self._amounts(prompt, cap))
        for scope in self.scope._chain():
            scope._in_flight.add(reservation)
            for name, amount in reservation.amounts.items():
                scope._reserved[name] += amount
        return reservation


class Reservation:
    """One request's claim on its scopes: ``max_tokens`` (``None``: not capped) and the
    amounts held, until ``settle`` (a response) or ``release`` (an error, a cancellation)."""

    __slots__ = ("amounts", "done", "max_tokens", "meter", "output_chars", "prompt", "task")

    def __init__(
        self, meter: BudgetMeter, prompt: int, max_tokens: int | None, amounts: dict[str, float]
    ) -> None:
        self.meter = meter
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.amounts = amounts
        self.output_chars = 0
        self.task = asyncio.current_task()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def release(self) -> None:
        """Return what was reserved (idempotent); waiting requests look again."""
        if self.done.done():
            return
        self.done.set_result(None)
        for scope in self.meter.scope._chain():
            scope._in_flight.discard(self)
            for name, amount in self.amounts.items():
                scope._reserved[name] -= amount

    def settle(self, response: AIMessage[Any]) -> None:
        """Replace the reservation by the response's usage (its estimate when it reported
        none); raise for a limit now exceeded. An answer replayed from the LLM cache
        (``cache_hit``) was not paid for: it is not charged."""
        self.release()
        if response.metadata.get("cache_hit"):
            return
        usage = response.usage
        if usage is None:
            usage = self._estimate(estimate_tokens(_output_chars(response)))
        meter = self.meter
        provenance = response.provenance
        meter.scope.charge(
            (provenance.model if provenance else None) or meter.model_id,
            usage,
            meter.prices,
            batch=is_batch(response),
        )

    def observe(self, chunk: StreamChunk) -> None:
        """A stream's chunk: stop the stream (``BudgetExceededError``, what it received
        charged) once its output passes what the budget has for it."""
        self.output_chars += len(chunk.delta) + sum(
            len(e.delta) for e in chunk.events if isinstance(e, ToolCallDelta)
        )
        output = estimate_tokens(self.output_chars)
        if self.max_tokens is None or output <= self.max_tokens:
            return  # within its own reservation: nothing can be passed
        room, binding, scope = self.meter._room(self.prompt, mine=self)
        if output <= room:
            return
        assert binding is not None
        self.stopped()
        limit = getattr(scope.budget, binding)
        raise _exceeded(binding, limit, scope._spent(binding), "while streaming")

    def stopped(self) -> None:
        """A stream that ended without its final chunk: release, and charge what it received
        (estimated; the provider reports no usage for a stream cut short)."""
        if self.done.done():
            return
        self.release()
        if self.output_chars:
            self.meter.scope._add(self._estimate(estimate_tokens(self.output_chars)), self._cost())

    def _estimate(self, output: int) -> Usage:
        return Usage(self.prompt, output, self.prompt + output)

    def _cost(self) -> float:
        price = self.meter.price
        usage = self._estimate(estimate_tokens(self.output_chars))
        return price.cost(usage) if price is not None else 0.0


def _exceeded(name: str, limit: float, spent: float, when: str) -> BudgetExceededError:
    shown = f"{spent:.6g}" if name == "max_cost" else str(int(spent))
    return BudgetExceededError(
        f"budget {name}={limit} exceeded {when} ({shown} used)",
        budget=name,
        limit=limit,
        used=spent,
    )
