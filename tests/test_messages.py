from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.messages import ContinuationPart, TextPart, ToolResultPart, Usage


class Point(BaseModel):
    x: int
    y: int


def test_parts_are_the_source_of_truth() -> None:
    img = lf.Image.from_uri("https://example.com/cat.png")
    m = lf.UserMessage(["Look at ", img, " please"])
    assert [type(p) for p in m.parts] == [TextPart, lf.Image, TextPart]
    assert m.modalities == [img]
    assert m.text == "Look at <image:https://example.com/cat.png> please"


def test_adjacent_text_merges_and_empty_text_is_dropped() -> None:
    assert lf.AIMessage(["a", "", "b"]).parts == [TextPart("ab")]
    assert lf.AIMessage("").parts == []


def test_text_runs_of_strings_and_text_parts_join_between_other_parts() -> None:
    img = lf.Image.from_uri("https://example.com/cat.png")
    alone, empty = TextPart("kept"), TextPart("")
    parts = lf.UserMessage(["a", TextPart("b"), "", img, alone, img, empty, img, "c"]).parts
    assert parts == [TextPart("ab"), img, alone, img, empty, img, TextPart("c")]
    assert parts[2] is alone and parts[4] is empty  # a text part alone is kept as given
    assert lf.UserMessage([empty, "d"]).parts == [TextPart("d")]
    with pytest.raises(TypeError, match="not a message part: int"):
        lf.UserMessage(["a", 1])  # type: ignore[list-item]


def test_tool_calls_and_results() -> None:
    call = lf.ToolCall("c1", "add", {"a": 1})
    m = lf.AIMessage(["thinking", call])
    assert m.tool_calls == [call]
    t = lf.ToolMessage("3", "c1", "add")
    assert t.call_id == "c1" and t.text == "3"
    with pytest.raises(ValueError):
        lf.ToolCall("", "add", {})
    with pytest.raises(ValueError):
        lf.ToolCall("c1", "add", [1])  # type: ignore[arg-type]


def test_json_round_trip_keeps_everything_but_types() -> None:
    m: lf.AIMessage[Point] = lf.AIMessage(
        [
            "hi",
            lf.Image.from_bytes(b"\x89PNG\r\n\x1a\nxyz"),
            lf.ToolCall("c1", "f", {"q": [1, 2]}),
            ContinuationPart("gemini", "gemini:m", {"sig": "abc"}),
        ],
        metadata={"k": "v"},
        usage=lf.Usage(3, 4, 7),
        result=Point(x=1, y=2),
    )
    data = json.loads(m.to_json_str())
    assert data["version"] == 1
    back = lf.Message.from_json(data)
    assert isinstance(back, lf.AIMessage)
    assert back == m
    assert back.result == {"x": 1, "y": 2}  # typed values come back as plain JSON data
    assert back.parts[1] == m.parts[1]


def test_complex_message_flattens_and_round_trips() -> None:
    inner = lf.ComplexMessage([lf.UserMessage("a"), lf.AIMessage("b")])
    cm = lf.ComplexMessage([lf.SystemMessage("sys"), inner, lf.ToolMessage("{}", "c1", "f")])
    assert [t.role for t in cm.turns()] == ["system", "user", "ai", "tool"]
    assert lf.Message.from_json(cm.to_json()) == cm
    assert [type(p) for p in cm.parts][-1] is ToolResultPart


def test_unknown_version_or_role_is_rejected() -> None:
    with pytest.raises(ValueError, match="version"):
        lf.Message.from_json({"version": 99, "role": "user", "parts": []})
    with pytest.raises(ValueError, match="role"):
        lf.Message.from_json({"version": 1, "role": "wizard", "parts": []})


def test_usage_addition_keeps_unknown_as_none() -> None:
    total = lf.Usage(1, None, 1) + lf.Usage(2, None, None)
    assert total == lf.Usage(3, None, 1)
    assert lf.Usage().to_json() == {}


def test_modalities() -> None:
    png = lf.Image.from_bytes(b"\x89PNG\r\n\x1a\n....")
    assert png.mime_type == "image/png"
    assert lf.PDF.from_bytes(b"%PDF-1.7").mime_type == "application/pdf"
    assert lf.Image.from_uri("gs://b/x.jpg").mime_type == "image/jpeg"
    assert lf.Image.from_uri("gs://b/x.jpg").data is None  # a descriptor, not fetched
    with pytest.raises(ValueError):
        lf.Image(mime_type="audio/wav", data=b"x")
    with pytest.raises(ValueError):
        lf.Image(mime_type="image/png")


def test_from_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "a.wav"
    f.write_bytes(b"RIFF\0\0\0\0WAVEfmt ")
    a = lf.Audio.from_path(f)
    assert a.mime_type in {"audio/wav", "audio/x-wav"} and a.data is not None


def test_a_usage_count_that_is_not_a_count_is_unknown() -> None:
    # Provider answers are untrusted: a token count of "STOP", 1.5, -3 or True is not added
    # to totals or priced (a hostile stream once crashed the billed-answer accounting).
    usage = Usage(prompt_tokens="STOP", completion_tokens=1.5, total_tokens=-3)  # type: ignore[arg-type]
    assert usage == Usage()
    assert Usage(cached_tokens=True) == Usage()  # type: ignore[arg-type]
    assert (Usage(prompt_tokens=2) + Usage(prompt_tokens=3)).prompt_tokens == 5
