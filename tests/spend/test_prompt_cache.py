"""Prompt caching: Anthropic cache_control breakpoints, OpenAI prompt_cache_key and cached
tokens, Gemini implicit caching, counted in Usage, on every node and in budgets, against a
real local server that reports caching as each provider does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI

from .provider_server import ProviderServer, openai_model

SYSTEM = "You label support tickets. " + "Rules: be terse, pick one label. " * 242  # ~2,000 tok
SYSTEM_TOKENS = -(-len(SYSTEM) // 4)  # the server counts 4 characters a token
assert 1990 < SYSTEM_TOKENS < 2050


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as s:
        yield s


def anthropic(server: ProviderServer, **kw: Any) -> Anthropic:
    return Anthropic(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        base_url=f"{server.url}/anthropic/v1",
        transport=httpx.AsyncHTTPTransport(),
        **kw,
    )


def gemini(server: ProviderServer, **kw: Any) -> Gemini:
    return Gemini(
        "gemini-2.5-flash",
        api_key="g-test",
        base_url=f"{server.url}/gemini/v1beta",
        transport=httpx.AsyncHTTPTransport(),
        **kw,
    )


async def run_items(lm: lf.LanguageModel, n: int, **options: Any) -> lf.Session:
    session = lf.Session()

    async def label(i: int, view: lf.Session) -> str:
        msg = await view.generate(
            f"Label ticket item=t{i}", lm=lm, system_message=SYSTEM, **options
        )
        return msg.text

    result = await lf.batch(label, range(n), session=session, progress=False, max_concurrency=4)
    assert result.totals.failed == 0
    return session


def cache_share(session: lf.Session) -> tuple[float, lf.Usage, list[lf.TraceNode]]:
    """Share of prompt tokens read from the cache after the first request."""
    # the server answers one request at a time: exactly one found nothing cached
    nodes = sorted(session.all_queries, key=lambda n: bool(n.usage and n.usage.cached_tokens))
    first = nodes[0].usage
    assert first is not None and not first.cached_tokens
    assert all(n.usage and n.usage.cached_tokens for n in nodes[1:])
    total = session.usage_summary.usage
    after = (total.prompt_tokens or 0) - (first.prompt_tokens or 0)
    return (total.cached_tokens or 0) / after, first, nodes


@pytest.mark.parametrize(
    "make", [openai_model, anthropic, gemini], ids=["openai", "anthropic", "gemini"]
)
async def test_a_shared_system_prompt_is_read_from_the_cache_after_the_first_request(
    server: ProviderServer, make: Any
) -> None:
    lm = make(server)
    try:
        session = await run_items(lm, 200)
    finally:
        await lm.aclose()
    share, _, nodes = cache_share(session)
    assert share >= 0.9
    # every node carries the counts, and its cost at the model's cache-read price
    assert all(n.usage is not None and n.usage.cached_tokens is not None for n in nodes[1:])
    assert all(n.cost is not None for n in nodes)
    assert (nodes[-1].cost or 0) < (nodes[0].cost or 0)  # cache reads are cheaper


async def test_anthropic_writes_the_system_prompt_once_then_reads_it(
    server: ProviderServer,
) -> None:
    lm = anthropic(server)
    try:
        session = await run_items(lm, 20)
    finally:
        await lm.aclose()
    nodes = sorted(session.all_queries, key=lambda n: bool(n.usage and n.usage.cached_tokens))
    first, second = nodes[0].usage, nodes[1].usage
    assert first is not None and second is not None
    assert first.cache_write_tokens == SYSTEM_TOKENS and not first.cached_tokens
    assert second.cached_tokens == SYSTEM_TOKENS and second.cache_write_tokens == 0
    assert session.usage_summary.usage.cache_write_tokens == SYSTEM_TOKENS


def test_anthropic_breakpoints_automatic_explicit_and_off() -> None:
    lm = Anthropic("claude-sonnet-4-5", api_key="k")
    # a long system prompt gets a breakpoint; a short one is sent as before
    body = lm.encode(lm.build_request("hi", system_message=SYSTEM))
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert lm.encode(lm.build_request("hi", system_message="Be brief."))["system"] == "Be brief."
    # forced on, and off
    forced = lm.encode(lm.build_request("hi", system_message="Be brief.", prompt_cache=True))
    assert forced["system"][0]["cache_control"] == {"type": "ephemeral"}
    off = lm.encode(lm.build_request("hi", system_message=SYSTEM, prompt_cache=False))
    assert off["system"] == SYSTEM
    # a message asks for a breakpoint after itself
    doc = lf.UserMessage("a long document", metadata={"cache": True})
    marked = lm.encode(lm.build_request([doc, lf.AIMessage("ok"), lf.UserMessage("q")]))
    assert marked["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in marked["messages"][2]["content"][-1]
    # more than the API's four breakpoints fails before anything is sent
    many = [lf.UserMessage(f"d{i}", metadata={"cache": True}) for i in range(5)]
    turns: list[lf.Message[Any]] = []
    for m in many:
        turns += [m, lf.AIMessage("ok")]
    with pytest.raises(lf.InvalidRequestError, match="at most 4"):
        lm.encode(lm.build_request([*turns, lf.UserMessage("q")]))


def test_anthropic_marks_a_long_tool_list() -> None:
    from langfx_nb.llms.base import ToolSpec

    tools = [
        ToolSpec(f"t{i}", "A tool. " * 40, {"type": "object", "properties": {}}) for i in range(5)
    ]
    lm = Anthropic("claude-sonnet-4-5", api_key="k")
    body = lm.encode(lm.build_request("hi", tools=tools))
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in body["tools"][:-1])


def test_openai_sends_prompt_cache_key() -> None:
    from langfx_nb.llms.openai_responses import OpenAIResponses

    chat = OpenAI("gpt-4o-mini", api_key="k")
    assert (
        chat.encode(chat.build_request("hi", prompt_cache_key="tickets"))["prompt_cache_key"]
        == "tickets"
    )
    assert "prompt_cache_key" not in chat.encode(chat.build_request("hi"))
    responses = OpenAIResponses("gpt-4o-mini", api_key="k")
    body = responses.encode(responses.build_request("hi", prompt_cache_key="tickets"))
    assert body["prompt_cache_key"] == "tickets"


async def test_prompt_cache_key_scopes_openais_cache(server: ProviderServer) -> None:
    lm = openai_model(server)
    try:
        a = await lm.call(f"item=a {SYSTEM}", prompt_cache_key="one")
        b = await lm.call(f"item=a {SYSTEM}", prompt_cache_key="two")
        c = await lm.call(f"item=a {SYSTEM}", prompt_cache_key="one")
    finally:
        await lm.aclose()
    assert a.usage is not None and b.usage is not None and c.usage is not None
    assert a.usage.cached_tokens == 0 and b.usage.cached_tokens == 0
    assert (c.usage.cached_tokens or 0) >= 1920


async def test_budgets_count_cache_reads_and_writes(server: ProviderServer) -> None:
    lm = anthropic(server)
    try:
        async with lf.Session(lm, budget=lf.Budget(max_input_tokens=100_000)) as session:
            for i in range(3):
                await session.generate(f"item=b{i}", system_message=SYSTEM)
            scope = session.budget_scope
            assert scope is not None
            used = scope.used()
    finally:
        await lm.aclose()
    assert used["cache_write_tokens"] == SYSTEM_TOKENS
    assert used["cache_read_tokens"] == 2 * SYSTEM_TOKENS
    assert used["input_tokens"] >= 6000  # cache reads and writes are input tokens too
