"""The official ``openai``, ``anthropic`` and ``google-genai`` SDKs against the fake
provider (``tests/spend/provider_server.py``), as a user of each SDK would run a batch:
create (upload), poll, cancel one, read the results. What the fake answers is validated
against the SDK's own response models (they are built without validation), so the fake
stays what the SDKs send and read, in both of its modes.

The library's own batch create/upload requests are held to the SDKs' request parameter
types, unknown members forbidden."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pydantic
import pytest
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from anthropic.types.messages.batch_create_params import Request as AnthropicRequest
from google import genai
from google.genai import types as gtypes
from openai.types import Batch, FileObject
from openai.types.batch_create_params import BatchCreateParams
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

import langfx_nb as lf
from langfx_nb.errors import InvalidRequestError
from langfx_nb.llms.base import LMRequest, SamplingOptions, ToolSpec
from langfx_nb.llms.batch_wire import wire_for
from langfx_nb.messages import AIMessage, ToolCall, ToolMessage, UserMessage

from .provider_server import ProviderServer
from .test_provider_batch import label_fn, make_model

KEY = "sdk-test-key"
MODES = [False, True]  # ProviderServer(variant=...)


def strict(model: type[pydantic.BaseModel], data: Any) -> None:
    """``data`` (as the fake sent it) is a valid ``model``: every required member there."""
    model.model_validate(data)


# -- OpenAI -------------------------------------------------------------------------------------
def openai_line(item: str) -> bytes:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"item={item}"}]}
    line = {"custom_id": item, "method": "POST", "url": "/v1/chat/completions", "body": body}
    return json.dumps(line).encode()


@pytest.mark.parametrize("variant", MODES)
async def test_the_openai_sdk_runs_a_batch_against_the_fake(variant: bool) -> None:
    with ProviderServer(variant=variant, fail_items=frozenset({"b"})) as server:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=f"{server.url}/openai/v1")
        async with client:
            upload = await client.files.with_raw_response.create(
                file=("batch.jsonl", b"\n".join(openai_line(i) for i in "abc")), purpose="batch"
            )
            strict(FileObject, upload.http_response.json())
            file = upload.parse()
            batch = await client.batches.create(
                input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            other = await client.batches.create(
                input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            cancelled = await client.batches.cancel(other.id)
            assert cancelled.status == "cancelling"
            for _ in range(5):
                raw = await client.batches.with_raw_response.retrieve(batch.id)
                strict(Batch, raw.http_response.json())
                batch = raw.parse()
                if batch.status == "completed":
                    break
            assert batch.status == "completed" and batch.output_file_id and batch.error_file_id
            assert batch.request_counts is not None and batch.request_counts.failed == 1
            out = await client.files.content(batch.output_file_id)
            rows = [json.loads(line) for line in out.text.splitlines()]
            assert sorted(r["custom_id"] for r in rows) == ["a", "c"]
            assert all(r["response"]["status_code"] == 200 for r in rows)
            other = await client.batches.retrieve(other.id)
            assert other.status == "cancelled"


# -- Anthropic ----------------------------------------------------------------------------------
def anthropic_request(item: str) -> dict[str, Any]:
    params = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": f"item={item}"}],
    }
    return {"custom_id": item, "params": params}


@pytest.mark.parametrize("variant", MODES)
async def test_the_anthropic_sdk_runs_a_batch_against_the_fake(variant: bool) -> None:
    with ProviderServer(variant=variant, fail_items=frozenset({"b"})) as server:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=f"{server.url}/anthropic")
        async with client:
            requests: Any = [anthropic_request(i) for i in "abc"]
            batch = await client.messages.batches.create(requests=requests)
            other = await client.messages.batches.create(requests=requests)
            raw = await client.messages.batches.with_raw_response.cancel(other.id)
            strict(MessageBatch, raw.http_response.json())
            cancelling = await raw.parse()
            assert cancelling.processing_status == "canceling"
            assert cancelling.cancel_initiated_at is not None
            for _ in range(5):
                raw = await client.messages.batches.with_raw_response.retrieve(batch.id)
                strict(MessageBatch, raw.http_response.json())
                batch = await raw.parse()
                if batch.processing_status == "ended":
                    break
            assert batch.processing_status == "ended" and batch.results_url
            results = [r async for r in await client.messages.batches.results(batch.id)]
            for row in results:
                strict(MessageBatchIndividualResponse, row.to_dict())
            kinds = {r.custom_id: r.result.type for r in results}
            assert kinds == {"a": "succeeded", "b": "errored", "c": "succeeded"}
            other = await client.messages.batches.retrieve(other.id)
            assert other.processing_status == "ended" and other.cancel_initiated_at is not None
            canceled = [r async for r in await client.messages.batches.results(other.id)]
            assert {r.result.type for r in canceled} == {"canceled"}


# -- Gemini -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", MODES)
async def test_the_google_genai_sdk_runs_a_batch_against_the_fake(variant: bool) -> None:
    with ProviderServer(variant=variant, fail_items=frozenset({"b"})) as server:
        client = genai.Client(
            api_key=KEY,
            http_options=gtypes.HttpOptions(
                base_url=f"{server.url}/gemini",
                api_version="v1beta",
                # the variant fake's overload error on a first poll: retried, as a user would
                retry_options=gtypes.HttpRetryOptions(attempts=2, initial_delay=0.01),
            ),
        )
        src: Any = [
            {"contents": [{"role": "user", "parts": [{"text": f"item={i}"}]}]} for i in "abc"
        ]
        aio = client.aio
        job = await aio.batches.create(
            model="gemini-2.5-flash", src=src, config={"display_name": "sdk"}
        )
        other = await aio.batches.create(model="gemini-2.5-flash", src=src)
        assert job.name and other.name
        await aio.batches.cancel(name=other.name)
        for _ in range(5):
            job = await aio.batches.get(name=job.name)
            if job.done:
                break
        assert job.state == gtypes.JobState.JOB_STATE_SUCCEEDED
        assert job.dest is not None and job.dest.inlined_responses is not None
        answers = [r.response.text if r.response else None for r in job.dest.inlined_responses]
        assert answers == [
            json.dumps({"item": "a", "label": "label-a"}),
            None,
            json.dumps({"item": "c", "label": "label-c"}),
        ]
        other = await aio.batches.get(name=other.name)
        assert other.state == gtypes.JobState.JOB_STATE_CANCELLED


# -- the library's own requests, held to the SDKs' parameter types --------------------------------
FORBID = pydantic.ConfigDict(extra="forbid")
WEATHER = ToolSpec(
    "weather", "The weather in a city", {"type": "object", "properties": {"city": {}}}
)
SCHEMA = {
    "type": "object",
    "properties": {"item": {"type": "string"}},
    "required": ["item"],
    "additionalProperties": False,
}


def conversation() -> tuple[Any, ...]:
    call = ToolCall("call_1", "weather", {"city": "Oslo"})
    return (
        UserMessage("item=a: the weather in Oslo?"),
        AIMessage([call]),
        ToolMessage('{"sky": "clear"}', "call_1", "weather"),
    )


def requests_for(provider: str) -> list[LMRequest]:
    """Requests as the library builds them: text, a system prompt and options, tools and a
    tool choice, a tool call answered, a structured answer where the provider has one."""
    user = (UserMessage("item=a"),)
    out = [
        LMRequest(user),
        LMRequest(user, SamplingOptions(max_tokens=50, stop=("END",)), system="Be brief."),
        LMRequest(user, tools=(WEATHER,), tool_choice="auto"),
        LMRequest(user, tools=(WEATHER,), tool_choice="weather"),
        LMRequest(conversation(), tools=(WEATHER,)),
    ]
    if provider == "anthropic":
        out.append(LMRequest(user, SamplingOptions(prompt_cache=True), system="Be brief."))
        out.append(LMRequest(user, SamplingOptions(thinking_budget=2048)))
    else:
        out.append(LMRequest(user, SamplingOptions(temperature=0.2, top_p=0.9, seed=7)))
        out.append(LMRequest(user, response_schema=SCHEMA))
    if provider == "openai":
        out.append(LMRequest(user, SamplingOptions(prompt_cache_key="k", reasoning_effort="low")))
    if provider == "gemini":
        out.append(LMRequest(user, SamplingOptions(thinking_budget=512, top_k=4)))
    return out


def deep(value: Any) -> None:
    """Everything pydantic validated lazily (the SDKs' ``Iterable[...]`` members), read."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple, Iterator)):
        for v in value:
            deep(v)


def valid(kind: Any, data: Any) -> None:
    """``data`` is a ``kind`` (an SDK's TypedDict), no member it does not list."""
    adapter = pydantic.TypeAdapter(list[kind], config=FORBID)
    deep(adapter.validate_python([data]))  # (the adapter alive while its iterators are read)


async def sent(provider: str, requests: list[LMRequest]) -> ProviderServer:
    """The fake after the library's provider batch created a batch of ``requests``: its
    ``posted`` requests, its ``files``."""
    with ProviderServer() as server:
        lm = make_model(provider, server.url)
        try:
            wire = wire_for(lm)
            await wire.submit([wire.entry(f"r{n}", r) for n, r in enumerate(requests)], "m1")
        finally:
            await lm.aclose()
    return server


async def test_the_librarys_openai_batch_requests_are_what_the_openai_sdk_sends() -> None:
    server = await sent("openai", requests_for("openai"))
    (upload, _), (create, create_body) = server.posted
    assert upload.endswith("/files") and create.endswith("/batches")
    valid(BatchCreateParams, json.loads(create_body))
    (uploaded,) = server.files.values()
    lines = [json.loads(line) for line in uploaded.splitlines()]
    assert len(lines) == len(requests_for("openai"))
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        valid(CompletionCreateParamsNonStreaming, line["body"])


async def test_the_librarys_anthropic_batch_requests_are_what_the_anthropic_sdk_sends() -> None:
    ((path, body),) = (await sent("anthropic", requests_for("anthropic"))).posted
    assert path.endswith("/messages/batches")
    created = json.loads(body)
    assert set(created) == {"requests"} and len(created["requests"]) == 7
    for request in created["requests"]:
        valid(AnthropicRequest, request)


async def test_the_librarys_gemini_batch_requests_are_what_google_genai_reads() -> None:
    """google-genai's request types are its own (snake_case models): each part of a request
    is validated as the type the SDK turns into it, unknown members refused."""
    ((path, body),) = (await sent("gemini", requests_for("gemini"))).posted
    assert path.endswith(":batchGenerateContent")
    batch = json.loads(body)["batch"]
    assert set(batch) == {"display_name", "input_config"}
    rows = batch["input_config"]["requests"]["requests"]
    assert len(rows) == len(requests_for("gemini"))
    kinds = {
        "contents": list[gtypes.Content],
        "systemInstruction": gtypes.Content,
        "tools": list[gtypes.Tool],
        "toolConfig": gtypes.ToolConfig,
        "generationConfig": gtypes.GenerationConfig,
    }
    for row in rows:
        assert set(row) == {"request", "metadata"} and set(row["metadata"]) == {"key"}
        assert set(row["request"]) <= set(kinds)
        for member, value in row["request"].items():
            pydantic.TypeAdapter(kinds[member]).validate_python(value)


# -- Anthropic sampling options: refused before a batch is sent ----------------------------------
def test_the_anthropic_sdks_params_have_no_sampling_options() -> None:
    """Why the library refuses them in a batch: the current SDK's request type lists none."""
    params = anthropic_request("a")
    for option, value in (("temperature", 0.2), ("top_p", 0.9), ("top_k", 4)):
        with pytest.raises(pydantic.ValidationError, match=option):
            valid(AnthropicRequest, {**params, "params": {**params["params"], option: value}})


@pytest.mark.parametrize("option", ["temperature", "top_p", "top_k"])
async def test_an_anthropic_batch_with_a_sampling_option_is_refused_before_anything_is_sent(
    option: str, tmp_path: Path
) -> None:
    """Newer models reject ``temperature``; in a batch each request would fail after the
    batch has run. The run raises before any upload, naming the option; online the same
    call is sent (the provider answers or refuses at once, at no cost)."""
    value = 4 if option == "top_k" else 0.5
    with ProviderServer() as server:
        lm = make_model("anthropic", server.url)
        try:
            with pytest.raises(InvalidRequestError, match=f"{option}.*engine=None"):
                await lf.batch(
                    label_fn(lm),
                    [{"id": "t1"}, {"id": "t2"}],
                    session=lf.Session(lm, **{option: value}),
                    run=tmp_path / "run.sqlite",
                    engine=lf.engines.ProviderBatch(poll_interval=0.0),
                    progress=False,
                )
            assert not server.posted and not server.batches  # nothing uploaded or created
            online = await lf.batch(
                label_fn(lm), [{"id": "t1"}], session=lf.Session(lm, **{option: value})
            )
        finally:
            await lm.aclose()
    assert online.totals.failed == 0 and server.answered["anthropic", "t1"] == 1


async def test_the_library_reads_gemini_results_where_google_genai_reads_them(
    tmp_path: Path,
) -> None:
    """The variant fake gives a finished batch's output only as ``metadata.output`` (the
    place google-genai reads): the library's batch is answered from there."""
    with ProviderServer(variant=True) as server:
        lm = make_model("gemini", server.url)
        try:
            result = await lf.batch(
                label_fn(lm),
                [{"id": "t1"}, {"id": "t2"}],
                run=tmp_path / "run.sqlite",
                engine=lf.engines.ProviderBatch(poll_interval=0.0),
                progress=False,
            )
        finally:
            await lm.aclose()
        (batch_id,) = server.batches
        async with httpx.AsyncClient() as client:
            done = (await client.get(f"{server.url}/gemini/v1beta/batches/{batch_id}")).json()
    assert "response" not in done and done["metadata"]["output"]["inlinedResponses"]
    assert [r.label for r in result.results] == ["label-t1", "label-t2"]
