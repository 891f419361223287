"""The SSE decoder: any split of the bytes, any line ending, gives the same events; one huge
event is decoded whole, and one above ``max_event_bytes`` ends the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import httpx_sse
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langfx_nb.errors import StreamProtocolError
from langfx_nb.llms._http import HTTPModel
from langfx_nb.llms._sse import SSEEvent, SSEParser
from langfx_nb.llms.anthropic import Anthropic
from langfx_nb.llms.gemini import Gemini
from langfx_nb.llms.openai import OpenAI
from langfx_nb.llms.openai_responses import OpenAIResponses

from .wire import SECRET_KEY, Reply, Server, fixture, splits

# field values never contain CR or LF (the format cannot carry them); anything else goes
values = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
events = st.lists(
    st.tuples(st.one_of(st.none(), names), st.lists(values, min_size=1, max_size=3)), max_size=6
)
endings = st.sampled_from(["\n", "\r", "\r\n"])


def encode(evs: list[tuple[str | None, list[str]]], eol: str, comments: bool) -> bytes:
    out = []
    for name, data in evs:
        if comments:
            out.append(": keep-alive" + eol)
        if name is not None:
            out.append(f"event: {name}{eol}")
        out.extend(f"data: {d}{eol}" for d in data)
        out.append(eol)
    return "".join(out).encode()


def parse(chunks: list[bytes]) -> list[SSEEvent]:
    parser = SSEParser()
    out = [e for c in chunks for e in parser.feed(c)]
    return out + parser.close()


@settings(max_examples=300, deadline=None)
@given(evs=events, eol=endings, comments=st.booleans(), data=st.data())
def test_any_split_any_line_ending(
    evs: list[tuple[str | None, list[str]]], eol: str, comments: bool, data: st.DataObject
) -> None:
    raw = encode(evs, eol, comments)
    cuts = sorted(data.draw(st.sets(st.integers(0, max(0, len(raw))), max_size=12)))
    pieces, last = [], 0
    for c in cuts:
        pieces.append(raw[last:c])
        last = c
    pieces.append(raw[last:])
    expected = [(name or "message", "\n".join(d).encode()) for name, d in evs]
    assert parse(pieces) == expected
    assert parse([raw[i : i + 1] for i in range(len(raw))]) == expected


def test_cr_then_lf_across_chunks_is_one_line_break() -> None:
    assert parse([b"event: a\r", b"\ndata: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"]) == [
        ("a", b"1\n2")
    ]
    # a lone CR at the very end still ends the last line
    assert parse([b"data: x\r", b"\r"]) == [("message", b"x")]


def test_unterminated_event_is_discarded_and_bom_skipped() -> None:
    assert parse([b"\xef\xbb", b"\xbfdata: a\n\ndata: cut"]) == [("message", b"a")]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError):
        parse([b"event: \xff\n\n"])


@pytest.mark.parametrize(
    "name",
    ["gemini_text.sse", "anthropic_tool.sse", "openai_tool.sse", "anthropic_thinking.sse"],
)
def test_fixtures_agree_with_httpx_sse_at_every_split(name: str) -> None:
    """The reference decoder (httpx-sse) and ours give identical events for every split."""

    async def reference(chunks: list[bytes]) -> list[SSEEvent]:
        async def stream() -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

        response = httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=stream()
        )
        source = httpx_sse.EventSource(response)
        return [(e.event, e.data.encode()) async for e in source.aiter_sse()]

    for chunks in splits(fixture(name)).values():
        assert parse(chunks) == asyncio.run(reference(chunks))


# -- size: linear decoding, and a limit ------------------------------------------------------
def test_one_huge_event_in_small_chunks_decodes_whole() -> None:
    payload = b"x" * (8 * 1024 * 1024)
    raw = b"data: " + payload + b"\r\n\r\n"
    chunks = [raw[i : i + 4096] for i in range(0, len(raw), 4096)]
    assert parse(chunks) == [("message", payload)]


def test_an_unfinished_line_is_kept_as_pieces_not_recopied() -> None:
    """Each chunk of a long line is stored once (so decoding is linear in the line's
    size) and joined only when the line ends."""
    parser = SSEParser()
    for _ in range(1000):
        assert parser.feed(b"y" * 100) == []
    assert len(parser._line) == 1000 and parser._line_size == 100_000
    assert parser.feed(b"\n\n") == []  # a field named "yyy…": ignored, no data
    assert parser._line == []


def test_a_line_over_the_limit_ends_the_stream_naming_it() -> None:
    parser = SSEParser(max_event_bytes=1024)
    parser.feed(b"data: " + b"a" * 1000)
    with pytest.raises(StreamProtocolError, match=r"max_event_bytes=1024 \(1 KiB\)"):
        parser.feed(b"a" * 100)


def test_a_line_over_the_limit_in_one_chunk_with_its_end_is_caught() -> None:
    parser = SSEParser(max_event_bytes=1024)
    parser.feed(b"data: " + b"a" * 1000)
    with pytest.raises(StreamProtocolError, match="max_event_bytes"):
        parser.feed(b"a" * 100 + b"\n\ndata: next\n\n")


def test_an_event_of_many_small_lines_over_the_limit_is_caught() -> None:
    parser = SSEParser(max_event_bytes=1024)
    with pytest.raises(StreamProtocolError, match="server-sent event exceeds max_event_bytes"):
        parser.feed(b"data: 0123456789\n" * 100)


def test_events_up_to_the_limit_pass() -> None:
    parser = SSEParser(max_event_bytes=1024)
    data = b"a" * 1023  # plus the joining newline the decoder counts: exactly 1024
    assert parser.feed(b"data: " + data + b"\n\n") == [("message", data)]
    assert parser.feed(b"data: " + data + b"\n\n") == [("message", data)]
    with pytest.raises(ValueError):
        SSEParser(max_event_bytes=0)


# -- the limit and the encoding check through a provider --------------------------------------
@pytest.mark.parametrize("cls", [OpenAI, Anthropic, Gemini, OpenAIResponses])
async def test_a_50_mb_event_ends_the_stream_at_the_default_limit(cls: type[HTTPModel]) -> None:
    piece = b"z" * (1024 * 1024)
    chunks = [b'data: {"text": "', *([piece] * 50), b'"}\n\n']
    server = Server(Reply.sse(chunks))
    lm = cls("m", api_key=SECRET_KEY, transport=server.transport)
    with pytest.raises(StreamProtocolError, match=r"max_event_bytes=16777216 \(16 MiB\)"):
        async for _ in lm.stream("x"):
            pass
    (stream,) = server.streams
    assert stream.closed and stream.sent < 20  # stopped reading just past 16 MiB


async def test_the_limit_is_set_on_the_model() -> None:
    event = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"a" * 2000 + b'"}}]}\n\n'
    end = b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    server = Server(Reply.sse([event]), Reply.sse([event + end + b"data: [DONE]\n\n"]))
    small = OpenAI("m", api_key=SECRET_KEY, transport=server.transport, max_event_bytes=1000)
    with pytest.raises(StreamProtocolError, match="max_event_bytes=1000 "):
        async for _ in small.stream("x"):
            pass
    roomy = OpenAI("m", api_key=SECRET_KEY, transport=server.transport, max_event_bytes=4000)
    chunks = [c async for c in roomy.stream("x")]
    assert chunks[-1].aggregated.text == "a" * 2000
    assert server.all_closed()
    with pytest.raises(ValueError, match="max_event_bytes"):
        OpenAI("m", max_event_bytes=0)


async def test_invalid_utf8_in_event_data_is_a_clear_error() -> None:
    server = Server(Reply.sse([b'data: {"choices": [{"delta": {"content": "\xff"}}]}\n\n']))
    lm = OpenAI("m", api_key=SECRET_KEY, transport=server.transport)
    with pytest.raises(StreamProtocolError, match="not valid UTF-8"):
        async for _ in lm.stream("x"):
            pass
    assert server.all_closed()


@settings(max_examples=200, deadline=None)
@given(evs=events, eol=endings, limit=st.integers(1, 80), data=st.data())
def test_the_limit_at_any_split(
    evs: list[tuple[str | None, list[str]]], eol: str, limit: int, data: st.DataObject
) -> None:
    """Either every event fits and all come out, or the stream fails with the limit named:
    the same for every split of the bytes."""
    raw = encode(evs, eol, comments=False)
    cuts = sorted(data.draw(st.sets(st.integers(0, max(0, len(raw))), max_size=8)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    expected = [(name or "message", "\n".join(d).encode()) for name, d in evs]
    longest_line = max((len(line) for line in raw.splitlines()), default=0)
    biggest_event = max((len(d) + 1 for _, d in expected), default=0)
    parser = SSEParser(max_event_bytes=limit)
    if longest_line <= limit and biggest_event <= limit:
        assert [e for p in pieces for e in parser.feed(p)] == expected
    elif biggest_event > limit:
        with pytest.raises(StreamProtocolError, match=f"max_event_bytes={limit} "):
            for p in pieces:
                parser.feed(p)
