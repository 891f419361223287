"""The kernel's StreamReducer and the view's applyStreamPatch agree.

The kernel folds a recorded stream into patches and a final snapshot; the result is committed
as ``js/test/fixtures/stream_parity.json``, which the JS test (``js/test/stream.test.ts``)
replays through the view's code and compares with the same snapshot. This test fails when the
kernel side changes without regenerating the fixture (``LANGFX_REGEN=1`` rewrites it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from langfx_nb.errors import MappingError
from langfx_nb.llms.streaming import ToolCallDelta, ToolCallEnd, ToolCallStart
from langfx_nb.messages import ToolCall
from langfx_nb.notebook.stream_view import StreamReducer

FIXTURE = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures" / "stream_parity.json"


def cases() -> dict[str, list[Any]]:
    structured: list[Any] = [
        {"type": "object_start", "path": [], "name": "Recipe"},
        {"type": "field_start", "path": ["title"]},
        {"type": "string_field_delta", "path": ["title"], "delta": "Pän"},
        {"type": "string_field_delta", "path": ["title"], "delta": "cakes <b>"},
        {"type": "field_end", "path": ["title"], "value": "Päncakes <b>"},
        {"type": "array_start", "path": ["steps"]},
        {"type": "object_start", "path": ["steps", 0]},
        {"type": "field_start", "path": ["steps", 0, "text"]},
        {"type": "string_field_delta", "path": ["steps", 0, "text"], "delta": "mix"},
        {"type": "field_end", "path": ["steps", 0, "text"], "value": "mix"},
        {"type": "field_start", "path": ["steps", 0, "minutes"]},
        {"type": "field_end", "path": ["steps", 0, "minutes"], "value": 5},
        {"type": "object_end", "path": ["steps", 0]},
        {"type": "array_end", "path": ["steps"]},
        {"type": "object_end", "path": []},
        {
            "type": "generation_complete",
            "value": {"title": "Päncakes <b>", "steps": [{"text": "mix", "minutes": 5}]},
        },
    ]
    text: list[Any] = ["# Ti", "tle\n", "- **a**\n", "<script>x</script>"]
    tools: list[Any] = [
        ToolCallStart("c1", "add"),
        ToolCallDelta("c1", '{"a": '),
        ToolCallDelta("c1", "1}"),
        ToolCallEnd(ToolCall("c1", "add", {"a": 1})),
        {"type": "parsing_failed", "error": {"type": "MappingError", "message": "no object"}},
    ]
    invalid: list[Any] = [
        {"type": "object_start", "path": [], "name": "Trip"},
        {"type": "field_start", "path": ["minutes"]},
        {"type": "string_field_delta", "path": ["minutes"], "delta": "a few"},
        {"type": "field_end", "path": ["minutes"], "value": "a few"},
        {"type": "object_end", "path": []},
        {
            "type": "parsing_failed",
            "error": MappingError(
                "Trip(...) did not validate",
                detail=[
                    {"loc": ("minutes",), "msg": "Input should be a valid integer", "type": "x"},
                    {"loc": ("city",), "msg": "Field required", "type": "missing"},
                ],
            ),
        },
    ]
    return {
        "structured": structured,
        "text": text,
        "tools_then_failure": tools,
        "validation_failure": invalid,
    }


def build() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, events in cases().items():
        reducer = StreamReducer()
        patches = [p for event in events for p in reducer.apply(event)]
        out[name] = {"patches": patches, "snapshot": reducer.snapshot()}
    return out


def test_fixture_matches_the_kernel_reducer() -> None:
    data = build()
    if os.environ.get("LANGFX_REGEN"):
        FIXTURE.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == json.loads(json.dumps(data)), (
        "js/test/fixtures/stream_parity.json is stale: rerun this test with LANGFX_REGEN=1"
    )
