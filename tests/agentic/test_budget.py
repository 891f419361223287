"""Token and cost budgets: AgentLimits, Action.invoke(budget=...), Session(budget=...)."""

from __future__ import annotations

from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.errors import BudgetExceededError
from langfx_nb.llms import LMRequest, Scripted
from langfx_nb.llms.fake import Fake

TC = lf.ToolCall


class Metered(Fake):
    """Reports fixed usage per request: 100 prompt + 10 completion tokens."""

    def __init__(self, answers: list[Any], prompt: int = 100, completion: int = 10) -> None:
        super().__init__("metered")
        self.answers = answers
        self.usage = lf.Usage(prompt, completion, prompt + completion)
        self.requests = 0

    def respond(self, request: LMRequest) -> Any:
        self.requests += 1
        step = self.answers[min(self.requests - 1, len(self.answers) - 1)]
        if isinstance(step, str):
            return lf.AIMessage(step, usage=self.usage)
        return lf.AIMessage([step], usage=self.usage)


@lf.tool
async def ping(n: int) -> int:
    """Echo a number."""
    return n


def loop_model() -> Metered:
    return Metered([TC(f"c{i}", "ping", {"n": i}) for i in range(1, 50)])


def calls(n: int) -> list[Any]:
    return [TC(f"c{i}", "ping", {"n": i}) for i in range(n)]


def test_limits_are_validated() -> None:
    for bad in ({"max_total_tokens": -1}, {"max_cost": float("nan")}, {"max_input_tokens": 1.5}):
        with pytest.raises(ValueError):
            lf.AgentLimits(**bad)
        with pytest.raises(ValueError):
            lf.Budget(**bad)


@pytest.mark.parametrize(
    ("limit", "steps"),
    [
        ({"max_total_tokens": 330}, 3),  # 110 per step: the 3rd response reaches 330, 4th refused
        ({"max_total_tokens": 300}, 3),  # the 3rd response pushes it over: raised after it
        ({"max_input_tokens": 250}, 3),
        ({"max_output_tokens": 20}, 2),
    ],
)
async def test_agent_token_budgets_stop_the_run_naming_the_budget(
    limit: dict[str, int], steps: int
) -> None:
    lm = loop_model()
    agent = lf.Agent("go", tools=[ping], limits=lf.AgentLimits(max_steps=50, **limit))
    async with lf.Session(lm) as session:
        with pytest.raises(BudgetExceededError) as info:
            await agent.invoke(session)
    (name,) = limit
    assert info.value.budget == name and info.value.limit == limit[name]
    assert name in str(info.value)
    assert lm.requests == steps
    (node,) = session.all_actions
    assert node.status == "failed" and node.error == {
        "type": "BudgetExceededError",
        "message": str(info.value),
    }
    assert node.metadata["budget"]["limits"] == limit


async def test_a_reached_budget_refuses_the_next_request_before_sending_it() -> None:
    lm = loop_model()
    agent = lf.Agent("go", tools=[ping], limits=lf.AgentLimits(max_steps=50, max_total_tokens=220))
    async with lf.Session(lm) as session:
        with pytest.raises(BudgetExceededError, match="before the next model request"):
            await agent.invoke(session)
    assert lm.requests == 2  # exactly at the limit after two steps: the third never went out


async def test_cost_budget_uses_the_session_price_table() -> None:
    lm = loop_model()
    prices = {"metered": lf.Price(prompt=1000.0, completion=2000.0)}  # per million tokens
    agent = lf.Agent("go", tools=[ping], limits=lf.AgentLimits(max_steps=50, max_cost=0.5))
    async with lf.Session(lm, prices=prices) as session:
        with pytest.raises(BudgetExceededError) as info:
            await agent.invoke(session)
    # each step costs 100*1000/1e6 + 10*2000/1e6 = 0.12 → the 5th response passes 0.5
    assert info.value.budget == "max_cost" and lm.requests == 5
    assert session.usage_summary.cost == pytest.approx(0.6)


async def test_a_cost_budget_without_a_price_is_refused_before_any_request() -> None:
    lm = loop_model()
    agent = lf.Agent("go", tools=[ping], limits=lf.AgentLimits(max_cost=1.0))
    with pytest.raises(BudgetExceededError, match="no price for model 'fake:metered'"):
        await agent.invoke(lm=lm)
    assert lm.requests == 0


async def test_nested_agents_and_tools_spend_from_the_parent_budget() -> None:
    inner_lm = Metered(["inner answer"])

    @lf.tool
    async def ask_expert(question: str, session: lf.Session) -> str:
        """Ask a nested agent."""
        return await lf.Agent(question).invoke(session, lm=inner_lm)

    outer = Metered(
        [TC("a", "ask_expert", {"question": "q"}), TC("b", "ask_expert", {"question": "q"})]
    )
    agent = lf.Agent(
        "go", tools=[ask_expert], limits=lf.AgentLimits(max_steps=10, max_total_tokens=400)
    )
    with pytest.raises(BudgetExceededError):
        await agent.invoke(lm=outer)
    # outer 110, inner 110, outer 110 (330), inner 110 → 440 > 400: the nested call counted.
    assert outer.requests == 2 and inner_lm.requests == 2


async def test_invoke_and_session_budgets_cover_whole_runs() -> None:
    class Twice(lf.Action[str]):
        async def call(self, session: lf.Session) -> str:
            await session.query("one")
            return await session.query("two")

    lm = Metered(["x"])
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=500)) as session:
        await Twice().invoke(session)  # 220 used
        with pytest.raises(BudgetExceededError, match="max_total_tokens=150"):
            await Twice().invoke(session, budget=lf.Budget(max_total_tokens=150))  # +220
        # The session's own budget counted the failed run too: 550 > 500 on the next query.
        with pytest.raises(BudgetExceededError, match="max_total_tokens=500"):
            await Twice().invoke(session)
    scope = session.budget_scope
    assert scope is not None and scope.total_tokens == 550
    assert [n.status for n in session.all_actions] == ["ok", "failed", "failed"]


async def test_session_budget_is_shared_by_concurrent_branches() -> None:
    lm = Metered(["x"])
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=1000)) as session:

        async def one(i: int, branch: lf.Session) -> str:
            return await branch.query("hi")

        results = await session.concurrent_map(range(20), one, on_error="collect")
    failures = [r for r in results if isinstance(r, BudgetExceededError)]
    assert failures and len(failures) < 20
    scope = session.budget_scope
    assert scope is not None
    # every branch was charged to the same scope: the total is what all requests used
    assert scope.total_tokens == session.usage_summary.usage.total_tokens
    # ... and once it was exhausted no more requests went out
    assert lm.requests <= 10


async def test_unlimited_by_default_and_unknown_usage_charges_nothing() -> None:
    lm = Scripted(["hi"])  # word-count usage
    assert await lf.Agent("go").invoke(lm=lm) == "hi"
    lm2 = Metered(["x"], prompt=0, completion=0)
    async with lf.Session(lm2, budget=lf.Budget(max_total_tokens=0)) as session:
        with pytest.raises(BudgetExceededError):  # 0 left: refused before sending
            await session.query("hi")
    assert lm2.requests == 0


async def test_streamed_queries_are_budgeted() -> None:
    lm = Metered(["1"])
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=100)) as session:
        # As any model failure in a stream, the budget error is the generation_failed outcome.
        events = [e async for e in session.query_stream("hi", int)]
        assert events[-1].type == "generation_failed"
        assert isinstance(events[-1].error, BudgetExceededError)  # 110 > 100, after it
        events = [e async for e in session.query_stream("hi", int)]
        assert isinstance(events[-1].error, BudgetExceededError)  # refused before sending
    assert lm.requests == 1
    assert [n.status for n in session.all_queries] == ["failed", "failed"]
    assert session.all_queries[1].error is not None
    assert "before the next model request" in session.all_queries[1].error["message"]
