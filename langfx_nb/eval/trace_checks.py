"""Evaluators that judge *how* a case was answered, from its trace.

An evaluator's ``ctx.trace`` is the ``TraceNode`` the case's task ran under; these
read its subtree through public node attributes only (``walk()``, ``kind``, ``name``,
``status``, ``usage``, ``metadata``). A case whose trace is not available (``None``: the
session evicted it, or the task ran elsewhere) is an error for these, never a pass.

- ``tool_called(name)`` / ``tool_not_called(name)``: a ``tool_call`` node named ``name`` ran
  (a denied call, or one refused at validation, did not run).
- ``max_steps(n)``: at most ``n`` model requests (``query`` nodes; a repair attempt is part
  of its query).
- ``max_cost(bound, prices=...)``: the case's model requests cost at most ``bound``, priced
  with ``prices`` (model id → ``lf.Price``) or the ``cost`` a node carries in its metadata. A
  request with no known price is an error: a partial cost is never taken for the total.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..agentic.trace import TraceNode
from ..agentic.usage import Price, find_price
from .context import EvalContext
from .score import Score

__all__ = ["max_cost", "max_steps", "tool_called", "tool_not_called", "trace_cost"]


def _nodes(trace: Any) -> Iterator[TraceNode]:
    if trace is None:
        raise ValueError("this case has no trace to check (evicted, or not recorded)")
    if not isinstance(trace, TraceNode):
        raise TypeError(f"a trace is a TraceNode, not {type(trace).__name__}")
    return trace.walk()


def _ran(node: TraceNode, tool: str) -> bool:
    return (
        node.kind == "tool_call"
        and node.name == tool
        and node.status != "denied"
        and node.metadata.get("executed") is not False
    )


def _requests(trace: Any) -> list[TraceNode]:
    """Query nodes that are not repair attempts of another query."""
    nodes = list(_nodes(trace))
    by_id = {n.id: n for n in nodes}
    return [
        n
        for n in nodes
        if n.kind == "query" and not (n.parent_id in by_id and by_id[n.parent_id].kind == "query")
    ]


class tool_called:
    """Passes when the tool ``tool`` ran in the case (at least ``times`` times)."""

    def __init__(self, tool: str, *, times: int = 1) -> None:
        self.tool = tool
        self.times = times
        self.name = f"tool_called:{tool}"

    def __call__(self, ctx: EvalContext) -> Score:
        n = sum(_ran(node, self.tool) for node in _nodes(ctx.trace))
        ok = n >= self.times
        return Score(ok, "pass" if ok else "fail", f"{self.tool} ran {n} time(s)")


class tool_not_called:
    """Passes when the tool ``tool`` never ran in the case."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.name = f"tool_not_called:{tool}"

    def __call__(self, ctx: EvalContext) -> Score:
        n = sum(_ran(node, self.tool) for node in _nodes(ctx.trace))
        return Score(n == 0, "pass" if n == 0 else "fail", f"{self.tool} ran {n} time(s)")


class max_steps:
    """Passes when the case took at most ``n`` model requests."""

    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError("max_steps needs n >= 0")
        self.n = n
        self.name = f"max_steps:{n}"

    def __call__(self, ctx: EvalContext) -> Score:
        steps = len(_requests(ctx.trace))
        ok = steps <= self.n
        return Score(ok, "pass" if ok else "fail", f"{steps} model request(s), at most {self.n}")


def trace_cost(trace: Any, prices: Mapping[str, Price] | None = None) -> float:
    """What the model requests under ``trace`` cost: a node's ``metadata["cost"]`` when it
    carries one, else its usage at the price of its model. ``LookupError`` names a model
    with no price."""
    total = 0.0
    for node in _nodes(trace):
        if node.kind != "query":
            continue
        cost = node.metadata.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            total += float(cost)
            continue
        if node.usage is None:
            continue
        model = str(node.metadata.get("model", ""))
        price = find_price(prices or {}, model)
        if price is None:
            raise LookupError(f"no price for model {model!r}: pass prices={{{model!r}: lf.Price}}")
        total += price.cost(node.usage)
    return total


class max_cost:
    """Passes when the case's model requests cost at most ``bound`` (see ``trace_cost``)."""

    def __init__(self, bound: float, *, prices: Mapping[str, Price] | None = None) -> None:
        if bound < 0:
            raise ValueError("max_cost needs bound >= 0")
        self.bound = bound
        self.prices = dict(prices or {})
        self.name = f"max_cost:{bound:g}"

    def __call__(self, ctx: EvalContext) -> Score:
        cost = trace_cost(ctx.trace, self.prices)
        ok = cost <= self.bound
        return Score(ok, "pass" if ok else "fail", f"cost {cost:.6g}, at most {self.bound:g}")
