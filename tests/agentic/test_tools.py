from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import langfx_nb as lf
from langfx_nb.agentic import strict_json
from langfx_nb.errors import ToolExecutionError
from langfx_nb.llms import ToolSpec


class AddIn(BaseModel):
    a: int
    b: int


async def _add(args: AddIn, session: lf.Session) -> int:
    return args.a + args.b


def test_tool_spec_can_be_passed_to_a_model() -> None:
    add = lf.Tool("add", "Add two integers.", AddIn, int, _add)
    assert isinstance(add.spec, ToolSpec)
    assert add.spec.name == "add" and add.spec.description == "Add two integers."
    assert add.spec.input_schema["properties"]["a"]["type"] == "integer"
    request = lf.llms.Echo().build_request("hi", tools=[add])
    assert request.tools == (add.spec,)


@pytest.mark.parametrize("name", ["", "1abc", "-x", "has space", "a" * 65, "dot.ted", "ü"])
def test_tool_name_rules(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        lf.Tool(name, "", AddIn, int, _add)


@pytest.mark.parametrize("name", ["a", "_x", "get-weather", "A9_-", "a" * 64])
def test_valid_tool_names(name: str) -> None:
    assert lf.Tool(name, "", AddIn, int, _add).name == name


def test_input_must_be_an_object() -> None:
    with pytest.raises(TypeError, match="JSON object"):
        lf.Tool("t", "", int, int, _add)


def test_validate_args_names_the_problem() -> None:
    add = lf.Tool("add", "", AddIn, int, _add)
    assert add.validate_args({"a": 1, "b": "2"}) == AddIn(a=1, b=2)
    with pytest.raises(ToolExecutionError, match=r"invalid arguments for tool add: b: "):
        add.validate_args({"a": 1, "b": "x"})


def test_tool_decorator_infers_schema_description_and_output() -> None:
    @lf.tool
    async def weather(
        city: str, days: int = 1, unit: Annotated[str, Field(pattern="^[CF]$")] = "C"
    ) -> dict[str, float]:
        """Forecast the weather.

        Args:
            city: The city name,
                as users write it.
            days (int): How many days ahead.
        """
        return {"temp": 20.0}

    assert isinstance(weather, lf.Tool)
    assert weather.name == "weather"
    assert weather.description == "Forecast the weather."
    schema = weather.spec.input_schema
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"]["description"] == "The city name, as users write it."
    assert schema["properties"]["days"] == {
        "default": 1,
        "description": "How many days ahead.",
        "title": "Days",
        "type": "integer",
    }
    assert schema["properties"]["unit"]["pattern"] == "^[CF]$"
    assert weather.output_type == dict[str, float]


async def test_decorated_tool_runs_with_validated_args_and_optional_session() -> None:
    @lf.tool(name="greet", description="Say hello.")
    async def hello(name: str, session: lf.Session) -> str:
        return f"hello {name} from {type(session).__name__}"

    assert "session" not in hello.spec.input_schema["properties"]
    args = hello.validate_args({"name": "ada"})
    async with lf.Session() as session:
        assert await hello.execute(args, session) == "hello ada from Session"


def test_tool_decorator_rejects_what_it_cannot_describe() -> None:
    with pytest.raises(TypeError, match="async"):

        @lf.tool
        def sync(x: int) -> int:  # type: ignore[arg-type]
            return x

    with pytest.raises(TypeError, match="type hint"):

        @lf.tool
        async def untyped(x) -> int:  # type: ignore[no-untyped-def]
            return 1

    with pytest.raises(TypeError, match=r"\*args"):

        @lf.tool
        async def star(*xs: int) -> int:
            return 1


class Custom:
    pass


def _cycle() -> Any:
    data: dict[str, Any] = {}
    data["self"] = data
    return data


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, {1, 2}, {"a": {1}}, _cycle(), Custom(), {"a": [Custom()]}, {1: "x"}],
    ids=["nan", "inf", "set", "nested-set", "cycle", "custom", "nested-custom", "int-key"],
)
def test_outputs_that_are_not_json_are_rejected(value: Any) -> None:
    anything = lf.Tool("t", "", AddIn, Any, _add)
    with pytest.raises(ToolExecutionError, match="not valid JSON"):
        anything.serialize_output(value)


def test_typed_output_is_validated_then_encoded() -> None:
    class Out(BaseModel):
        total: float
        tags: list[str]

    typed = lf.Tool("t", "", AddIn, Out, _add)
    assert typed.serialize_output(Out(total=1.5, tags=["x"])) == '{"total":1.5,"tags":["x"]}'
    assert typed.serialize_output({"total": 2, "tags": []}) == '{"total":2.0,"tags":[]}'
    with pytest.raises(ToolExecutionError):
        typed.serialize_output({"total": "many"})
    with pytest.raises(ToolExecutionError):
        typed.serialize_output(Out(total=math.nan, tags=[]))
    floats = lf.Tool("f", "", AddIn, float, _add)
    with pytest.raises(ToolExecutionError):
        floats.serialize_output(math.inf)


def test_strict_json_accepts_plain_data() -> None:
    assert strict_json({"a": [1, 2.5, None, True, "é"], "b": (1,)}) == (
        '{"a":[1,2.5,null,true,"é"],"b":[1]}'
    )
