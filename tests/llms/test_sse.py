"""The SSE decoder: any split of the bytes, any line ending, gives the same events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import httpx_sse
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langfx_nb.errors import StreamProtocolError
from langfx_nb.llms._sse import SSEEvent, SSEParser

from .wire import fixture, splits

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
    expected = [SSEEvent(name or "message", "\n".join(d).encode()) for name, d in evs]
    assert parse(pieces) == expected
    assert parse([raw[i : i + 1] for i in range(len(raw))]) == expected


def test_cr_then_lf_across_chunks_is_one_line_break() -> None:
    assert parse([b"event: a\r", b"\ndata: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"]) == [
        SSEEvent("a", b"1\n2")
    ]
    # a lone CR at the very end still ends the last line
    assert parse([b"data: x\r", b"\r"]) == [SSEEvent("message", b"x")]


def test_unterminated_event_is_discarded_and_bom_skipped() -> None:
    assert parse([b"\xef\xbb", b"\xbfdata: a\n\ndata: cut"]) == [SSEEvent("message", b"a")]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(StreamProtocolError):
        parse([b"event: \xff\n\n"])
    (event,) = parse([b"data: \xff\xfe\n\n"])
    with pytest.raises(StreamProtocolError):
        _ = event.text


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
        return [SSEEvent(e.event, e.data.encode()) async for e in source.aiter_sse()]

    for chunks in splits(fixture(name)).values():
        assert parse(chunks) == asyncio.run(reference(chunks))
