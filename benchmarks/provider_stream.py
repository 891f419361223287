"""Adapter cost per streamed event against a plain ``aiter_lines`` pass over the same bytes.

For each provider a long response (``--events`` text deltas, default 10,000, in that
provider's wire format) is served from an in-process ``httpx.MockTransport``. Two framings:
``per-event`` hands the client one chunk per SSE event (how a live stream arrives), ``bulk``
hands it 64 KiB chunks. All sides use the same client and transport in the same run; the
baseline only iterates ``response.aiter_lines()`` (a plain line split); ``sse`` iterates
the raw body through our ``SSEParser`` (the framing alone); ``json`` parses each event's
data with the adapters' JSON parser and nothing else (the floor any adapter pays per event);
the adapter does everything (``lm.stream``: SSE decoding, JSON, protocol checks, chunks,
final message).

A first table decodes one huge event (1, 2, 4 and 8 MB of data in 64 KiB chunks) and prints
the time per MB: linear decoding keeps it flat.

    .venv/bin/python benchmarks/provider_stream.py [--events N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from langfx_nb.llms._http import HTTPModel, loads
from langfx_nb.llms._sse import SSEParser
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses

WORDS = [
    *("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"),
    *("—", "café", "日本", ""),
]


def _delta(i: int) -> str:
    return WORDS[i % len(WORDS)] + " "


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def gemini_events(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        cand: dict[str, object] = {
            "content": {"parts": [{"text": _delta(i)}], "role": "model"},
            "index": 0,
        }
        if i == n - 1:
            cand["finishReason"] = "STOP"
        obj = {
            "candidates": [cand],
            "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
            "modelVersion": "gemini-2.5-flash",
            "responseId": "bench",
        }
        out.append(f"data: {_dump(obj)}\r\n\r\n".encode())
    return out


def anthropic_events(n: int) -> list[bytes]:
    def ev(name: str, obj: object) -> bytes:
        return f"event: {name}\ndata: {_dump(obj)}\n\n".encode()

    start = {
        "type": "message_start",
        "message": {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-bench",
            "stop_reason": None,
            "usage": {"input_tokens": 9, "output_tokens": 1},
        },
    }
    out = [
        ev("message_start", start),
        ev(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    for i in range(n):
        out.append(
            ev(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": _delta(i)},
                },
            )
        )
    out.append(ev("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(
        ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": n},
            },
        )
    )
    out.append(ev("message_stop", {"type": "message_stop"}))
    return out


def openai_events(n: int) -> list[bytes]:
    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        obj = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-bench",
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return f"data: {_dump(obj)}\n\n".encode()

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": _delta(i)}) for i in range(n)]
    out.append(chunk({}, "stop"))
    out.append(b"data: [DONE]\n\n")
    return out


def responses_events(n: int) -> list[bytes]:
    def ev(obj: dict[str, object]) -> bytes:
        return f"event: {obj['type']}\ndata: {_dump(obj)}\n\n".encode()

    text = "".join(_delta(i) for i in range(n))
    item = {"id": "msg_b", "type": "message", "role": "assistant", "status": "completed"}
    done = {**item, "content": [{"type": "output_text", "text": text, "annotations": []}]}
    response = {"id": "resp_b", "object": "response", "status": "completed", "output": [done]}
    out = [ev({"type": "response.created", "response": {**response, "status": "in_progress"}})]
    out += [
        ev(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_b",
                "output_index": 0,
                "content_index": 0,
                "delta": _delta(i),
                "sequence_number": i + 1,
            }
        )
        for i in range(n)
    ]
    out.append(ev({"type": "response.completed", "response": response}))
    return out


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def _transport(chunks: list[bytes]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Body(chunks)
        )

    return httpx.MockTransport(handle)


def _bulk(chunks: list[bytes], size: int = 65536) -> list[bytes]:
    data = b"".join(chunks)
    return [data[i : i + size] for i in range(0, len(data), size)]


async def _baseline(client: httpx.AsyncClient) -> int:
    lines = 0
    async with client.stream("POST", "https://bench.invalid/x") as r:
        async for _ in r.aiter_lines():
            lines += 1
    return lines


async def _framing(client: httpx.AsyncClient) -> int:
    events = 0
    parser = SSEParser()
    async with client.stream("POST", "https://bench.invalid/x") as r:
        async for raw in r.aiter_raw():
            events += len(parser.feed(raw))
    return events


async def _json(datas: list[bytes]) -> int:
    for data in datas:
        loads(data)
    return len(datas)


async def _adapter(lm: HTTPModel) -> str:
    last = None
    async for chunk in lm.stream("go"):
        last = chunk
    assert last is not None and last.final
    return last.aggregated.text


async def _cpu(fn: Callable[[], Awaitable[object]]) -> float:
    t0 = time.process_time()
    await fn()
    return time.process_time() - t0


async def _paired(
    base: Callable[[], Awaitable[object]], adapter: Callable[[], Awaitable[object]], repeat: int
) -> tuple[float, float, float]:
    """Best baseline, best adapter and median per-pair ratio, in CPU time of this process
    (the machine is shared, so wall time would measure the neighbours)."""
    bases, adapters, ratios = [], [], []
    for _ in range(repeat):
        b = await _cpu(base)
        a = await _cpu(adapter)
        bases.append(b)
        adapters.append(a)
        ratios.append(a / b)
    return min(bases), min(adapters), statistics.median(ratios)


async def huge_events(repeat: int) -> None:
    """Run first, before the streams above churn the allocator: large buffers then come
    from the same place at every size."""
    print("one huge event in 64 KiB chunks: SSEParser CPU time per MB (flat = linear)")
    for mb in (1, 2, 4, 8):
        raw = b"data: " + b"x" * (mb * 1_000_000) + b"\n\n"
        chunks = [raw[i : i + 65536] for i in range(0, len(raw), 65536)]

        async def decode(chunks: list[bytes] = chunks) -> object:
            parser = SSEParser()
            return [e for c in chunks for e in parser.feed(c)]

        best = min([await _cpu(decode) for _ in range(repeat)])
        print(f"{mb} MB event: {best * 1e3:8.2f} ms, {best / mb * 1e3:6.2f} ms/MB")
    print()


async def main(n: int, repeat: int) -> None:
    await huge_events(repeat)
    cases: list[tuple[str, Callable[[int], list[bytes]], type[HTTPModel]]] = [
        ("gemini", gemini_events, Gemini),
        ("anthropic", anthropic_events, Anthropic),
        ("openai", openai_events, OpenAI),
        ("responses", responses_events, OpenAIResponses),
    ]
    print(f"{n} text-delta events per stream, best of {repeat}")
    print("CPU time per event; ratios of the best runs (median ratio of paired runs)")
    header = f"{'adapter':<10} {'framing':<10} {'lines µs/ev':>12} {'sse µs/ev':>10}"
    header += f" {'sse ratio':>16} {'json µs/ev':>11} {'json ratio':>16}"
    print(f"{header} {'adapter µs/ev':>14} {'adapter ratio':>16}")
    for name, make, cls in cases:
        events = make(n)
        datas = [d for _, d in SSEParser().feed(b"".join(events)) if d != b"[DONE]"]
        for framing, chunks in (("per-event", events), ("bulk", _bulk(events))):
            transport = _transport(chunks)
            async with httpx.AsyncClient(transport=transport) as client:
                lm = cls("bench-model", api_key="bench", http_client=client)
                text = await _adapter(lm)  # warm up and check
                assert text == "".join(_delta(i) for i in range(n)), name
                assert await _framing(client) == len(events), name
                base, sse, sse_ratio = await _paired(
                    functools.partial(_baseline, client),
                    functools.partial(_framing, client),
                    repeat,
                )
                base2, adapt, ratio = await _paired(
                    functools.partial(_baseline, client), functools.partial(_adapter, lm), repeat
                )
                base3, js, js_ratio = await _paired(
                    functools.partial(_baseline, client), functools.partial(_json, datas), repeat
                )
            base = min(base, base2, base3)
            print(
                f"{name:<10} {framing:<10} {base / n * 1e6:>12.2f} {sse / n * 1e6:>10.2f} "
                f"{sse / base:>6.2f}× ({sse_ratio:.2f}×) {js / n * 1e6:>11.2f} "
                f"{js / base:>6.2f}× ({js_ratio:.2f}×) {adapt / n * 1e6:>14.2f} "
                f"{adapt / base:>6.2f}× ({ratio:.2f}×)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    asyncio.run(main(args.events, args.repeat))
