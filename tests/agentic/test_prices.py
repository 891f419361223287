"""A price on every model node: the session's table over genai-prices, batch and prompt-cache
rates, unknown never shown as 0, and totals exact to the cent over 1,000 mixed calls."""

from __future__ import annotations

from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms.base import LMRequest
from langfx_nb.llms.cache import InMemoryCache
from langfx_nb.llms.fake import Fake

pytest.importorskip("genai_prices")


class Metered(Fake):
    """Answers "ok" with the usage the prompt names: ``"<kind> <i>"`` (see ``USAGE``)."""

    def respond(self, request: LMRequest) -> Any:
        kind = request.messages[-1].text.split()[0]
        usage, batch = USAGE[kind]
        return lf.AIMessage("ok", usage=usage, metadata={"processing": "batch"} if batch else {})


class OpenAIMetered(Metered):
    provider = "openai"  # model ids "openai:..." are priced from genai-prices


USAGE: dict[str, tuple[lf.Usage, bool]] = {
    "plain": (lf.Usage(prompt_tokens=1000, completion_tokens=100, total_tokens=1100), False),
    "cached": (
        lf.Usage(prompt_tokens=3000, completion_tokens=50, total_tokens=3050, cached_tokens=2000),
        False,
    ),
    "batch": (lf.Usage(prompt_tokens=1200, completion_tokens=300, total_tokens=1500), True),
    "reasoning": (
        lf.Usage(
            prompt_tokens=2500,
            completion_tokens=800,
            total_tokens=3300,
            reasoning_tokens=600,
            cache_write_tokens=2000,
        ),
        False,
    ),
}
KINDS = ("plain", "cached", "batch", "reasoning")

TABLE = {"fake:table": lf.Price(3.0, 15.0, cached_prompt=0.3, cache_write=3.75)}

# Worked out by hand, in micro-dollars per call ($/Mtok x tokens), 125 calls of each:
#   fake:table (3 / 15, cache read 0.3, cache write 3.75; batch half of every rate)
#     plain      1000*3 + 100*15                      =  4500   x125 =   562_500
#     cached     1000*3 + 2000*0.3 + 50*15            =  4350   x125 =   543_750
#     batch      1200*1.5 + 300*7.5                   =  4050   x125 =   506_250
#     reasoning  500*3 + 2000*3.75 + 800*15           = 21000   x125 = 2_625_000
#                                                                      4_237_500
#   openai:gpt-4o-mini from genai-prices (0.15 / 0.6, cache read 0.075, no write charge;
#   batch 0.075 / 0.3)
#     plain      1000*0.15 + 100*0.6                  =   210   x125 =    26_250
#     cached     1000*0.15 + 2000*0.075 + 50*0.6      =   330   x125 =    41_250
#     batch      1200*0.075 + 300*0.3                 =   180   x125 =    22_500
#     reasoning  2500*0.15 + 800*0.6                  =   855   x125 =   106_875
#                                                                        196_875
EXPECTED_TABLE = 4.2375
EXPECTED_GENAI = 0.196875
EXPECTED_TOTAL = 4.434375  # $4.43


async def test_a_thousand_mixed_calls_cost_exactly_what_was_worked_out_by_hand() -> None:
    table, genai = Metered("table"), OpenAIMetered("gpt-4o-mini")
    async with lf.Session(prices=TABLE) as session:
        for i in range(1000):
            lm = table if (i // 4) % 2 == 0 else genai
            await session.query(f"{KINDS[i % 4]} {i}", lm=lm)
        summary = session.usage_summary
        nodes = session.all_queries
    assert summary.by_model["fake:table"].cost == pytest.approx(EXPECTED_TABLE, abs=1e-9)
    assert summary.by_model["openai:gpt-4o-mini"].cost == pytest.approx(EXPECTED_GENAI, abs=1e-9)
    assert summary.cost is not None and round(summary.cost, 2) == 4.43
    assert summary.cost == pytest.approx(EXPECTED_TOTAL, abs=1e-9)
    assert summary.unpriced_models == ()
    assert summary.unpriced_requests == 0 and summary.cost_text == "$4.43"  # a whole total
    # every query node carries its own cost; the nodes add up to the total
    assert len(nodes) == 1000 and all(n.cost is not None for n in nodes)
    assert sum(n.cost or 0.0 for n in nodes) == pytest.approx(EXPECTED_TOTAL, abs=1e-9)
    first = nodes[0].to_json()
    assert first["cost"] == pytest.approx(0.0045)  # "plain" on fake:table


async def test_an_unpriced_model_has_an_unknown_cost_never_zero() -> None:
    async with lf.Session(prices=TABLE) as session:
        await session.query("plain 1", lm=Metered("nobody-prices-this"))
        node = session.all_queries[0]
        summary = session.usage_summary
    assert node.cost is None and "cost" not in node.to_json()
    assert node.usage is not None and node.usage.prompt_tokens == 1000
    assert summary.cost is None and summary.unpriced_models == ("fake:nobody-prices-this",)


async def test_the_session_table_overrides_genai_prices() -> None:
    mine = {"openai:gpt-4o-mini": lf.Price(1.0, 1.0)}
    async with lf.Session(prices=mine) as session:
        await session.query("plain 1", lm=OpenAIMetered("gpt-4o-mini"))
        assert session.all_queries[0].cost == pytest.approx(1100 / 1e6)
    own_only = lf.Prices({}, defaults=False)
    async with lf.Session(prices=own_only) as session:
        await session.query("plain 1", lm=OpenAIMetered("gpt-4o-mini"))
        assert session.all_queries[0].cost is None


async def test_a_cache_hit_costs_nothing_and_says_so() -> None:
    lm = Metered("table", cache=InMemoryCache())
    async with lf.Session(prices=TABLE) as session:
        await session.query("plain 1", lm=lm)
        await session.query("plain 1", lm=lm)
        first, second = session.all_queries
    assert first.cost == pytest.approx(0.0045)
    assert second.cost == 0.0 and second.outputs["cache_hit"] is True


def test_genai_prices_gives_batch_cache_and_long_context_rates() -> None:
    prices = lf.Prices()
    claude = prices.find("anthropic:claude-sonnet-4-5")
    assert claude is not None
    assert (claude.prompt, claude.completion) == (3.0, 15.0)
    assert (claude.cached_prompt, claude.cache_write) == (0.3, 3.75)
    assert claude.batch is not None and claude.batch.prompt == 1.5
    long = lf.Usage(prompt_tokens=200_001, completion_tokens=1000)
    assert claude.cost(long) == pytest.approx((200_001 * 6 + 1000 * 22.5) / 1e6)
    gemini = prices.find("gemini:gemini-2.5-flash")
    assert gemini is not None and gemini.cached_prompt == pytest.approx(0.03)
    assert prices.find("fake:echo") is None and prices.find("openai:no-such-model-xyz") is None


def test_trace_json_keeps_each_node_cost() -> None:
    node = lf.TraceNode("1", "0", "query", "q", 0.0, "ok", 1.0, cost=0.25)
    assert lf.TraceNode.from_json(node.to_json()).cost == 0.25
    with pytest.raises(TypeError, match="cost"):
        lf.TraceNode.from_json({**node.to_json(), "cost": "free"})
