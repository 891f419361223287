"""ECMA-262 readings of the constructs Python reads differently (beyond those the
JSON-Schema-Test-Suite's ecmascript-regex.json covers): what JavaScript's
``new RegExp(pattern, "u").test(text)`` answers."""

from __future__ import annotations

import pytest

from langfx_nb.agentic.ecma_regex import compile_pattern

pytest.importorskip("regex")


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^a$", "a\n", False),
        ("^a.b$", "a\rb", False),
        ("^a.b$", "a\u2028b", False),
        ("^a.b$", "a\tb", True),
        ("^[]$", "", False),
        ("^a[]", "a", False),
        ("^[^]$", "\n", True),
        (r"^\bé", "é", False),  # é is not a word character: no boundary before it
        (r"x\B", "xé", False),  # ... so after x there is one
        (r"^[\D]$", "٣", True),
        (r"^[\D]$", "3", False),
        (r"^[^\W]$", "é", False),
        (r"^[^\W]$", "_", True),
        (r"^[a\S]$", "b", True),
        (r"^[a\S]$", "\ufeff", False),
        (r"^[\s]$", "\ufeff", True),
        (r"^\u{1F600}$", "\U0001f600", True),
        (r"^(?<q>['\"]).*\k<q>$", "'x'", True),
        (r"^(?<q>['\"]).*\k<q>$", "'x\"", False),
        (r"^[\cJ]$", "\n", True),
        ("^[&&]+$", "&&", True),
        ("^[a[]$", "[", True),
    ],
)
def test_ecma_262_readings(pattern: str, text: str, matches: bool) -> None:
    assert (compile_pattern(pattern).search(text) is not None) is matches
