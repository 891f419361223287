"""Prompt protocols: type rendering, code-block extraction, parsing, round trips."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid
from typing import Annotated, Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

import langfx_nb as lf
from langfx_nb.schema import Schema, annotation_text
from langfx_nb.structured.protocols import (
    JsonProtocol,
    PythonProtocol,
    extract_code_block,
    parse_python_expr,
    python_type_source,
    to_python_expr,
)

PY = PythonProtocol()
JS = JsonProtocol()


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Item(BaseModel):
    name: str = Field(description="The item's name.\nLowercase.")
    color: Color | None = None


class Answer(BaseModel):
    """Items found in the text."""

    items: list[Item]
    total: int = 0
    notes: dict[str, float] = {}


class Point(TypedDict):
    x: int
    y: Annotated[int, Field(description="Vertical.")]


@dataclasses.dataclass
class Box:
    label: str
    corner: Point
    size: tuple[int, int] = (1, 1)


# -- type rendering --------------------------------------------------------------------------
def test_python_type_source_lists_dependencies_first_with_comments() -> None:
    assert python_type_source(Schema.of(Answer)) == (
        "Answer\n\n```python\n"
        "class Item:\n"
        "  # The item's name.\n"
        "  # Lowercase.\n"
        "  name: str\n"
        "  color: Literal['red', 'green'] | None = None\n\n"
        "class Answer:\n"
        '  """Items found in the text."""\n'
        "  items: list[Item]\n"
        "  total: int = 0\n"
        "  notes: dict[str, float] = {}\n"
        "```"
    )


def test_python_type_source_exact() -> None:
    src = python_type_source(Schema.of(Answer))
    assert src.startswith("Answer\n\n```python\nclass Item:\n  # The item's name.\n  # Lowercase.")
    assert "  color: Literal['red', 'green'] | None = None" in src
    assert '  """Items found in the text."""\n  items: list[Item]\n  total: int = 0' in src
    assert src.index("class Item") < src.index("class Answer")


def test_typeddict_and_dataclass_render_as_classes() -> None:
    src = python_type_source(Schema.of(list[Box]))
    assert src.startswith("list[Box]\n\n```python\nclass Point:\n  x: int\n  # Vertical.\n  y: int")
    assert "class Box:\n  label: str\n  corner: Point\n  size: tuple[int, int]" in src
    assert Schema.of(list[Box]).classes.keys() == {"Point", "Box"}


@pytest.mark.parametrize(
    ("tp", "text"),
    [
        (int, "int"),
        (list[int], "list[int]"),
        (Literal["a", "b"], "Literal['a', 'b']"),
        (dict[str, list[int]] | None, "dict[str, list[int]] | None"),
        (tuple[int, ...], "tuple[int, ...]"),
        (Color, "Literal['red', 'green']"),
        (set[str], "list[str]"),
    ],
)
def test_annotation_text(tp: Any, text: str) -> None:
    assert annotation_text(tp) == text


def test_scalar_schema_has_no_class_block() -> None:
    assert python_type_source(Schema.of(int)) == "int"


def test_two_classes_with_one_name_are_rejected() -> None:
    def make() -> type[BaseModel]:
        class Item(BaseModel):
            x: int

        return Item

    with pytest.raises(TypeError, match="two different classes named 'Item'"):
        Schema.of(tuple[Item, make()])


def test_schema_is_cached_per_type() -> None:
    assert Schema.of(Answer) is Schema.of(Answer)
    assert Schema.of(list[Item]) is Schema.of(list[Item])


# -- extraction ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Answer(x=1)", "Answer(x=1)"),
        ("```python\nA(x=1)\n```", "A(x=1)"),
        ("Sure:\n```py\nA(x=1)\n```\nDone.", "A(x=1)"),
        ("```\nA(x=1)\n```", "A(x=1)"),
        ("```json\n{}\n```\n```python\nA()\n```", "A()"),
        ("```python\nA(x=1", "A(x=1"),  # truncated: runs to the end
        ("```python title='x'\nA()\n```", "A()"),
        ("```python A(x=1)```", "A(x=1)"),
        ("Answer: ```A()``` done", "A()"),
        ("```python\nA()```", "A()"),
        ("```json\n{}\n```\n```\nB()\n```", "B()"),
        ("```python\nA(s='```', t=1)\n```", "A(s='```', t=1)"),
    ],
)
def test_extract_code_block(text: str, code: str) -> None:
    assert extract_code_block(text, ("python", "py"))[0] == code


# -- python protocol parsing ------------------------------------------------------------------
def test_parse_nested_model() -> None:
    text = "```python\nAnswer(items=[Item(name='a', color='red'), Item(name='b')], total=-2)\n```"
    value = PY.parse(text, Schema.of(Answer))
    assert value == Answer(items=[Item(name="a", color=Color.RED), Item(name="b")], total=-2)


@pytest.mark.parametrize(
    ("tp", "text", "expected"),
    [
        (int, "42", 42),
        (int, "-7", -7),
        (float, "-1.5e3", -1500.0),
        (list[int], "[1, 2, 3]", [1, 2, 3]),
        (Literal["yes", "no"], "'no'", "no"),
        (list[Item], "[Item(name='x')]", [Item(name="x")]),
        (dict[str, int], "{'a': 1}", {"a": 1}),
        (tuple[int, str], "(1, 'a')", (1, "a")),
        (str | None, "None", None),
        (bool, "True", True),
        (Point, "Point(x=1, y=2)", {"x": 1, "y": 2}),
        (Point, "{'x': 1, 'y': 2}", {"x": 1, "y": 2}),
        (Box, "Box(label='b', corner=Point(x=0, y=1))", Box("b", {"x": 0, "y": 1})),
        (str, "'a' 'b'", "ab"),  # implicit concatenation is one literal
    ],
)
def test_parse_python_types(tp: Any, text: str, expected: Any) -> None:
    assert PY.parse(f"```python\n{text}\n```", Schema.of(tp)) == expected


def test_validation_failure_says_what_and_where() -> None:
    with pytest.raises(lf.MappingError) as info:
        PY.parse("Answer(items=[Item(name=3)])", Schema.of(Answer))
    assert "Item(...) did not validate" in str(info.value)
    assert "name" in str(info.value)
    assert info.value.detail


def test_wrong_top_level_type() -> None:
    with pytest.raises(lf.MappingError, match="does not match the expected type list\\[Item\\]"):
        PY.parse("Item(name='a')", Schema.of(list[Item]))


def test_unfenced_answer_inside_prose() -> None:
    text = "Sure! Here it is: Answer(items=[Item(name='z')]). Anything else?"
    assert PY.parse(text, Schema.of(Answer)).items[0].name == "z"


@pytest.mark.parametrize(
    "text",
    ["", "   ", "I don't know.", "```python\nAnswer(items=[Item(na", "```python\n```", "null"],
)
def test_garbage_gives_mapping_error_naming_expectation(text: str) -> None:
    with pytest.raises(lf.MappingError) as info:
        PY.parse(text, Schema.of(Answer))
    assert "Answer" in str(info.value)
    assert info.value.raw == text


def test_raw_is_bounded() -> None:
    text = "x" * 10_000
    with pytest.raises(lf.MappingError) as info:
        PY.parse(text, Schema.of(Answer))
    assert len(info.value.raw) <= lf.MappingError.MAX_RAW_CHARS + 1


# -- json protocol ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tp", "text", "expected"),
    [
        (int, '```json\n{"result": 3}\n```', 3),
        (list[Item], '{"result": [{"name": "a"}]}', [Item(name="a")]),
        (Literal["a", "b"], '```json\n{"result": "b"}\n```', "b"),
        (Point, '```json\n{"result": {"x": 1, "y": 2}}\n```', {"x": 1, "y": 2}),
        (Box, '{"result": {"label": "l", "corner": {"x": 1, "y": 1}}}', Box("l", {"x": 1, "y": 1})),
        (Item, 'Here: {"result": {"name": "q"}} ok', Item(name="q")),
        (Item, '```json\n{"name": "no wrapper"}\n```', Item(name="no wrapper")),
    ],
)
def test_json_protocol_parse(tp: Any, text: str, expected: Any) -> None:
    assert JS.parse(text, Schema.of(tp)) == expected


@pytest.mark.parametrize("text", ["", "not json", '```json\n{"result": [1,\n```', "{'a': 1}"])
def test_json_protocol_garbage(text: str) -> None:
    with pytest.raises(lf.MappingError, match=r'expected a JSON object \{"result": \.\.\.\}'):
        JS.parse(text, Schema.of(Answer))


def test_json_type_section_drops_generated_titles() -> None:
    section = JS.type_section(Schema.of(Item))
    assert section.startswith("RESULT SCHEMA:\n{")
    assert '"title"' not in section
    assert "The item's name." in section


# -- rendering values ------------------------------------------------------------------------
def test_to_python_expr_shapes() -> None:
    value = Answer(items=[Item(name="a", color=Color.GREEN)], total=1)
    assert to_python_expr(value) == (
        "Answer(items=[Item(name='a', color='green')], total=1, notes={})"
    )
    assert to_python_expr((1,)) == "(1,)"
    assert to_python_expr(Box("b", {"x": 1, "y": 2})) == (
        "Box(label='b', corner={'x': 1, 'y': 2}, size=(1, 1))"
    )
    assert to_python_expr(float("inf")) == "'inf'"


def test_to_python_expr_wraps_long_values() -> None:
    value = Answer(items=[Item(name="x" * 30), Item(name="y" * 30)], total=3)
    text = to_python_expr(value)
    assert "\n" in text
    assert text.startswith("Answer(\n  items=[\n    Item(name='")
    assert PY.parse(text, Schema.of(Answer)) == value


def test_to_python_expr_rejects_bytes() -> None:
    with pytest.raises(TypeError):
        to_python_expr(b"x")


class Leaf(BaseModel):
    s: str
    i: int
    f: float
    b: bool
    o: str | None = None
    lit: Literal["a", "b"] = "a"
    color: Color = Color.RED


class Tree(BaseModel):
    leaves: list[Leaf]
    index: dict[str, Leaf]
    pair: tuple[int, str]
    child: Tree | None = None


_leaf = st.builds(
    Leaf,
    s=st.text(max_size=20),
    i=st.integers(min_value=-(10**30), max_value=10**30),
    f=st.floats(allow_nan=False),
    b=st.booleans(),
    o=st.none() | st.text(max_size=5),
    lit=st.sampled_from(["a", "b"]),
    color=st.sampled_from(Color),
)
_tree = st.recursive(
    st.builds(
        Tree,
        leaves=st.lists(_leaf, max_size=3),
        index=st.dictionaries(st.text(max_size=5), _leaf, max_size=2),
        pair=st.tuples(st.integers(), st.text(max_size=5)),
        child=st.none(),
    ),
    lambda children: st.builds(
        Tree,
        leaves=st.lists(_leaf, max_size=2),
        index=st.just({}),
        pair=st.tuples(st.integers(), st.text(max_size=5)),
        child=children,
    ),
    max_leaves=4,
)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isinf(a) and a == b)
    return bool(a == b)


@settings(max_examples=150, deadline=None)
@given(_tree)
def test_round_trip_python_expression(value: Tree) -> None:
    text = to_python_expr(value)
    assert PY.parse(f"```python\n{text}\n```", Schema.of(Tree)) == value
    assert parse_python_expr(text, Schema.of(Tree)) == value


def test_backticks_inside_an_unfenced_answer_are_not_a_fence() -> None:
    value = ["```", "x" * 80, "```python", "y"]
    assert JS.parse(json.dumps({"result": value}, indent=2), Schema.of(list[str])) == value
    assert PY.parse(to_python_expr(value), Schema.of(list[str])) == value
    fenced = "Here:\n```json\n" + json.dumps({"result": value}) + "\n```"
    assert JS.parse(fenced, Schema.of(list[str])) == value


@settings(max_examples=100, deadline=None)
@given(_tree)
def test_round_trip_json_answer(value: Tree) -> None:
    section = JS.answer_section(value, Schema.of(Tree))
    assert JS.parse(section, Schema.of(Tree)) == value


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.builds(
            Box,
            label=st.text(max_size=8),
            corner=st.fixed_dictionaries({"x": st.integers(), "y": st.integers()}),
            size=st.tuples(st.integers(), st.integers()),
        )
    )
)
@example([Box(label="```", corner={"x": 0, "y": 0}, size=(0, 0))])  # not a code fence
@example([Box(label="```", corner={"x": 0, "y": 0}, size=(820, -(10**23)))])  # multi-line
def test_round_trip_dataclass_and_typeddict(value: list[Box]) -> None:
    assert PY.parse(to_python_expr(value), Schema.of(list[Box])) == value


@given(st.text(max_size=200))
def test_arbitrary_text_never_escapes_mapping_error(text: str) -> None:
    for proto in (PY, JS):
        with contextlib.suppress(lf.MappingError):
            proto.parse(text, Schema.of(Answer))


class Event(BaseModel):
    when: datetime.datetime
    day: datetime.date
    length: datetime.timedelta
    price: decimal.Decimal
    id: uuid.UUID


def test_stringly_types_are_shown_and_written_as_literals() -> None:
    src = python_type_source(Schema.of(Event))
    assert "  when: str\n  day: str\n  length: float\n  price: str\n  id: str" in src
    value = Event(
        when=datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC),
        day=datetime.date(2024, 5, 2),
        length=datetime.timedelta(minutes=90),
        price=decimal.Decimal("9.99"),
        id=uuid.UUID(int=7),
    )
    text = to_python_expr(value)
    assert "when='2024-05-01T12:30:00+00:00',\n  day='2024-05-02',\n  length=5400.0," in text
    assert PY.parse(text, Schema.of(Event)) == value
