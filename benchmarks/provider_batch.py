"""``benchmarks/batch.py --engine provider``: lf.batch through a provider's batch API, and
prompt caching, against the local fake provider server (tests/spend/provider_server.py)
run in its own process (so it shares no interpreter with the client).

    PYTHONPATH=$PWD python benchmarks/batch.py --engine provider [--items 100000]
        [--provider openai] [--llm-cache none|memory|sqlite] [--cache-items 10000] [--skip p,q]

(p) ``--items`` typed queries with ``engine=lf.engines.ProviderBatch()`` and a run manifest:
seconds from the call until every request is built and uploaded (the provider holds the
batches: the progress status turns ``waiting``), RSS growth over the process before the
call, then the merge: the rate at which the provider's results are polled, downloaded,
parsed and matched to their items (the issue's "results merged at >= 20,000 items/s";
docs/decisions.md "Results merged"), and after it the rate at which each item's ``fn``
runs again with its answer from the batch (typed, validated, traced, written to the
manifest: what an online ``lf.batch`` item costs, no target of its own). Baseline in the
same run: the same items' requests built by ``fn`` alone (the collect step without the
batch machinery). ``--llm-cache``: the model has that LLM cache (none by default), so the
collect step looks every request up in it and the re-run of ``fn`` stores every answer in
it (a later plain ``lf.query`` is a cache hit).
(q) ``--cache-items`` online queries sharing a 2,000-token system prompt, per provider: the
share of prompt tokens after the first request that the server reported as cache reads,
and the cost with caching against the cost of the same tokens uncached.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pydantic

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = "You label support tickets. " + "Rules: be terse, pick one label. " * 242


class Label(pydantic.BaseModel):
    item: str
    label: str


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Server:
    """The fake provider server in a child process."""

    def __init__(self, steps: int = 2) -> None:
        code = (
            "import sys; from tests.spend.provider_server import ProviderServer; "
            f"s = ProviderServer(steps_to_finish={steps}).start(); "
            "print(s.port, flush=True); sys.stdin.read()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def model(provider: str, url: str, cache: Any = None) -> lf.LanguageModel:
    kw: dict[str, Any] = {"transport": httpx.AsyncHTTPTransport(), "cache": cache}
    if provider == "openai":
        return OpenAI("gpt-4o-mini", api_key="sk-b", base_url=f"{url}/openai/v1", **kw)
    if provider == "anthropic":
        return Anthropic("claude-sonnet-4-5", api_key="k", base_url=f"{url}/anthropic/v1", **kw)
    return Gemini("gemini-2.5-flash", api_key="k", base_url=f"{url}/gemini/v1beta", **kw)


def part_p(n: int, provider: str, llm_cache: str = "none") -> None:
    from langfx_nb.llms.cache import InMemoryCache, SQLiteCache

    server = Server()
    cache_dir = tempfile.TemporaryDirectory()
    cache = {
        "none": None,
        "memory": InMemoryCache(max_entries=max(1, n)),
        "sqlite": SQLiteCache(Path(cache_dir.name) / "cache.sqlite"),
    }[llm_cache]
    lm = model(provider, server.url, cache)
    items = [{"id": f"t{i}"} for i in range(n)]

    async def label(row: dict[str, str], session: lf.Session) -> Label:
        prompt = "Label this ticket: item={{id}}"
        out: Label = await session.query(prompt, Label, vars=row, lm=lm, protocol="json")
        return out

    async def baseline() -> float:
        """The collect step alone: fn builds each request and stops at the model call
        (client CPU seconds)."""
        from langfx_nb.batch.provider import _Collector
        from langfx_nb.llms.deferred import DeferredCall, capturing

        scratch = lf.Session(max_trace_nodes=16)
        t = time.process_time()
        for row in items:
            with capturing(_Collector()), contextlib.suppress(DeferredCall):
                await label(row, scratch)
        await scratch.dispose()
        return time.process_time() - t

    async def run(path: Path) -> dict[str, float]:
        marks: dict[str, float] = {}
        t0 = time.perf_counter()

        def progress(p: Any) -> None:
            status = (p.provider or {}).get("status")
            if status and status not in marks:
                marks[status] = time.perf_counter() - t0
                marks["cpu_" + status] = time.process_time() - c0

        rss0 = rss_mb()
        c0 = time.process_time()
        result = await lf.batch(
            label,
            items,
            run=path,
            engine=lf.engines.ProviderBatch(poll_interval=0.05),
            progress=progress,
            max_concurrency=16,
        )
        marks["end"] = time.perf_counter() - t0
        marks["cpu_end"] = time.process_time() - c0
        marks["rss_growth"] = peak_mb() - rss0
        marks["failed"] = result.totals.failed
        marks["cost"] = result.totals.cost or 0.0
        assert result.totals.failed == 0, result.errors[:3]
        return marks

    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = asyncio.run(baseline())
            marks = asyncio.run(run(Path(tmp) / "run.sqlite"))
    finally:
        server.close()
        cache_dir.cleanup()
    upload = marks["waiting"]
    built = marks["submitting"]
    fetched = marks["collected"] - marks.get("waiting", 0.0)
    replay = marks["end"] - marks["collected"]
    cpu_upload = marks["cpu_waiting"]
    cpu_built = marks["cpu_submitting"]
    cpu_fetched = marks["cpu_collected"] - marks["cpu_waiting"]
    cpu_replay = marks["cpu_end"] - marks["cpu_collected"]
    print(
        f"(p) {n:,} requests, {provider}, engine=ProviderBatch(), LLM cache: {llm_cache}  "
        "(wall s / client CPU s)"
    )
    sent, cpu_sent = upload - built, cpu_upload - cpu_built
    print(f"    built + uploaded:           {upload:6.2f} s / {cpu_upload:6.2f} s (target <= 10 s)")
    print(f"      of which built (collect): {built:6.2f} s / {cpu_built:6.2f} s")
    print(f"      of which uploaded:        {sent:6.2f} s / {cpu_sent:6.2f} s")
    print(f"    baseline, fn builds alone:  {base:6.2f} s CPU (collect: {cpu_built / base:.2f}x)")
    print(f"    RSS growth (peak):          {marks['rss_growth']:6.0f} MB (target <= 500 MB)")
    print(
        f"    merged (polled, downloaded, parsed, matched): {fetched:.2f} s / {cpu_fetched:.2f} s "
        f"= {n / fetched:,.0f} items/s ({n / cpu_fetched:,.0f} per client CPU s; "
        "target >= 20,000/s)"
    )
    print(
        f"    then fn re-run per item (typed, traced, manifest): {replay:.2f} s / "
        f"{cpu_replay:.2f} s = {n / replay:,.0f} items/s ({n / cpu_replay:,.0f} per client CPU s)"
    )
    print(f"    cost at batch prices: ${marks['cost']:.4f}")


def part_q(n: int) -> None:
    server = Server()
    try:
        for provider in ("openai", "anthropic", "gemini"):
            lm = model(provider, server.url)

            async def go(lm: lf.LanguageModel = lm) -> lf.Session:
                session = lf.Session(max_trace_nodes=3 * n)  # every query node held

                async def fn(i: int, view: lf.Session) -> str:
                    msg = await view.generate(f"item=q{i}", lm=lm, system_message=SYSTEM)
                    return msg.text

                await lf.batch(fn, range(n), session=session, progress=False)
                await lm.aclose()  # type: ignore[attr-defined]
                return session

            t = time.perf_counter()
            session = asyncio.run(go())
            took = time.perf_counter() - t
            nodes = session.all_queries
            first = min(nodes, key=lambda x: bool(x.usage and x.usage.cached_tokens))
            usage = session.usage_summary.usage
            assert first.usage is not None
            after = (usage.prompt_tokens or 0) - (first.usage.prompt_tokens or 0)
            share = (usage.cached_tokens or 0) / after
            price = lf.Prices().find(lm.model_id)
            cost = session.usage_summary.cost or 0.0
            assert price is not None
            plain = sum(  # per request: a long-context tier applies per request
                price.cost(lf.Usage(x.usage.prompt_tokens, x.usage.completion_tokens))
                for x in nodes
                if x.usage is not None
            )
            print(
                f"(q) {provider:9} {n:,} items, {took:5.1f} s: {share:.1%} of prompt tokens after "
                f"the first read from the cache (target >= 90 %); cost ${cost:.4f} vs "
                f"${plain:.4f} uncached ({cost / plain:.0%})"
            )
    finally:
        server.close()


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--provider", default="openai", choices=["openai", "anthropic", "gemini"])
    parser.add_argument("--llm-cache", default="none", choices=["none", "memory", "sqlite"])
    parser.add_argument("--cache-items", type=int, default=10_000)
    parser.add_argument("--skip", default="")
    ns, _ = parser.parse_known_args(argv)
    skip = set(ns.skip.split(",")) if ns.skip else set()
    settings = {"items": ns.items, "provider": ns.provider, "llm_cache": ns.llm_cache}
    print(json.dumps({**settings, "cache_items": ns.cache_items}))
    if "p" not in skip:
        part_p(ns.items, ns.provider, ns.llm_cache)
    if "q" not in skip:
        part_q(ns.cache_items)


if __name__ == "__main__":
    main(sys.argv[1:])
