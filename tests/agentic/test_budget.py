"""Token and cost budgets: AgentLimits, Action.invoke(budget=...), Session(budget=...)."""

from __future__ import annotations

import asyncio
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


# -- the cap, reservations and the stream check (issue 29) ------------------------------------
class Talkative(Fake):
    """Would answer ``words`` words; its usage is word counts. ``honest`` models honour
    ``max_tokens`` as a provider does (the library's fakes cut their answer there); a hostile
    one ignores it. ``in_flight``/``most_in_flight`` count concurrent requests."""

    def __init__(self, words: int, *, honest: bool = True, **kw: Any) -> None:
        super().__init__("talkative", **kw)
        self.words = words
        self.honest = honest
        self.requests: list[LMRequest] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.chunks = 0

    def respond(self, request: LMRequest) -> Any:
        self.requests.append(request)
        text = "w " * self.words
        if self.honest:
            return text
        prompt = sum(len(m.text.split()) for m in request.messages)
        return lf.AIMessage(text, usage=lf.Usage(prompt, self.words, prompt + self.words))

    async def _sample(self, request: LMRequest) -> Any:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(5):  # let every other ready task start its request too
                await asyncio.sleep(0)
            return self._response(request)
        finally:
            self.in_flight -= 1

    async def _stream(self, request: LMRequest) -> Any:
        async for chunk in super()._stream(request):
            self.chunks += 1
            yield chunk


PRICES = {"talkative": lf.Price(prompt=1000.0, completion=1000.0)}  # 0.001 per token


@pytest.mark.parametrize(
    ("limit", "used"),
    [
        ({"max_total_tokens": 100}, "total_tokens"),
        ({"max_output_tokens": 100}, "output_tokens"),
        ({"max_cost": 0.1}, "cost"),
    ],
)
async def test_one_response_cannot_pass_the_budget_a_thousandfold(
    limit: dict[str, Any], used: str
) -> None:
    lm = Talkative(100_000)  # would answer 1000x what the budget allows
    async with lf.Session(lm, prices=PRICES, budget=lf.Budget(**limit)) as session:
        message = await session.query("hi", returns_message=True)
        scope = session.budget_scope
        assert scope is not None
        (request,) = lm.requests
        assert request.options.max_tokens is not None and request.options.max_tokens <= 100
        assert message.metadata["finish_reason"] == "length"  # cut at the cap
        (name,) = limit
        assert scope.used()[used] <= limit[name]  # at most what the budget allows
        assert scope.used()[used] > 0.9 * limit[name]  # ... and most of it was usable
        # asking on: each request gets the little that is left, until a limit is reached
        with pytest.raises(BudgetExceededError, match="before the next model request"):
            for _ in range(20):
                await session.query("hi")
        # passed by at most one request's prompt and one token (the smallest cap)
        over = {"max_total_tokens": 2, "max_output_tokens": 1, "max_cost": 0.002}[name]
        assert scope.used()[used] <= limit[name] + over
    assert len(lm.requests) < 20


async def test_a_callers_smaller_max_tokens_is_kept() -> None:
    lm = Talkative(100_000)
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=1000)) as session:
        await session.query("hi", max_tokens=30)
    assert lm.requests[0].options.max_tokens == 30


@pytest.mark.parametrize("limit", ["max_output_tokens", "max_total_tokens"])
async def test_a_stream_that_ignores_max_tokens_is_stopped_at_the_budget(limit: str) -> None:
    lm = Talkative(500_000, honest=False, chunk_size=100)  # 1 MB in 10,000 chunks
    async with lf.Session(lm, budget=lf.Budget(**{limit: 100})) as session:
        with pytest.raises(BudgetExceededError) as info:
            await session.generate("hi", stream=True)
        assert info.value.budget == limit and info.value.limit == 100
        assert "while streaming" in str(info.value)
        # stopped once the output passed the budget: a few chunks, not 10,000
        assert lm.chunks <= 6
        scope = session.budget_scope
        assert scope is not None
        # what it received is charged (estimated: the stream reported nothing) ...
        assert 100 < scope.used()[limit.replace("max_", "")] <= 100 + 25 + 5
        # ... so the next request is refused before it is sent
        with pytest.raises(BudgetExceededError, match="before the next model request"):
            await session.generate("hi", stream=True)
    assert len(lm.requests) == 1
    (node, _) = session.all_queries
    assert node.status == "failed"


async def test_a_call_that_ignores_max_tokens_is_stopped_after_its_response() -> None:
    lm = Talkative(100_000, honest=False)
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=100)) as session:
        with pytest.raises(BudgetExceededError, match="after a model response"):
            await session.query("hi")
        with pytest.raises(BudgetExceededError, match="before the next model request"):
            await session.query("hi")
    assert len(lm.requests) == 1


class Asks(lf.Action[str]):
    """A nested run that asks one question."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    async def call(self, session: lf.Session) -> str:
        return str(await session.query("tell me everything", **self.options))


@pytest.mark.parametrize("options", [{}, {"max_tokens": 300}])
async def test_eight_concurrent_nested_calls_stay_within_the_budget(
    options: dict[str, Any],
) -> None:
    lm = Talkative(1000)
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=1000)) as session:

        async def one(i: int, branch: lf.Session) -> str:
            return await Asks(**options).invoke(branch)

        results = await session.concurrent_map(range(8), one, on_error="collect")
    scope = session.budget_scope
    assert scope is not None
    # was 8,000+ (every branch passed the pre-check); now at most one request's prompt
    # ("tell me everything": 3 words) and a token over
    assert scope.total_tokens <= 1000 + 3 + 1
    assert scope.total_tokens == session.usage_summary.usage.total_tokens
    assert any(isinstance(r, str) for r in results)
    assert all(isinstance(r, (str, BudgetExceededError)) for r in results)
    assert scope.reserved() == {}


async def test_parallel_agent_tools_running_nested_agents_stay_within_the_budget() -> None:
    inner = Talkative(1000)

    @lf.tool
    async def expert(question: str, session: lf.Session) -> str:
        """Ask a nested agent."""
        return await lf.Agent(question).invoke(session, lm=inner)

    outer = Scripted([[TC(f"c{i}", "expert", {"question": "q"}) for i in range(8)], "done"])
    agent = lf.Agent(
        "go",
        tools=[expert],
        parallel_tools=True,
        limits=lf.AgentLimits(max_total_tokens=1500),
    )
    async with lf.Session(outer) as session:
        with pytest.raises(BudgetExceededError):
            await agent.invoke(session)
    (run,) = [n for n in session.all_actions if n.name == "Agent" and "budget" in n.metadata]
    used = run.metadata["budget"]["used"]["total_tokens"]
    assert used <= 1500 + 1 + 1  # was 8,000+; now at most a prompt ("q") and a token over
    assert session.usage_summary.usage.total_tokens == used


async def test_calls_that_fit_run_concurrently_and_others_wait_for_what_is_returned() -> None:
    lm = Talkative(1000)
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=100_000)) as session:
        await session.concurrent_map(range(8), lambda i, s: s.query("hi", max_tokens=50))
    assert lm.most_in_flight == 8  # each reserved 50 + its prompt: all fit at once
    lm = Talkative(1000)
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=100_000)) as session:
        await session.concurrent_map(range(4), lambda i, s: s.query("hi"))
    # without max_tokens a call may use all that is left: the others wait for its answer
    assert lm.most_in_flight == 1
    assert all(r.options.max_tokens is not None for r in lm.requests)


async def test_reservations_are_released_on_errors_and_cancellation() -> None:
    from .conftest import Gated

    failing = Scripted([lf.LMError("down")])
    async with lf.Session(failing, budget=lf.Budget(max_total_tokens=100)) as session:
        with pytest.raises(lf.LMError):
            await session.query("hi")
        scope = session.budget_scope
        assert scope is not None and scope.reserved() == {} and scope.total_tokens == 0

    gated = Gated()
    async with lf.Session(gated, budget=lf.Budget(max_total_tokens=100)) as session:
        scope = session.budget_scope
        assert scope is not None
        task = asyncio.ensure_future(session.query("hi"))
        await gated.reached.wait()
        assert scope.reserved()["max_total_tokens"] == 100  # the call in flight holds it all
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert scope.reserved() == {}
        gated.gate.set()
        assert await session.query("hi") == "Hello"  # nothing left reserved: it runs

    gated = Gated()
    async with lf.Session(gated, budget=lf.Budget(max_total_tokens=100)) as session:
        scope = session.budget_scope
        assert scope is not None
        stream = session.generate("hi", stream=True)
        task = asyncio.ensure_future(stream)
        await gated.reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert scope.reserved() == {}
        assert scope.output_tokens == 1  # "Hel" was received: charged as estimated


async def test_a_stored_answer_is_found_under_a_budget() -> None:
    from langfx_nb.llms.cache import InMemoryCache

    lm = Talkative(5, cache=InMemoryCache())
    async with lf.Session(lm) as session:
        await session.query("hi")  # stored with the caller's options (no cap)
    for budget in (lf.Budget(max_total_tokens=1000), lf.Budget(max_total_tokens=500)):
        async with lf.Session(lm, budget=budget) as session:
            message = await session.query("hi", returns_message=True)
            stream = [c async for c in session.query_stream("hi")]
            assert message.metadata.get("cache_hit") and stream
            scope = session.budget_scope
            assert scope is not None and scope.total_tokens == 0  # replays cost nothing
            assert scope.reserved() == {}
    assert len(lm.requests) == 1  # the caps (990-odd, 490-odd) did not hide it


@pytest.mark.parametrize("stream", [False, True])
async def test_a_budget_does_not_turn_the_response_cache_off(stream: bool) -> None:
    from langfx_nb.llms.cache import InMemoryCache

    lm = Talkative(5, cache=InMemoryCache())
    async with lf.Session(lm, budget=lf.Budget(max_total_tokens=10_000)) as session:
        for _ in range(10):
            if stream:
                assert [c async for c in session.query_stream("hi")]
            else:
                assert (await session.query("hi")).split() == ["w"] * 5
        scope = session.budget_scope
        assert scope is not None
        assert scope.total_tokens == 6  # the first answer; the nine replays cost nothing
        assert scope.reserved() == {}
    assert len(lm.requests) == 1  # ten identical queries, one request
    assert lm.requests[0].options.max_tokens is not None  # it went out capped


async def test_an_answer_cut_by_the_budget_is_not_replayed_without_it() -> None:
    from langfx_nb.llms.cache import InMemoryCache

    lm = Talkative(50, cache=InMemoryCache())
    async with lf.Session(lm, budget=lf.Budget(max_output_tokens=10)) as session:
        cut = await session.query("hi", returns_message=True)
    assert cut.metadata["finish_reason"] == "length" and len(cut.text.split()) == 10
    async with lf.Session(lm) as session:
        whole = await session.query("hi", returns_message=True)
    assert not whole.metadata.get("cache_hit") and len(whole.text.split()) == 50
    assert len(lm.requests) == 2
