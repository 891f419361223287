from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import (
    Capabilities,
    Echo,
    InMemoryCache,
    LMRequest,
    RetryPolicy,
    Scripted,
    SQLiteCache,
    StaticMapping,
    StaticSequence,
    StreamAccumulator,
    StreamChunk,
)


class Recorder(lf.LanguageModel):
    """A minimal custom model: implements `_sample` only."""

    provider = "rec"

    def __init__(self, **kw: Any) -> None:
        super().__init__("m", **kw)
        self.requests: list[LMRequest] = []

    async def _sample(self, request: LMRequest) -> lf.AIMessage[Any]:
        self.requests.append(request)
        return lf.AIMessage(f"#{len(self.requests)}")


class FakeClock:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_option_precedence_never_mutates_model_defaults() -> None:
    lm = Recorder(temperature=0.5, max_tokens=10)
    await lm.call("hi", temperature=0.1)
    await lm.call("hi")
    first, second = lm.requests
    assert first.options.temperature == 0.1 and first.options.max_tokens == 10
    assert second.options.temperature == 0.5
    assert lm.sampling.temperature == 0.5


async def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="tempreature"):
        await Recorder().call("hi", tempreature=1)


async def test_capabilities_fail_before_any_io() -> None:
    lm = Recorder()
    img = lf.Image.from_uri("https://x/y.png")
    with pytest.raises(lf.UnsupportedCapabilityError, match="image"):
        await lm.call(lf.UserMessage(["see", img]))
    with pytest.raises(lf.UnsupportedCapabilityError, match="tools"):
        await lm.call("hi", tools=[{"name": "f", "input_schema": {"type": "object"}}])
    with pytest.raises(lf.UnsupportedCapabilityError, match="structured"):
        await lm.call("hi", response_schema={"type": "object"})
    assert lm.requests == []


async def test_system_messages_are_split_out() -> None:
    lm = Recorder()
    prompt = lf.ComplexMessage([lf.SystemMessage("be brief"), lf.UserMessage("hi")])
    await lm.call(prompt, system_message="policy")
    req = lm.requests[0]
    assert req.system == "policy\n\nbe brief"
    assert [m.role for m in req.messages] == ["user"]


async def test_streaming_unsupported_unless_emulated() -> None:
    lm = Recorder()
    with pytest.raises(lf.UnsupportedCapabilityError, match="streaming"):
        async for _ in lm.stream("hi"):
            pass
    chunks = [c async for c in lm.stream("hi", emulate=True)]
    assert len(chunks) == 1 and chunks[0].final and chunks[0].aggregated.text == "#1"


async def test_response_has_provenance_and_usage_is_accounted() -> None:
    lm = Echo()
    r = await lm.call("one two")
    assert r.provenance is not None and r.provenance.model == "fake:echo"
    assert r.usage == lf.Usage(2, 2, 4)
    await lm.call("x")
    assert lm.total_usage.total_tokens == 6 and lm.num_requests == 2


async def test_sample_keeps_prompt_order() -> None:
    results = await Echo().sample(["a", "b", "c"])
    assert [r.samples[0].response.text for r in results] == ["a", "b", "c"]


# -- retries ---------------------------------------------------------------------------------
class Flaky(lf.LanguageModel):
    def __init__(self, errors: list[Exception], **kw: Any) -> None:
        super().__init__("flaky", **kw)
        self.errors = errors
        self.calls = 0

    async def _sample(self, request: LMRequest) -> lf.AIMessage[Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return lf.AIMessage("ok")

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        acc = StreamAccumulator(self.model_id)
        yield acc.text("o")
        if self.errors:
            raise self.errors.pop(0)
        yield acc.text("k")
        yield acc.finish()


async def test_retries_are_opt_in() -> None:
    lm = Flaky([lf.ServerError("boom")])
    with pytest.raises(lf.ServerError):
        await lm.call("hi")
    assert lm.calls == 1


async def test_retry_backoff_with_jitter_and_retry_after() -> None:
    clock = FakeClock()
    policy = RetryPolicy(
        max_attempts=4,
        initial_delay=1,
        multiplier=2,
        jitter=0.5,
        sleep=clock.sleep,
        random=lambda: 1.0,
    )
    errors: list[Exception] = [
        lf.ServerError("a"),
        lf.RateLimitError("b", retry_after=7),
        lf.ServerError("c"),
    ]
    lm = Flaky(errors, retry=policy)
    assert (await lm.call("hi")).text == "ok"
    assert lm.calls == 4
    assert clock.slept == [0.5, 7, 2.0]  # 1*(1-0.5), Retry-After wins, 4*(1-0.5)


async def test_non_retryable_errors_are_not_retried() -> None:
    clock = FakeClock()
    lm = Flaky([lf.AuthenticationError("no")], retry=RetryPolicy(sleep=clock.sleep))
    with pytest.raises(lf.AuthenticationError):
        await lm.call("hi")
    assert lm.calls == 1 and clock.slept == []


async def test_retries_give_up_after_max_attempts() -> None:
    clock = FakeClock()
    lm = Flaky(
        [lf.ServerError(str(i)) for i in range(5)],
        retry=RetryPolicy(max_attempts=3, sleep=clock.sleep),
    )
    with pytest.raises(lf.ServerError, match="2"):
        await lm.call("hi")
    assert lm.calls == 3 and len(clock.slept) == 2


async def test_stream_retries_only_before_first_chunk() -> None:
    clock = FakeClock()
    lm = Flaky([lf.ServerError("before")], retry=RetryPolicy(sleep=clock.sleep))
    assert [c.delta async for c in lm.stream("hi")] == ["o", "k", ""]
    assert lm.calls == 2
    # An error after a chunk was emitted is raised, not retried (no duplicate output).
    lm2 = Flaky([], retry=RetryPolicy(sleep=clock.sleep))
    seen: list[str] = []
    lm2.errors = []

    async def fail_midway() -> None:
        async for c in lm2.stream("hi"):
            seen.append(c.delta)
            lm2.errors.append(lf.ServerError("after"))

    with pytest.raises(lf.ServerError, match="after"):
        await fail_midway()
    assert seen == ["o"] and lm2.calls == 1


# -- cache -----------------------------------------------------------------------------------
async def test_memory_cache_hits_and_key_covers_the_request() -> None:
    cache = InMemoryCache()
    lm = Recorder(cache=cache)
    a = await lm.call("hi")
    b = await lm.call("hi")
    assert a.text == b.text == "#1" and b.metadata["cache_hit"] is True
    await lm.call("hi", temperature=0.3)
    await lm.call("hi", system_message="x")
    await lm.call("hi", cache_seed=1)
    await lm.call("hi", use_cache=False)
    assert len(lm.requests) == 5


async def test_memory_cache_is_bounded_lru() -> None:
    cache = InMemoryCache(max_entries=2)
    lm = Recorder(cache=cache)
    for p in ["a", "b", "a", "c"]:
        await lm.call(p)
    assert len(cache) == 2
    await lm.call("a")  # still cached (recently used)
    await lm.call("b")  # evicted
    assert len(lm.requests) == 4


async def test_cache_key_includes_model_identity() -> None:
    cache = InMemoryCache()
    await StaticMapping({"q": "one"}, cache=cache).call("q")
    r = await StaticMapping({"q": "two"}, model="other", cache=cache).call("q")
    assert r.text == "two"


async def test_sqlite_cache_survives_restart_and_concurrent_writers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cache" / "lm.sqlite"
    lm = Recorder(cache=SQLiteCache(path))
    await asyncio.gather(*(lm.call(f"p{i}") for i in range(20)))
    # A "new kernel": a fresh cache object and model on the same file.
    lm2 = Recorder(cache=SQLiteCache(path))
    again = await asyncio.gather(*(lm2.call(f"p{i}") for i in range(20)))
    assert lm2.requests == []
    assert all(r.metadata["cache_hit"] for r in again)
    await lm2.cache.delete(again[0].metadata["cache_key"])  # type: ignore[union-attr]
    await lm2.call("p0")
    assert len(lm2.requests) == 1


async def test_sqlite_cache_two_writers_on_one_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "shared.sqlite"
    c1, c2 = SQLiteCache(path), SQLiteCache(path)
    await asyncio.gather(*(c.put(f"k{i}", {"i": i}) for i in range(30) for c in (c1, c2)))
    assert len(c1) == 30 and await c2.get("k7") == {"i": 7}


async def test_sqlite_cache_sees_a_replaced_file_and_reopens_after_close(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One connection is kept open; a file replaced at the path (restored from a copy,
    deleted and made again) is read as it is now, and ``close`` leaves the cache usable."""
    path, other = tmp_path / "c.sqlite", tmp_path / "other.sqlite"
    cache = SQLiteCache(path)
    await cache.put("k", {"v": "old"})
    assert await cache.get("k") == {"v": "old"}
    fresh = SQLiteCache(other)
    await fresh.put("k", {"v": "new"})
    fresh.close()  # its write-ahead log folded into the file before the copy
    os.replace(other, path)
    assert await cache.get("k") == {"v": "new"}
    cache.close()
    assert await cache.get("k") == {"v": "new"}
    path.unlink()
    for leftover in tmp_path.glob("c.sqlite-*"):
        leftover.unlink()
    cache2 = SQLiteCache(path)
    await cache2.put("k", {"v": "again"})
    assert await cache.get("k") == {"v": "again"}


def _read_in_child(cache: SQLiteCache, out: Any) -> None:
    out.put(asyncio.run(cache.get("k")))


async def test_sqlite_cache_works_in_a_forked_child(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A fork copies the cache object but not its thread: the child starts its own thread and
    connection (the parent's connection is never used there) and reads the file."""
    import multiprocessing

    cache = SQLiteCache(tmp_path / "c.sqlite")
    await cache.put("k", {"v": 1})
    assert await cache.get("k") == {"v": 1}  # the parent's thread and connection exist
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(cache, out))
    child.start()
    child.join(60)  # a safety net: without its own thread the child would wait forever
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0 and out.get(timeout=5) == {"v": 1}
    assert await cache.get("k") == {"v": 1}  # the parent's connection still works


# -- fakes -----------------------------------------------------------------------------------
async def test_fakes() -> None:
    seq = StaticSequence(["a", "b"])
    assert [(await seq.call("x")).text for _ in range(2)] == ["a", "b"]
    with pytest.raises(lf.LMError, match="ran out"):
        await seq.call("x")
    with pytest.raises(lf.InvalidRequestError):
        await StaticMapping({"k": "v"}).call("other")
    call = lf.ToolCall("c1", "add", {"a": 1, "b": 2})
    lm = Scripted(
        [lambda req: f"saw {req.messages[-1].text}", [call], lf.ServerError("x")], chunk_size=4
    )
    assert (await lm.call("hi")).text == "saw hi"
    chunks = [c async for c in lm.stream("go")]
    kinds = [e.type for c in chunks for e in c.events]
    assert kinds[0] == "tool_call_start" and kinds[-1] == "tool_call_end"
    assert chunks[-1].final and chunks[-1].aggregated.tool_calls == [call]
    with pytest.raises(lf.ServerError):
        await lm.call("again")


async def test_stream_chunks_aggregate_lazily_and_correctly() -> None:
    lm = Echo(chunk_size=2)
    chunks = [c async for c in lm.stream("abcdefg")]
    assert [c.delta for c in chunks] == ["ab", "cd", "ef", "g", ""]
    assert [c.aggregated.text for c in chunks] == ["ab", "abcd", "abcdef", "abcdefg", "abcdefg"]
    assert chunks[-1].aggregated.usage is not None


def test_capabilities_dataclass_defaults() -> None:
    assert Capabilities().tools is False and Capabilities().native_schema is False
