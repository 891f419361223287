"""engine=ProviderBatch() when things go wrong, against the real local fake provider:
the fn docs/batch.md shows (``session.query`` without ``lm=``, a sampling default on the
session) is batched, not sent online; a call that cannot be collected is never sent online
silently; a create whose answer is lost is found, not sent again; keys stay with the API
host and out of errors, manifests and traces; downloads are bounded; a bad result line
fails only its item."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import langfx_nb as lf
from langfx_nb.errors import ProviderBatchError
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI

from .provider_server import ProviderServer
from .test_provider_batch import PROVIDERS, Label, label_fn, make_model

KEY = "zz-batch-secret-0123456789"  # no well-known key shape: only the model knows it


def engine(**kw: Any) -> Any:
    return lf.engines.ProviderBatch(poll_interval=0.0, **kw)


def keyed_model(provider: str, url: str) -> lf.LanguageModel:
    common: dict[str, Any] = {"transport": httpx.AsyncHTTPTransport(), "api_key": KEY}
    if provider == "openai":
        return OpenAI("gpt-4o-mini", base_url=f"{url}/openai/v1", **common)
    if provider == "anthropic":
        return Anthropic("claude-sonnet-4-5", base_url=f"{url}/anthropic/v1", **common)
    return Gemini("gemini-2.5-flash", base_url=f"{url}/gemini/v1beta", **common)


async def batch_of(
    lm: Any, items: list[Any], run: Path | None = None, **engine_kw: Any
) -> lf.BatchResult[Any]:
    """``label_fn`` over ``items`` on a provider batch of ``lm``, closed afterwards."""
    try:
        return await lf.batch(
            label_fn(lm), items, run=run, engine=engine(**engine_kw), progress=False
        )
    finally:
        await lm.aclose()


async def docs_fn(row: dict[str, str], session: lf.Session) -> Label:
    """The fn of docs/batch.md: the session's model, no ``lm=``."""
    prompt = "Label this ticket: item={{id}}"
    return await session.query(prompt, Label, vars=row, protocol="json")  # type: ignore[no-any-return]


ITEMS = [{"id": f"t{i}"} for i in range(6)]


# -- 1 and 3: the session's model and defaults --------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_docs_fn_with_the_sessions_model_and_a_sampling_default_is_batched(
    provider: str, tmp_path: Path
) -> None:
    """``session.query`` without ``lm=`` and a sampling default on the session (Anthropic's
    batches refuse ``temperature``: ``stop`` there): every item is answered from one batch at
    batch prices, nothing online, the batch marked collected."""
    anthropic = provider == "anthropic"
    default: dict[str, Any] = {"stop": ["END"]} if anthropic else {"temperature": 0.2}
    sent = '"stop_sequences": ["END"]' if anthropic else '"temperature": 0.2'
    with ProviderServer() as server:
        lm = make_model(provider, server.url)
        session = lf.Session(lm, **default)
        run = tmp_path / "run.sqlite"
        try:
            result = await lf.batch(
                docs_fn, ITEMS, session=session, run=run, engine=engine(), progress=False
            )
        finally:
            await lm.aclose()
        assert result.totals.failed == 0, result.errors
        assert [r.label for r in result.results] == [f"label-{r['id']}" for r in ITEMS]
        assert not server.answered  # nothing went online at full price
        assert sum(server.batched.values()) == len(ITEMS) and len(server.batches) == 1
        (batch,) = server.batches.values()
        assert all(sent in json.dumps(body) for *_, body in batch["items"])
        assert all(n.cost is not None for n in result.session.all_queries)
        assert result.totals.cost is not None
        # a rerun finds everything done: nothing polled, nothing created
        before = len(server.requests)
        lm = make_model(provider, server.url)
        try:
            again = await lf.batch(
                docs_fn,
                ITEMS,
                session=lf.Session(lm, **default),
                run=run,
                engine=engine(),
                progress=False,
            )
        finally:
            await lm.aclose()
        assert again.totals.failed == 0 and len(server.requests) == before


async def test_a_request_that_changed_after_it_was_paid_for_still_gets_its_answer(
    tmp_path: Path,
) -> None:
    """An fn that builds another prompt in the replay (not deterministic) gets the batch's
    answer to the request it sent (paid for), marked, and the cost is counted."""
    calls: dict[str, int] = {}

    async def drifting(row: dict[str, str], session: lf.Session) -> str:
        calls[row["id"]] = n = calls.get(row["id"], 0) + 1
        prompt = f"Label this ticket: item={row['id']} (attempt {n})"
        message = await session.query(prompt, returns_message=True)
        assert message.metadata.get("batch_request_differed") is True
        return str(message.text)

    with ProviderServer() as server:
        lm = make_model("openai", server.url)
        try:
            result = await lf.batch(
                drifting,
                ITEMS[:3],
                session=lf.Session(lm),
                run=tmp_path / "r.sqlite",
                engine=engine(),
                progress=False,
            )
        finally:
            await lm.aclose()
    assert result.totals.failed == 0, result.errors
    assert not server.answered and sum(server.batched.values()) == 3
    assert all(n.cost is not None for n in result.session.all_queries)


async def test_an_answer_no_replay_used_keeps_its_batch_for_a_rerun(tmp_path: Path) -> None:
    """An item whose replay fails before it uses its paid answer: the batch is not marked
    collected, so the rerun takes the answer from it, without creating another batch."""
    flaky = {"t1": 1}

    async def fn(row: dict[str, str], session: lf.Session) -> Label:
        if flaky.get(row["id"]) == 0:  # the replay (the second call) fails, once
            flaky[row["id"]] = -1
            raise RuntimeError("flaky")
        if row["id"] in flaky and flaky[row["id"]] > 0:
            flaky[row["id"]] -= 1
        return await docs_fn(row, session)

    run = tmp_path / "run.sqlite"
    with ProviderServer() as server:
        for attempt in range(2):
            lm = make_model("anthropic", server.url)
            try:
                result = await lf.batch(
                    fn,
                    ITEMS[:3],
                    session=lf.Session(lm),
                    run=run,
                    engine=engine(),
                    progress=False,
                )
            finally:
                await lm.aclose()
            if attempt == 0:
                assert result.statuses == ["ok", "failed", "ok"]
        assert result.statuses == ["ok"] * 3
        assert result.results[1].label == "label-t1"
        assert len(server.batches) == 1 and not server.answered


# -- 1: a call that cannot be collected ---------------------------------------------------------
@pytest.mark.parametrize("online", [False, True])
async def test_a_call_that_could_not_be_collected_is_not_sent_online_unless_asked(
    online: bool, tmp_path: Path
) -> None:
    """An fn that raised when its request was collected, then reaches its model call in
    the replay: refused with a clear error, nothing sent; ``online=True`` sends it."""
    first_call: set[str] = set()

    async def fn(row: dict[str, str], session: lf.Session) -> Label:
        if row["id"] == "t2" and row["id"] not in first_call:
            first_call.add(row["id"])
            raise ConnectionError("a lookup failed")
        return await docs_fn(row, session)

    with ProviderServer() as server:
        lm = make_model("openai", server.url)
        try:
            result = await lf.batch(
                fn,
                ITEMS[:4],
                session=lf.Session(lm),
                run=tmp_path / "run.sqlite",
                engine=engine(online=True) if online else engine(),
                progress=False,
            )
        finally:
            await lm.aclose()
        assert sum(server.batched.values()) == 3
        if online:
            assert result.statuses == ["ok"] * 4
            assert server.answered[("openai", "t2")] == 1
        else:
            assert not server.answered
            assert result.statuses == ["ok", "ok", "failed", "ok"]
            error = result.errors[2]
            assert error is not None and error.type == "ProviderBatchError"
            assert "ConnectionError" in error.message and "online=True" in error.message


# -- 2: a create whose answer is lost -----------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_create_whose_answer_is_lost_is_found_not_sent_again(
    provider: str, tmp_path: Path
) -> None:
    """The provider creates the batch, then the connection drops before its answer: the
    engine finds the batch in the account's list (its marker) and collects it; one batch
    is created and billed, and the manifest records it."""
    with ProviderServer(drop_creates=1) as server:
        result = await batch_of(
            make_model(provider, server.url), ITEMS, run=tmp_path / "run.sqlite"
        )
        assert server.create_requests(provider) == 1
        assert len(server.batches) == 1 and sum(server.batched.values()) == len(ITEMS)
    assert result.totals.failed == 0 and not server.answered
    (made,) = server.batches
    made = f"batches/{made}" if provider == "gemini" else made
    db = sqlite3.connect(tmp_path / "run.sqlite")  # recorded, then collected
    try:
        rows = db.execute("SELECT batch_id, status FROM provider_batches").fetchall()
    finally:
        db.close()
    assert rows == [(made, "collected")]


async def test_an_upload_whose_answer_is_lost_is_not_sent_again(tmp_path: Path) -> None:
    """OpenAI's file upload, carried out, its answer lost: not resent by the HTTP layer;
    no batch was made, so the run stops with a clear error and nothing is billed."""
    with ProviderServer(drop_uploads=1) as server:
        lm = make_model("openai", server.url)
        try:
            with pytest.raises(ProviderBatchError, match="lists no batch"):
                await lf.batch(
                    label_fn(lm),
                    ITEMS,
                    run=tmp_path / "run.sqlite",
                    engine=engine(),
                    progress=False,
                )
        finally:
            await lm.aclose()
        uploads = [p for m, p in server.requests if m == "POST" and p.endswith("/files")]
        assert len(uploads) == 1 and not server.batches and not server.answered


async def test_anthropic_a_lost_create_with_two_candidates_creates_nothing() -> None:
    """Anthropic's batches carry no marker: when another batch of the same size was made
    in the last minutes, the engine cannot tell which is its own and says so, naming
    both, creating nothing more."""
    with ProviderServer() as server:
        lm = make_model("anthropic", server.url)
        try:
            await lf.batch(label_fn(lm), ITEMS[:3], engine=engine(), progress=False)
            server.drop_creates = 1
            with pytest.raises(ProviderBatchError, match="2 batches it may have made"):
                await lf.batch(label_fn(lm), ITEMS[3:], engine=engine(), progress=False)
        finally:
            await lm.aclose()
        assert server.create_requests("anthropic") == 2


# -- 4: keys ------------------------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_key_echoed_in_a_per_item_error_reaches_no_error_manifest_or_trace(
    provider: str, tmp_path: Path
) -> None:
    run = tmp_path / "run.sqlite"
    with ProviderServer(fail_items=frozenset({"t1"})) as server:
        server.echo_key = True
        result = await batch_of(
            keyed_model(provider, server.url), ITEMS[:3], run=run, max_resubmits=0
        )
        assert server.batches and all(b["key"] == KEY for b in server.batches.values())
    error = result.errors[1]
    assert error is not None and "bad request" in error.message
    assert KEY not in error.message
    assert KEY not in result.session.trace_json_str()
    assert run.exists()
    assert all(KEY.encode() not in f.read_bytes() for f in tmp_path.iterdir() if f.is_file())


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_401_while_polling_raises_without_the_key(provider: str, tmp_path: Path) -> None:
    with ProviderServer() as server:
        echoed = {"error": {"code": KEY, "type": KEY, "status": KEY, "message": KEY}}
        server.poll_error = (401, json.dumps(echoed).encode())
        lm = keyed_model(provider, server.url)
        try:
            with pytest.raises(lf.LangFxError) as caught:
                await lf.batch(
                    label_fn(lm),
                    ITEMS[:2],
                    run=tmp_path / "run.sqlite",
                    engine=engine(),
                    progress=False,
                )
        finally:
            await lm.aclose()
    exc: BaseException | None = caught.value
    while exc is not None:
        assert KEY not in str(exc) and KEY not in repr(exc)
        assert all(KEY not in note for note in getattr(exc, "__notes__", []))
        exc = exc.__cause__ or exc.__context__


async def test_anthropic_results_url_on_another_host_never_gets_the_key(tmp_path: Path) -> None:
    with ProviderServer(variant=True) as server:
        result = await batch_of(
            keyed_model("anthropic", server.url), ITEMS[:3], run=tmp_path / "run.sqlite"
        )
        assert server.results_host is not None
        assert all(KEY not in json.dumps(h) for _, h in server.results_host.requests)
    assert result.totals.failed == 0


# -- 5: downloads are bounded -------------------------------------------------------------------
LIMIT = 1024 * 1024


async def _endless() -> AsyncIterator[bytes]:
    line = json.dumps({"custom_id": "x", "result": {"type": "expired"}}).encode() + b"\n"
    chunk = line * (65536 // len(line))
    for _ in range(2048):  # 128 MiB: "endless" to a bound of 1 MiB
        yield chunk


async def _bomb() -> AsyncIterator[bytes]:
    yield gzip.compress(b"\n" * (64 * LIMIT), compresslevel=9)  # 64 KiB -> 64 MiB


@pytest.mark.parametrize("body", ["endless", "gzip"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_results_file_past_the_bound_stops_with_a_clear_error(
    provider: str, body: str, tmp_path: Path
) -> None:
    with ProviderServer() as server:
        if body == "endless":
            server.results_body = lambda: ({}, _endless())
        else:
            server.results_body = lambda: ({"content-encoding": "gzip"}, _bomb())
        lm = make_model(provider, server.url)
        try:
            with pytest.raises(ProviderBatchError, match="max_result_bytes") as caught:
                await lf.batch(
                    label_fn(lm),
                    ITEMS[:2],
                    run=tmp_path / "run.sqlite",
                    engine=engine(max_result_bytes=LIMIT),
                    progress=False,
                )
        finally:
            await lm.aclose()
    assert str(LIMIT) in str(caught.value)


# -- 6: a bad result line -----------------------------------------------------------------------
DEEP = b"[" * 200_000 + b"]" * 200_000


def _mangle(provider: str, rows: list[Any]) -> list[Any]:
    """The first four rows of a result file made bad, each its own way."""
    out: list[Any] = []
    for n, row in enumerate(rows):
        cid = row.get("custom_id") if isinstance(row, dict) else None
        if n == 0:  # not JSON
            out.append(b'{"custom_id": "' + str(cid).encode() + b'", "result": {oops')
        elif n == 1:  # a string where an object belongs
            field = {"openai": "response", "anthropic": "result"}[provider]
            out.append({**row, field: "oops"})
        elif n == 2:  # 200,000 levels deep
            out.append(b'{"custom_id": "' + str(cid).encode() + b'", "result": ' + DEEP + b"}")
        elif n == 3:  # names no request
            out.append(b"garbage")
        else:
            out.append(row)
    return out


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_bad_result_line_fails_only_its_item(provider: str, tmp_path: Path) -> None:
    items = [{"id": f"t{i}"} for i in range(6)]
    run = tmp_path / "run.sqlite"
    with ProviderServer() as server:
        first = {"done": False}

        def mangle(p: str, rows: list[Any]) -> list[Any]:
            if first["done"]:
                return rows
            first["done"] = True
            return _mangle(p, rows)

        server.result_rows = mangle
        lm = make_model(provider, server.url)
        try:
            result = await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
            failed = [i for i, s in enumerate(result.statuses) if s == "failed"]
            assert failed == [0, 1, 2]
            for i in failed:
                error = result.errors[i]
                assert error is not None and error.type == "ProviderBatchError"
                assert "malformed" in error.message
            # the line that names no request: its item was resubmitted and answered
            assert result.statuses[3:] == ["ok"] * 3
            # a rerun asks again for the three (a good line this time): no error raised
            again = await lf.batch(label_fn(lm), items, run=run, engine=engine(), progress=False)
        finally:
            await lm.aclose()
        assert again.statuses == ["ok"] * 6 and not server.answered


async def test_gemini_a_row_with_a_string_for_metadata_fails_no_other_item(
    tmp_path: Path,
) -> None:
    with ProviderServer() as server:
        done = {"first": True}

        def mangle(provider: str, rows: list[Any]) -> list[Any]:
            if done["first"]:
                done["first"] = False
                return [{**rows[0], "metadata": "oops"}, "not an object", *rows[1:]]
            return rows

        server.result_rows = mangle
        result = await batch_of(
            make_model("gemini", server.url), ITEMS[:3], run=tmp_path / "run.sqlite"
        )
    # the row without a usable key: its request is resubmitted (it has no result)
    assert result.statuses == ["ok"] * 3


async def test_a_malformed_body_in_a_succeeded_line_fails_only_its_item(tmp_path: Path) -> None:
    """A line the engine reads lazily (a succeeded line, known by its start) that turns
    out to be cut short or too deep fails its item when its answer is read."""
    with ProviderServer() as server:

        def mangle(provider: str, rows: list[Any]) -> list[Any]:
            head = json.dumps(rows[0])
            cut = head[: head.index('"body"')] + '"body": ' + DEEP.decode() + "}}"
            return [cut.encode(), *rows[1:]]

        server.result_rows = mangle
        result = await batch_of(
            make_model("openai", server.url), ITEMS[:3], run=tmp_path / "run.sqlite"
        )
    assert result.statuses == ["failed", "ok", "ok"]
    error = result.errors[0]
    assert error is not None and error.type == "ProviderBatchError"
