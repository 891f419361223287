"""The one JSON walker behind trace previews, widget messages and fallback HTML."""

from __future__ import annotations

import ast
import enum
import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from langfx_nb.agentic.preview import preview
from langfx_nb.jsonable import Bounds, walk
from langfx_nb.notebook.bridge import to_jsonable

_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.tuples(inner, inner)
        | st.frozensets(st.integers(), max_size=3)
    ),
    max_leaves=20,
)


@given(_ANY)
def test_every_walk_is_strict_json(value: Any) -> None:
    json.dumps(walk(value), allow_nan=False)
    json.dumps(walk(value, Bounds(max_chars=3, max_items=2, max_depth=2)), allow_nan=False)


def test_bounds_cut_and_say_so() -> None:
    bounded = Bounds(max_chars=3, max_items=2, max_depth=2, redact=True)
    assert walk("abcdef", bounded) == "abc…"
    assert walk([1, 2, 3, 4], bounded) == [1, 2, "… 2 more"]
    assert walk({"a": {"b": {"c": 1}}}, bounded) == {"a": {"b": "…"}}
    assert walk({"api_key": "sk-1"}, bounded) == {"api_key": "<redacted>"}
    assert walk({"api_key": "sk-1"}) == {"api_key": "sk-1"}  # faithful mode cuts nothing


def test_shapes() -> None:
    class Color(enum.Enum):
        RED = "red"

    assert walk(Color.RED) == "red"
    assert walk(math.inf) == "inf"
    assert walk(ValueError("bad")) == {"type": "ValueError", "message": "bad"}
    assert walk(int) == "int"


def test_trace_preview_and_widget_json_share_the_walker() -> None:
    value = {"x": [math.nan, ("a", 1)], "e": KeyError("k")}
    assert preview(value) == to_jsonable(value) == walk(value)


def test_render_does_not_import_the_trace_explorer() -> None:
    """render ↔ trace_explorer was an import cycle; render now reads nodes via trace_live."""
    source = Path(__file__).parents[1] / "langfx_nb" / "notebook" / "render.py"
    imported = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "trace_explorer" not in imported
