"""What the stream parser costs a user: ``query_stream`` against ``lm.stream`` of the same stream.

    .venv/bin/python benchmarks/stream_parser.py [--repeat 5]

A JSON-protocol answer (``{"result": {"items": [...]}}``: records with long strings full of
escapes and non-ASCII text, and nested lists of numbers) is served by an in-process
``httpx.MockTransport`` in the OpenAI Chat wire format, 16 characters of answer per SSE event,
one event per network chunk. Measured in the same run, CPU time of this process (the machine
is shared), paired runs:

* ``lm.stream``      the adapter alone: SSE, JSON, chunks, the final message
* ``query_stream``   the same stream through ``lf.query_stream(..., protocol="json")``: the
                     adapter, the stream parser's field events, and the final parse and
                     validation of the whole answer

Targets: ``query_stream`` ≤ 4× ``lm.stream`` at ~1 MB (aim ≤ 2×); the cost per byte of
``query_stream`` at 1 MB within 1.35× of that at 0.25 MB (linear). A last line compares the
parser with what re-parsing the growing buffer costs (``jiter.from_json(prefix,
partial_mode="trailing-strings")`` after every chunk, 4-byte chunks of the 1 MB answer): the
re-parse is quadratic, so it is timed at the midpoints of 12 slices of the stream and summed
(a midpoint Riemann estimate). Target: the parser ≥ 1000× faster.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import gc
import json
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import jiter
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms.openai import OpenAI
from langfx_nb.structured.stream_parser import MAX_RESPONSE_CHARS, StreamParser

VOCABULARY = """the model streams a structured answer while the user watches each field fill in
café naïve Größe façade déjà-vu 中文 字段 流式 😀 🚀 data value list nested"""
WORDS = VOCABULARY.split()
DELTA = 16  # characters of answer per SSE event


class Item(BaseModel):
    id: int
    title: str
    body: str
    tags: list[str]
    scores: list[list[float]]


class Answer(BaseModel):
    items: list[Item]


def _text(rng: random.Random, n: int) -> str:
    """Prose with the escapes models produce: quotes, newlines, tabs, backslashes."""
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.02:
            w = f'"{w}"'
        elif r < 0.03:
            w += "\n"
        elif r < 0.035:
            w = "C:\\" + w
        elif r < 0.04:
            w += "\t"
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def answer_text(target_bytes: int) -> str:
    """A JSON-protocol answer of about ``target_bytes`` bytes of UTF-8."""
    rng = random.Random(42)
    items: list[dict[str, Any]] = []
    size = 0
    while size < target_bytes:
        item = {
            "id": len(items),
            "title": _text(rng, 60),
            "body": _text(rng, 3000),
            "tags": [_text(rng, 8) for _ in range(4)],
            "scores": [[round(rng.random(), 4) for _ in range(3)] for _ in range(2)],
        }
        items.append(item)
        size += len(json.dumps(item, ensure_ascii=False).encode()) + 2
    return json.dumps({"result": {"items": items}}, ensure_ascii=False)


def sse_events(answer: str) -> list[bytes]:
    """The answer as OpenAI Chat stream events, ``DELTA`` characters each."""

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode()

    out = [event({"role": "assistant", "content": ""})]
    out += [event({"content": answer[i : i + DELTA]}) for i in range(0, len(answer), DELTA)]
    out += [event({}, "stop"), b"data: [DONE]\n\n"]
    return out


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def model(events: list[bytes]) -> OpenAI:
    def handle(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=_Body(events))

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return OpenAI("gpt-bench", api_key="bench", http_client=client)


async def plain_stream(lm: OpenAI) -> str:
    last = None
    async for chunk in lm.stream("go"):
        last = chunk
    assert last is not None
    return last.aggregated.text


async def structured_stream(lm: OpenAI) -> Any:
    last = None
    async for event in lf.query_stream("go", Answer, lm=lm, protocol="json"):
        last = event
    assert isinstance(last, lf.GenerationComplete), last
    return last.value


async def cpu(fn: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    t0 = time.process_time()
    await fn()
    return time.process_time() - t0


async def paired(lm: OpenAI, repeat: int) -> tuple[float, float, float]:
    """Best ``lm.stream``, best ``query_stream`` and the median ratio of paired runs."""
    plain, structured, ratios = [], [], []
    for _ in range(repeat):
        a = await cpu(lambda: plain_stream(lm))
        b = await cpu(lambda: structured_stream(lm))
        plain.append(a)
        structured.append(b)
        ratios.append(b / a)
    return min(plain), min(structured), statistics.median(ratios)


def byte_chunks(text: str, size: int) -> list[str]:
    """``text`` cut every ``size`` bytes of UTF-8 and decoded as a stream (no empty chunks)."""
    data = text.encode()
    decode = codecs.getincrementaldecoder("utf-8")().decode
    return [c for c in (decode(data[i : i + size]) for i in range(0, len(data), size)) if c]


def parser_time(chunks: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        parser = StreamParser("json")
        for c in chunks:
            parser.feed(c)
        parser.close()
        best = min(best, time.process_time() - t0)
    return best


def jiter_reparse_estimate(text: str, chunks: list[str], slices: int = 12) -> float:
    """CPU time of ``jiter.from_json(prefix)`` after every chunk, estimated from samples."""
    data = text.encode()
    ends, end = [], 0
    for c in chunks:
        end += len(c.encode())
        ends.append(end)
    total = 0.0
    for k in range(slices):
        prefix = data[: ends[min(len(ends) - 1, int((k + 0.5) * len(ends) / slices))]]
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            jiter.from_json(prefix, partial_mode="trailing-strings")
            best = min(best, time.process_time() - t0)
        total += best
    return total * len(ends) / slices


async def main(repeat: int) -> None:
    print(f"OpenAI Chat stream via httpx.MockTransport, {DELTA} characters per event; CPU ms,")
    print(f"best of {repeat} paired runs; ratio = median of the pairs\n")
    print(f"{'answer':>8} {'events':>7} | {'lm.stream':>9} {'query_stream':>12} {'ratio':>6}")
    per_byte: dict[str, float] = {}
    ratios: dict[str, float] = {}
    for label, target in (("0.25 MB", 250_000), ("1 MB", 1_000_000)):
        answer = answer_text(target)
        assert len(answer) <= MAX_RESPONSE_CHARS
        events = sse_events(answer)
        lm = model(events)
        assert await plain_stream(lm) == answer  # warm up and check
        expected = Answer.model_validate(json.loads(answer)["result"])
        assert await structured_stream(lm) == expected
        plain, structured, ratio = await paired(lm, repeat)
        per_byte[label] = structured / len(answer.encode())
        ratios[label] = ratio
        print(
            f"{label:>8} {len(events):>7} | {plain * 1e3:>9,.0f} {structured * 1e3:>12,.0f}"
            f" {ratio:>5.2f}x"
        )

    answer = answer_text(1_000_000)
    chunks = byte_chunks(answer, 4)
    ours = parser_time(chunks, repeat)
    reparse = jiter_reparse_estimate(answer, chunks)
    linear = per_byte["1 MB"] / per_byte["0.25 MB"]
    print(
        f"\nStreamParser alone, 1 MB in 4-byte chunks ({len(chunks):,}): {ours * 1e3:,.0f} ms;"
        f" jiter re-parse after every chunk: ~{reparse:,.0f} s"
    )
    print("\ntargets")
    r = ratios["1 MB"]
    print(f"  query_stream <= 4x lm.stream at 1 MB (aim 2x): {r:.2f}x  {_verdict(r <= 4)}")
    ok = _verdict(linear <= 1.35)
    print(f"  per-byte cost 1 MB / 0.25 MB <= 1.35:          {linear:.2f}   {ok}")
    print(
        f"  >= 1000x faster than jiter re-parse:           ~{reparse / ours:,.0f}x"
        f"  {_verdict(reparse / ours >= 1000)}"
    )


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(ap.parse_args().repeat))
