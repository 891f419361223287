"""A batch against the real llama.cpp server reports exactly the requests, tokens and
outcomes the server counted: every answered request, truncated ones included (the server
bills them: its metrics count their tokens)."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import langfx_nb as lf

from ._proxy import CountingProxy
from .conftest import LlamaServer, openai_at

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(180)]

LONG = "Write a very long story about a dragon and a castle. Item {{i}}."
SHORT = "Reply with the single word: yes. Item {{i}}."


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(r"^llamacpp:(\w+) ([0-9.e+-]+)$", text, re.M)}


async def ask(i: int, session: lf.Session) -> str:
    """Odd items are cut at 4 tokens (``IncompleteGenerationError``: billed all the same)."""
    prompt, most = (LONG, 4) if i % 2 else (SHORT, 48)
    return await session.query(prompt, vars={"i": i}, temperature=0, max_tokens=most)


async def counted_run(
    paths: dict[str, str], run: Callable[[lf.Session], Awaitable[Any]]
) -> tuple[Any, CountingProxy, dict[str, float]]:
    """``run`` against llama-server ``--metrics`` through a counting proxy: its outcome, the
    proxy (requests sent, bytes received) and the server's own metrics afterwards."""
    server = LlamaServer(paths["server"], paths["model"], "--metrics")
    server.start()
    try:
        with CountingProxy(server.port) as proxy:
            lm = openai_at(proxy.url)
            try:
                outcome = await run(lf.Session(lm))
            finally:
                await lm.aclose()
        return outcome, proxy, metrics(server.url)
    finally:
        server.stop()


def prompt_tokens(counted: dict[str, float]) -> float:
    return counted["prompt_tokens_total"] + counted.get("prompt_tokens_cached_total", 0)


async def test_a_batch_counts_what_the_server_counted(
    llama_paths: dict[str, str], allow_requests: None
) -> None:
    async def run(session: lf.Session) -> lf.BatchResult[str]:
        return await lf.batch(ask, range(8), session=session, max_concurrency=2, progress=False)

    result, proxy, counted = await counted_run(llama_paths, run)
    asked = proxy.sent.count(b"POST /v1/chat/completions ")
    truncated = proxy.received.count(b'"finish_reason":"length"')
    totals = result.totals
    assert asked == 8 and totals.requests == asked
    assert totals.usage.prompt_tokens == prompt_tokens(counted)
    assert totals.usage.completion_tokens == counted["tokens_predicted_total"]
    incomplete = [
        e for e in result.errors if e is not None and e.type == "IncompleteGenerationError"
    ]
    assert len(incomplete) == truncated >= 4
    assert result.totals.failed == truncated  # the other answers are plain text: all usable
    assert result.session.usage_summary.requests == asked


async def test_an_evaluation_counts_what_the_server_counted(
    llama_paths: dict[str, str], allow_requests: None
) -> None:
    async def task(inputs: dict[str, int], session: lf.Session) -> str:
        return await ask(inputs["i"], session)

    async def run(session: lf.Session) -> Any:
        cases = [lf.eval.Case(id=f"c{i}", inputs={"i": i}, expected="yes") for i in range(6)]
        return await lf.eval.run(
            task, cases, lf.eval.exact, session=session, max_concurrency=2, progress=False
        )

    report, proxy, counted = await counted_run(llama_paths, run)
    asked = proxy.sent.count(b"POST /v1/chat/completions ")
    truncated = proxy.received.count(b'"finish_reason":"length"')
    assert asked == 6
    assert report.usage.prompt_tokens == prompt_tokens(counted)
    assert report.usage.completion_tokens == counted["tokens_predicted_total"]
    failed = [r for r in report.results if r.status == "failed"]
    assert len(failed) == truncated >= 3
    assert all(r.error and r.error["type"] == "IncompleteGenerationError" for r in failed)
