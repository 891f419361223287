"""engine=ProviderBatch() against a fake that reads the providers' public references as a
stranger might (``ProviderServer(variant=True)``): results out of order, ``\\r\\n`` line
ends, no final newline, unknown members, gzip, Anthropic's ``results_url`` on another host
(not followed: the key goes only to the API host), a documented overload error on a poll,
Gemini's ``JOB_STATE_*`` words; and the requests the client sends are held to the
references (no member they do not list)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf

from .provider_server import ProviderServer
from .test_provider_batch import PROVIDERS, label_fn, make_model

provider_module = importlib.import_module("langfx_nb.batch.provider")  # lf.batch hides it


def engine(**kw: Any) -> Any:
    return lf.engines.ProviderBatch(poll_interval=0.0, **kw)


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed poll waits 1, 2, 4 ... s by default: 10 ms here."""
    monkeypatch.setattr(provider_module, "MAX_POLL_BACKOFF_S", 0.01, raising=False)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_batch_through_a_fake_that_differs_within_the_references(
    provider: str, tmp_path: Path
) -> None:
    seen: list[lf.BatchProgress] = []
    with ProviderServer(variant=True, fail_items=frozenset({"t3"})) as server:
        lm = make_model(provider, server.url)
        try:
            result = await lf.batch(
                label_fn(lm),
                [{"id": f"t{i}"} for i in range(8)],
                run=tmp_path / "run.sqlite",
                engine=engine(max_resubmits=0),
                progress=seen.append,
            )
        finally:
            await lm.aclose()
        assert server.poll_errors >= 1  # the overload error was survived, not raised
        if provider != "gemini":  # result files (Gemini answers inline, in order)
            assert server.gzipped >= 1
        if provider == "anthropic":  # results_url on another host: the key is not sent
            assert server.results_host is not None and not server.results_host.requests
            downloads = [p for m, p in server.requests if p.endswith("/results")]
            assert downloads  # the results were read from the API host itself
        assert server.create_requests(provider) == 1
    assert result.statuses == ["ok"] * 3 + ["failed"] + ["ok"] * 4
    assert [r.label for i, r in enumerate(result.results) if i != 3] == [
        f"label-t{i}" for i in range(8) if i != 3
    ]
    error = result.errors[3]
    assert error is not None and error.type == "ProviderBatchError" and "errored" in error.message
    assert not server.answered
    # while the poll failed, progress said so (and that it retries), then went on
    statuses = [b["status"] for p in seen if p.provider for b in p.provider.get("per_batch", [])]
    assert any("poll failed" in s and "retrying" in s for s in statuses)
    final = seen[-1].provider
    assert final is not None and final["succeeded"] == 7 and final["errored"] == 1


async def test_openai_a_batch_where_every_request_failed_has_no_output_file(
    tmp_path: Path,
) -> None:
    """``output_file_id`` is null when no request succeeded (the Batch object's reference:
    ``string | null``); the errors come from ``error_file_id`` alone."""
    with ProviderServer(variant=True, fail_items=frozenset({"t0", "t1"})) as server:
        lm = make_model("openai", server.url)
        try:
            result = await lf.batch(
                label_fn(lm), [{"id": "t0"}, {"id": "t1"}], engine=engine(), progress=False
            )
        finally:
            await lm.aclose()
        polled = [b for b in server.batches.values()]
        assert all(b.get("output_file_id") is None for b in polled)
        assert all(b.get("error_file_id") for b in polled)
    assert result.statuses == ["failed", "failed"]
    assert all(e is not None and "HTTP 400" in e.message for e in result.errors)


async def test_the_models_extra_body_goes_into_each_request_not_into_the_batch_calls() -> None:
    """``extra_body`` is part of a generation request (each batch entry carries it); the
    create call takes only its own members (the API refuses others: "Unrecognized request
    argument supplied")."""
    with ProviderServer() as server:
        lm = make_model("openai", server.url, extra_body={"service_tier": "default"})
        try:
            result = await lf.batch(label_fn(lm), [{"id": "t0"}], engine=engine(), progress=False)
        finally:
            await lm.aclose()
        (batch,) = server.batches.values()
    assert result.statuses == ["ok"]
    _, _, body = batch["items"][0]
    assert body["service_tier"] == "default"


async def test_polls_that_keep_failing_raise_naming_the_batch_and_a_rerun_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider_module, "MAX_POLL_FAILURES", 2, raising=False)
    run = tmp_path / "run.sqlite"
    items = [{"id": f"t{i}"} for i in range(3)]
    with ProviderServer(variant=True) as server:
        lm = make_model("anthropic", server.url)
        real = server._overloaded
        server._overloaded = lambda batch: real({**batch, "poll_failed": False})  # type: ignore[method-assign]
        try:
            with pytest.raises(lf.errors.ServerError) as raised:
                await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
            (batch_id,) = server.batches
            notes = "\n".join(getattr(raised.value, "__notes__", []))
            assert batch_id in notes and "2 polls in a row failed" in notes
            assert "the same call again polls it" in notes
            server._overloaded = real  # type: ignore[method-assign]
            result = await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
        finally:
            await lm.aclose()
        assert server.create_requests("anthropic") == 1  # polled again, not submitted again
    assert [r.label for r in result.results] == ["label-t0", "label-t1", "label-t2"]


async def test_a_batch_is_marked_collected_only_once_a_run_collected_all_its_items(
    tmp_path: Path,
) -> None:
    """An interrupted run's batch stays in the manifest until runs with its items have
    collected all of them: a run in between with one of its items and a new one (same
    ``run=``) takes that item's answer from it and does not forget the other's."""
    import asyncio

    run = tmp_path / "run.sqlite"
    with ProviderServer(steps_to_finish=10**9) as server:
        lm = make_model("openai", server.url)
        try:
            first = asyncio.ensure_future(
                lf.batch(label_fn(lm), [{"id": "a0"}, {"id": "a1"}], run=run, engine=engine())
            )
            while not any(m == "GET" for m, _ in server.requests):  # submitted, polled
                await asyncio.sleep(0.01)
            first.cancel()  # the cell interrupted: the batch runs on at the provider
            with pytest.raises(asyncio.CancelledError):
                await first
            server.steps_to_finish = 1
            other = await lf.batch(
                label_fn(lm), [{"id": "a0"}, {"id": "b0"}], run=run, engine=engine()
            )
            assert [r.label for r in other.results] == ["label-a0", "label-b0"]
            assert server.create_requests("openai") == 2  # b0 alone
            again = await lf.batch(
                label_fn(lm), [{"id": "a0"}, {"id": "a1"}], run=run, engine=engine()
            )
        finally:
            await lm.aclose()
        assert server.create_requests("openai") == 2  # a1 from the first batch, not redone
    assert [r.label for r in again.results] == ["label-a0", "label-a1"]
    assert again.resumed == [True, False]
    assert not server.answered
