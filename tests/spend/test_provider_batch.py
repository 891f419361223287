"""engine=lf.engines.ProviderBatch(): the same fn through OpenAI's, Anthropic's and Gemini's
batch APIs on a real local server speaking each wire format: split at the limits, polled
with the provider's counts, answers parsed and validated as online, stored in the manifest
and the LLM cache, failed and expired items resubmitted alone, resume by batch id after a
kill -9, one model call per item."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.cache import InMemoryCache, SQLiteCache
from langfx_nb.llms.fake import Echo
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI

from .provider_server import ProviderServer

PROVIDERS = ["openai", "anthropic", "gemini"]
ROOT = Path(__file__).resolve().parents[2]


class Label(pydantic.BaseModel):
    item: str
    label: str


def make_model(provider: str, url: str, **kw: Any) -> lf.LanguageModel:
    common: dict[str, Any] = {"transport": httpx.AsyncHTTPTransport(), **kw}
    if provider == "openai":
        return OpenAI("gpt-4o-mini", api_key="sk-t", base_url=f"{url}/openai/v1", **common)
    if provider == "anthropic":
        return Anthropic(
            "claude-sonnet-4-5", api_key="sk-ant-t", base_url=f"{url}/anthropic/v1", **common
        )
    return Gemini("gemini-2.5-flash", api_key="g-t", base_url=f"{url}/gemini/v1beta", **common)


def label_fn(lm: lf.LanguageModel) -> Callable[..., Any]:
    async def label(row: dict[str, str], session: lf.Session) -> Label:
        prompt = "Label this ticket: item={{id}}"
        return await session.query(prompt, Label, vars=row, lm=lm, protocol="json")  # type: ignore[no-any-return]

    return label


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(steps_to_finish=2) as s:
        yield s


def engine(**kw: Any) -> Any:
    return lf.engines.ProviderBatch(poll_interval=0.0, **kw)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_same_fn_runs_through_the_providers_batch_api(
    server: ProviderServer, provider: str, tmp_path: Path
) -> None:
    lm = make_model(provider, server.url)
    seen: list[dict[str, Any]] = []
    items = [{"id": f"t{i}"} for i in range(25)]
    try:
        result = await lf.batch(
            label_fn(lm),
            items,
            run=tmp_path / "run.sqlite",
            engine=engine(max_requests=10),
            progress=lambda p: seen.append(dict(p.provider)) if p.provider else None,
        )
    finally:
        await lm.aclose()
    assert result.totals.failed == 0
    assert [r.label for r in result.results] == [f"label-t{i}" for i in range(25)]
    assert all(isinstance(r, Label) for r in result.results)
    # nothing went online; every item was answered once, in batches split at 10 requests
    assert not server.answered
    assert sorted(server.batched.values()) == [1] * 25
    assert [len(b["items"]) for b in server.batches.values()] == [10, 10, 5]
    # progress showed the provider's own counts while waiting, then everything collected
    assert any(s.get("status") == "waiting" for s in seen)
    assert seen[-1]["status"] == "collected" and seen[-1]["succeeded"] == 25
    assert seen[-1]["batches"] == 3
    # traced as online calls are, priced at batch rates
    nodes = result.session.all_queries
    assert len(nodes) == 25 and all(n.status == "ok" for n in nodes)
    assert all(n.cost is not None for n in nodes)
    assert result.totals.cost is not None and result.totals.requests == 25
    price = lf.Prices().find(lm.model_id)
    assert price is not None and price.batch is not None
    usage = nodes[0].usage
    assert usage is not None
    assert nodes[0].cost == pytest.approx(price.cost(usage, batch=True))
    assert nodes[0].cost < price.cost(usage)


async def test_answers_reach_the_llm_cache_and_the_manifest(
    server: ProviderServer, tmp_path: Path
) -> None:
    lm = make_model("openai", server.url, cache=InMemoryCache())
    run = tmp_path / "run.sqlite"
    items = [{"id": f"t{i}"} for i in range(5)]
    try:
        first = await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
        assert first.totals.failed == 0
        batches = len(server.batches)
        # a later plain query of the same request is a cache hit: nothing is sent
        again = await lf.query(
            "Label this ticket: item={{id}}", Label, vars={"id": "t3"}, lm=lm, protocol="json"
        )
        assert again.label == "label-t3" and not server.answered
        # the same run again: every item comes from the manifest, no batch is submitted
        second = await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
        assert second.totals.resumed == 5 and len(server.batches) == batches
        assert [r.label for r in second.results] == [r.label for r in first.results]
    finally:
        await lm.aclose()


class Picky(pydantic.BaseModel):
    """Label, refusing the answer for item t7 (it fails validation as an online answer)."""

    item: str
    label: str

    @pydantic.field_validator("item")
    @classmethod
    def not_t7(cls, value: str) -> str:
        if value == "t7":
            raise ValueError("t7 is refused")
        return value


async def test_a_persistent_cache_holds_every_valid_answer_and_no_refused_one(
    server: ProviderServer, tmp_path: Path
) -> None:
    """The replay's cache writes are grouped (more items than one group here): each answer
    that validated is in the SQLite cache file afterwards, and a plain query of it is a hit;
    the answer that failed validation is not stored (a replay would repeat the failure)."""
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    lm = make_model("openai", server.url, cache=cache)
    prompt = "Label this ticket: item={{id}}"

    async def picky(row: dict[str, str], session: lf.Session) -> Picky:
        return await session.query(prompt, Picky, vars=row, lm=lm, protocol="json")  # type: ignore[no-any-return]

    items = [{"id": f"t{i}"} for i in range(700)]
    try:
        result = await lf.batch(
            picky, items, run=tmp_path / "run.sqlite", engine=engine(), progress=False
        )
        assert result.totals.failed == 1 and result.statuses[7] == "failed"
        assert len(cache) == 699
        for i in (0, 600, 699):  # in the first group, the last, and the rest
            again = await lf.query(prompt, Picky, vars={"id": f"t{i}"}, lm=lm, protocol="json")
            assert again.label == f"label-t{i}"
        assert not server.answered
        with pytest.raises(lf.MappingError):  # not replayed from the cache: asked online
            await lf.query(prompt, Picky, vars={"id": "t7"}, lm=lm, protocol="json")
        assert server.answered["openai", "t7"] == 1
    finally:
        await lm.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_failed_and_expired_items_are_resubmitted_alone(
    provider: str, tmp_path: Path
) -> None:
    with ProviderServer(fail_items=frozenset({"t2"}), expire_items=frozenset({"t4"})) as server:
        lm = make_model(provider, server.url)
        try:
            result = await lf.batch(
                label_fn(lm), [{"id": f"t{i}"} for i in range(6)], engine=engine(), progress=False
            )
        finally:
            await lm.aclose()
        sent = [sorted(item for _, item, _ in b["items"]) for b in server.batches.values()]
    # all six, then only the two that failed (max_resubmits=1): never a done item again
    assert sent == [[f"t{i}" for i in range(6)], ["t2", "t4"]]
    assert result.statuses == ["ok", "ok", "failed", "ok", "ok", "ok"]
    assert result.results[4].label == "label-t4"  # expired once, answered when resubmitted
    error = result.errors[2]
    assert error is not None and error.type == "ProviderBatchError"
    assert "errored" in error.message
    assert not server.answered


async def test_a_second_model_call_per_item_is_refused_clearly(server: ProviderServer) -> None:
    lm = make_model("anthropic", server.url)

    async def agentish(row: dict[str, str], session: lf.Session) -> str:
        first = await session.generate(f"item={row['id']} step 1", lm=lm)
        second = await session.generate(f"{first.text} step 2", lm=lm)
        return second.text

    try:
        result = await lf.batch(agentish, [{"id": "a"}], engine=engine(), progress=False)
    finally:
        await lm.aclose()
    error = result.errors[0]
    assert error is not None and error.type == "ProviderBatchError"
    assert "second model call" in error.message
    assert not server.answered


async def test_a_model_without_a_batch_api_is_refused_before_any_request() -> None:
    async def fn(row: int, session: lf.Session) -> str:
        return (await session.generate(f"x{row}", lm=Echo())).text

    with pytest.raises(lf.InvalidRequestError, match="engine=None"):
        await lf.batch(fn, [1, 2], engine=engine(), progress=False)


def test_limits_and_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        lf.engines.ProviderBatch(poll_interval=-1)
    with pytest.raises(ValueError, match="max_requests"):
        lf.engines.ProviderBatch(max_requests=0)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kill_9_while_pending_then_resume_polls_the_same_batches(
    provider: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "run.sqlite"
    with ProviderServer(steps_to_finish=10**9) as server:  # pending until we say so
        args = [sys.executable, "-m", "tests.spend.batch_script", provider, server.url]
        args += [str(manifest), "12"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # wait until the provider holds the batch
                if json.loads(line).get("provider", {}).get("status") == "waiting":
                    break
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        assert len(server.batches) == 1
        server.steps_to_finish = 1  # the provider finishes it now
        out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        *lines, last = out.stdout.strip().splitlines()
        final = json.loads(last)
        assert len(server.batches) == 1  # polled by id, never submitted again
        assert final == {"results": [f"label-t{i}" for i in range(12)], "failed": 0}
        # what the rerun showed: never "submitting"; the batch resumed from the manifest
        from langfx_nb.batch.progress import provider_lines

        shown = [json.loads(line)["provider"] for line in lines]
        assert all(p["status"] != "submitting" for p in shown)
        assert provider_lines(shown[-1])[0] == (
            "provider collected: 12 / 12 completed, 0 failed in 1 batch "
            "(1 resumed from the run manifest)"
        )
        assert sorted(server.batched.values()) == [1] * 12 and not server.answered


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_kill_9_during_the_replay_then_resume_pays_for_nothing_twice(
    provider: str, tmp_path: Path
) -> None:
    """The replay commits its rows in larger transactions (REPLAY_FLUSH_ROWS): what a kill
    loses there is replayed from the same batch, downloaded again, never asked again."""
    manifest = tmp_path / "run.sqlite"
    n = 40
    with ProviderServer(steps_to_finish=1) as server:
        args = [sys.executable, "-m", "tests.spend.batch_script", provider, server.url]
        args += [str(manifest), str(n)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        kill = {**env, "KILL_AT": "25"}  # at the replay's 25th item
        killed = subprocess.run(args, cwd=ROOT, env=kill, capture_output=True, timeout=60)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
        assert len(server.batches) == 1
        out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        final = json.loads(out.stdout.strip().splitlines()[-1])
        assert final == {"results": [f"label-t{i}" for i in range(n)], "failed": 0}
        assert len(server.batches) == 1  # polled and downloaded again, not submitted again
        assert sorted(server.batched.values()) == [1] * n and not server.answered


async def test_batches_are_split_at_the_byte_limit(server: ProviderServer) -> None:
    lm = make_model("openai", server.url)
    try:
        result = await lf.batch(
            label_fn(lm),
            [{"id": f"t{i}"} for i in range(9)],
            engine=engine(max_bytes=3000),
            progress=False,
        )
    finally:
        await lm.aclose()
    assert result.totals.failed == 0
    inputs = [server.files[b["input_file_id"]] for b in server.batches.values()]
    assert len(inputs) > 1 and all(len(data) <= 3000 for data in inputs)
    assert sum(len(data.splitlines()) for data in inputs) == 9


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_progress_shows_each_batchs_own_counts_while_it_is_pending(provider: str) -> None:
    from langfx_nb.batch.progress import provider_lines
    from langfx_nb.notebook.batch_view import BatchView
    from langfx_nb.notebook.render import batch_html

    seen: list[lf.BatchProgress] = []
    with ProviderServer(steps_to_finish=4) as server:
        lm = make_model(provider, server.url)
        try:
            result = await lf.batch(
                label_fn(lm),
                [{"id": f"t{i}"} for i in range(30)],
                engine=engine(max_requests=20),
                progress=seen.append,
            )
        finally:
            await lm.aclose()
    assert result.totals.failed == 0
    pending = [
        p.provider
        for p in seen
        if p.provider and p.provider["status"] == "waiting" and 0 < p.provider["succeeded"] < 30
    ]
    assert pending, "no snapshot showed a batch part done"
    first = pending[0]
    # the provider's counts, per submitted batch (20 + 10 requests) and summed
    per_batch = first["per_batch"]
    assert [b["total"] for b in per_batch] == [20, 10]
    assert all(b["provider"] == provider and b["id"] for b in per_batch)
    assert first["total"] == 30 and first["batches"] == 2
    assert first["succeeded"] == sum(b["succeeded"] for b in per_batch)
    assert all(b["succeeded"] + b["processing"] == b["total"] for b in per_batch)
    lines = provider_lines(first)
    assert lines[0].startswith(f"provider waiting: {first['succeeded']} / 30 completed, 0 failed")
    assert lines[0].endswith("in 2 batches")
    one = per_batch[0]
    assert lines[1] == (
        f"{provider} {one['id']}: {one['succeeded']} / 20 completed, 0 failed ({one['status']})"
    )
    # a snapshot keeps what it was given: later polls did not change it
    assert seen[-1].provider is not None and seen[-1].provider["succeeded"] == 30
    assert first["per_batch"] is not seen[-1].provider["per_batch"]
    # the notebook view and its static copy show the same lines, as text
    snapshot = next(p for p in seen if p.provider is first)
    view = BatchView(progress=snapshot)
    assert view.state["provider"]["per_batch"][0]["total"] == 20
    html = batch_html(view.state)
    assert lines[0] in html and lines[1] in html
    assert lines[0] in snapshot.line()
