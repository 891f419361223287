"""The official JSON-Schema-Test-Suite (draft 2020-12, vendored in json_schema_suite/) against
the validator of MCP tool arguments: every verdict agrees, except the deliberate refusals
and differences listed here and in docs/decisions.md ("MCP tool schemas")."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest

from langfx_nb.agentic.mcp_schema import ArgsValidator, check_json_schema

pytest.importorskip("regex")

SUITE = Path(__file__).with_name("json_schema_suite")
FILES = sorted(SUITE.glob("*.json")) + sorted((SUITE / "optional").glob("*.json"))

#: Schemas refused when a tool is listed, by the reason the refusal starts with: how many of
#: each suite file's tests fall under it. A change here is a change of docs/decisions.md.
REFUSED = {
    ("anchor", "its inputSchema has a $ref that is not a local JSON pointer"): 2,
    ("anchor", "its inputSchema has a nested $id"): 6,
    ("defs", "its inputSchema has a $ref that is not a local JSON pointer"): 2,
    ("dynamicRef", "its inputSchema has a $ref that is not a local JSON pointer"): 15,
    ("dynamicRef", "its inputSchema has a nested $id"): 21,
    ("dynamicRef", "its inputSchema uses $dynamicRef"): 6,
    ("ref", "its inputSchema has a $ref that is not a local JSON pointer"): 8,
    ("ref", "its inputSchema has a nested $id"): 24,
    ("refRemote", "its inputSchema has a $ref that is not a local JSON pointer"): 25,
    ("refRemote", "its inputSchema has a nested $id"): 6,
    ("unevaluatedItems", "its inputSchema uses $dynamicRef"): 2,
    ("unevaluatedProperties", "its inputSchema uses $dynamicRef"): 2,
}
#: Tests whose verdict deliberately differs: (file, case, test) → why.
DIFFERENT = {
    (
        "vocabulary",
        "schema that uses custom metaschema with with no validation vocabulary",
        "no validation: invalid number, but it still validates",
    ): "$vocabulary is not read: every validation keyword applies",
}
REASONS = {reason for _, reason in REFUSED}


def _cases() -> list[Any]:
    return [
        pytest.param(path.stem, case, id=f"{path.stem}: {case['description']}")
        for path in FILES
        for case in json.loads(path.read_text(encoding="utf-8"))
    ]


def _refusal(schema: Any) -> str | None:
    try:
        check_json_schema(schema)
    except ValueError as exc:
        return next((r for r in REASONS if str(exc).startswith(r)), str(exc))
    return None


@pytest.mark.parametrize(("file", "case"), _cases())
def test_the_suite_agrees(file: str, case: dict[str, Any]) -> None:
    refused = _refusal(case["schema"])
    if refused is not None:
        assert (file, refused) in REFUSED, f"refused for an unlisted reason: {refused}"
        return
    validator = ArgsValidator(case["schema"])
    for test in case["tests"]:
        verdict = not validator.errors(test["data"])
        expected = test["valid"] != ((file, case["description"], test["description"]) in DIFFERENT)
        assert verdict == expected, test["description"]


def test_the_refusals_are_exactly_the_listed_ones() -> None:
    counted: collections.Counter[tuple[str, str]] = collections.Counter()
    for path in FILES:
        for case in json.loads(path.read_text(encoding="utf-8")):
            refused = _refusal(case["schema"])
            if refused is not None:
                counted[(path.stem, refused)] += len(case["tests"])
    assert dict(counted) == REFUSED
