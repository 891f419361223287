"""The export's JSON attributes against the OpenTelemetry GenAI conventions' own JSON schemas
(vendored in genai_schemas/, see its README), strictly: each message part against the
definition its ``type`` names (never the catch-all generic part) and with no field that
definition does not name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.messages import AIMessage, ReasoningPart

SCHEMAS = Path(__file__).with_name("genai_schemas")
#: attribute → (schema file, the $defs entry each item is, or None when items are parts)
ATTRIBUTES = {
    "gen_ai.input.messages": ("gen-ai-input-messages.json", "ChatMessage"),
    "gen_ai.output.messages": ("gen-ai-output-messages.json", "OutputMessage"),
    "gen_ai.system_instructions": ("gen-ai-system-instructions.json", None),
    "gen_ai.tool.definitions": ("gen-ai-tool-definitions.json", None),
}
#: the items of the part lists that are not message parts: named by their ``type``
ITEM_DEFS = {"text": "TextPart", "function": "FunctionToolDefinition"}
GENERIC = {"GenericPart", "UnknownSystemInstructionPart", "GenericToolDefinition"}


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return schema


def _by_type(schema: dict[str, Any]) -> dict[str, str]:
    """``type`` value → the name of the definition that fixes it (``const``)."""
    found = {}
    for name, definition in schema["$defs"].items():
        const = definition.get("properties", {}).get("type", {}).get("const")
        if const is not None and name not in GENERIC:
            found[const] = name
    return found


def _strict(schema: dict[str, Any], definition: str, value: Any, where: str) -> None:
    sub = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    errors = [e.message for e in Draft202012Validator(sub).iter_errors(value)]
    assert not errors, (where, definition, errors)
    named = set(schema["$defs"][definition]["properties"])
    assert set(value) <= named, (where, definition, set(value) - named)


def check(attribute: str, text: str) -> None:
    file, item_def = ATTRIBUTES[attribute]
    schema = _schema(file)
    value = json.loads(text)
    assert not list(Draft202012Validator(schema).iter_errors(value)), attribute
    types = _by_type(schema)
    for i, item in enumerate(value):
        where = f"{attribute}[{i}]"
        if item_def is None:
            _strict(schema, types.get(item["type"], "?"), item, where)
            continue
        _strict(schema, item_def, item, where)
        for j, part in enumerate(item["parts"]):
            assert part["type"] in types, (where, part)  # a known part, not a generic one
            _strict(schema, types[part["type"]], part, f"{where}.parts[{j}]")


@pytest.fixture
def memory() -> Any:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.mark.parametrize("max_content_chars", [4000, 600])
async def test_every_message_attribute_follows_the_conventions_schemas(
    memory: Any, max_content_chars: int
) -> None:
    provider, exporter = memory

    @lf.tool
    async def add(a: int, b: int, note: str = "") -> int:
        """Add two integers."""
        return a + b

    long = "word " * 1000
    lm = Scripted(
        [
            AIMessage([ReasoningPart("think of 1+2"), lf.ToolCall("c1", "add", {"a": 1, "b": 2})]),
            lf.ToolCall("c2", "add", {"a": 3, "b": 4, "note": long}),
            "3 and 7 " + long,
        ]
    )
    async with lf.Session(lm) as session:
        lf.otel.export(session, provider, capture_content=True, max_content_chars=max_content_chars)
        await lf.Agent(long, instructions="Be brief. " + long, tools=[add]).invoke(session)
    seen: set[str] = set()
    for span in exporter.get_finished_spans():
        for key, value in (span.attributes or {}).items():
            if key in ATTRIBUTES:
                assert isinstance(value, str) and len(value) <= max_content_chars
                check(key, value)
                seen.add(key)
            elif key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result"):
                assert isinstance(value, str) and len(value) <= max_content_chars
                json.loads(value)
    assert seen == set(ATTRIBUTES)


def test_the_check_is_strict() -> None:
    # the shape the export wrote before: valid only as the catch-all generic part
    old = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "result": "3"}]}]
    assert not list(Draft202012Validator(_schema("gen-ai-input-messages.json")).iter_errors(old))
    with pytest.raises(AssertionError):
        check("gen_ai.input.messages", json.dumps(old))
