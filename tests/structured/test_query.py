"""lf.query with schemas: both protocols, types, examples, native output, cache, hooks."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Generic, Literal, TypeVar

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

import langfx_nb as lf
from langfx_nb.llms import Capabilities, InMemoryCache, LMRequest, Scripted, StaticResponse
from langfx_nb.llms.fake import Fake


class Item(BaseModel):
    name: str
    color: str | None = None


class Answer(BaseModel):
    items: list[Item]


class Pair(TypedDict):
    a: int
    b: str


@dataclasses.dataclass
class Span:
    start: int
    end: int


def fenced(code: str, lang: str = "python") -> str:
    return f"Here you go:\n```{lang}\n{code}\n```\n"


@pytest.mark.parametrize(
    ("schema", "python_answer", "json_answer", "expected"),
    [
        (
            Answer,
            "Answer(items=[Item(name='apple', color='red')])",
            '{"result": {"items": [{"name": "apple", "color": "red"}]}}',
            Answer(items=[Item(name="apple", color="red")]),
        ),
        (list[Item], "[Item(name='a')]", '{"result": [{"name": "a"}]}', [Item(name="a")]),
        (int, "42", '{"result": 42}', 42),
        (Literal["yes", "no"], "'yes'", '{"result": "yes"}', "yes"),
        (Pair, "Pair(a=1, b='x')", '{"result": {"a": 1, "b": "x"}}', {"a": 1, "b": "x"}),
        (Span, "Span(start=1, end=5)", '{"result": {"start": 1, "end": 5}}', Span(1, 5)),
    ],
)
async def test_both_protocols_give_the_same_value(
    schema: Any, python_answer: str, json_answer: str, expected: Any
) -> None:
    py = await lf.query("q", schema, lm=StaticResponse(fenced(python_answer)))
    js = await lf.query(
        "q", schema, lm=StaticResponse(fenced(json_answer, "json")), protocol="json"
    )
    assert py == expected
    assert js == expected


async def test_python_prompt_format() -> None:
    lm = Scripted([fenced("Answer(items=[])")])
    await lf.query("Fruits in {{text}}?", Answer, lm=lm, vars={"text": "a pear"})
    prompt = lm.requests[0].messages[-1].text
    assert prompt.startswith("Please respond to the last REQUEST with an OUTPUT PYTHON OBJECT")
    # the built-in worked example, then the request, type and output header
    assert prompt.count("REQUEST:\n") == 2
    assert "\n\nREQUEST:\nFruits in a pear?\n\nOUTPUT PYTHON TYPE:\nAnswer\n\n```python\n" in prompt
    assert "class Item:\n  name: str\n  color: str | None = None\n\nclass Answer:\n" in prompt
    assert prompt.endswith("```\n\nOUTPUT PYTHON OBJECT:\n")
    assert lm.requests[0].system is None


async def test_json_prompt_format() -> None:
    lm = Scripted([fenced('{"result": 1}', "json")])
    await lf.query("How many?", int, lm=lm, protocol="json")
    prompt = lm.requests[0].messages[-1].text
    assert prompt.startswith("Please respond to the last REQUEST with an OUTPUT JSON OBJECT")
    assert prompt.endswith(
        'REQUEST:\nHow many?\n\nRESULT SCHEMA:\n{"type": "integer"}\n\nOUTPUT JSON OBJECT:\n'
    )


async def test_system_message_travels_as_system_role() -> None:
    lm = Scripted([fenced("1")])
    await lf.query("q", int, lm=lm, system_message="You are precise.")
    assert lm.requests[0].system == "You are precise."
    assert "precise" not in lm.requests[0].messages[-1].text


async def test_returns_message_with_result_and_trace_metadata() -> None:
    answer = fenced("Answer(items=[Item(name='a')])")
    msg = await lf.query("Fruits?", Answer, lm=StaticResponse(answer), returns_message=True)
    assert isinstance(msg, lf.AIMessage)
    assert msg.result == Answer(items=[Item(name="a")])
    assert msg.text == answer
    assert msg.metadata["protocol"] == "python"
    assert msg.metadata["raw_response"] == answer
    assert msg.metadata["schema"] == "Answer"
    assert "REQUEST:\nFruits?" in msg.metadata["rendered_prompt"]
    msg.to_json()  # still serializable for traces


async def test_mapping_error_carries_raw_and_detail() -> None:
    with pytest.raises(lf.MappingError) as info:
        await lf.query("q", Answer, lm=StaticResponse(fenced("Answer(items=[Item(color='x')])")))
    assert "Item(name=" not in info.value.raw
    assert info.value.raw.startswith("Here you go")
    assert info.value.detail
    assert "name" in str(info.value)


async def test_user_examples_replace_the_builtin_example() -> None:
    lm = Scripted([fenced("Answer(items=[])")])
    examples = [
        lf.MappingExample("Fruits in 'a fig'?", Answer(items=[Item(name="fig")]), context="food"),
        lf.MappingExample("Count: 'a b c'", 3),
    ]
    await lf.query("Fruits in 'a kiwi'?", Answer, lm=lm, examples=examples)
    prompt = lm.requests[0].messages[-1].text
    assert "apple" not in prompt  # no built-in example
    assert "CONTEXT:\nfood\n\nREQUEST:\nFruits in 'a fig'?\n\nOUTPUT PYTHON TYPE:\nAnswer" in prompt
    assert (
        "OUTPUT PYTHON OBJECT:\n```python\nAnswer(items=[Item(name='fig', color=None)])\n```"
        in prompt
    )
    # an example whose output is not a class uses the query's schema section
    assert "REQUEST:\nCount: 'a b c'\n\nOUTPUT PYTHON TYPE:\nAnswer" in prompt
    assert "```python\n3\n```" in prompt
    assert prompt.count("REQUEST:\n") == 3


async def test_empty_examples_show_no_example() -> None:
    lm = Scripted([fenced("1")])
    await lf.query("q", int, lm=lm, examples=[])
    prompt = lm.requests[0].messages[-1].text
    assert prompt.count("REQUEST:") == 1
    assert prompt.endswith("\n\nREQUEST:\nq\n\nOUTPUT PYTHON TYPE:\nint\n\nOUTPUT PYTHON OBJECT:\n")


async def test_json_examples() -> None:
    lm = Scripted([fenced('{"result": {"items": []}}', "json")])
    ex = lf.MappingExample("Fruits in 'a fig'?", Answer(items=[Item(name="fig")]))
    await lf.query("q", Answer, lm=lm, protocol="json", examples=[ex])
    prompt = lm.requests[0].messages[-1].text
    assert (
        'OUTPUT JSON OBJECT:\n```json\n{"result": {"items": [{"name": "fig", "color": null}]}}\n```'
        in prompt
    )


async def test_image_in_prompt_stays_a_part() -> None:
    lm = Scripted([fenced("'cat'")])
    img = lf.Image.from_uri("https://example.com/cat.png")
    out = await lf.query("What animal is in {{img}}?", str, lm=lm, vars={"img": img})
    assert out == "cat"
    sent = lm.requests[0].messages[-1]
    assert sent.modalities == [img]
    assert "REQUEST:\nWhat animal is in " in sent.text


async def test_message_prompt_sent_inside_the_frame() -> None:
    lm = Scripted([fenced("1")])
    await lf.query(lf.UserMessage("literal {{braces}}"), int, lm=lm)
    assert "REQUEST:\nliteral {{braces}}\n\n" in lm.requests[0].messages[-1].text


async def test_multi_turn_prompt_frames_the_last_user_turn() -> None:
    lm = Scripted([fenced("2")])
    turns = [lf.UserMessage("one"), lf.AIMessage("ok"), lf.UserMessage("how many turns?")]
    await lf.query(turns, int, lm=lm)
    sent = lm.requests[0].messages
    assert [m.role for m in sent] == ["user", "ai", "user"]
    assert sent[0].text == "one"
    assert "REQUEST:\nhow many turns?\n\nOUTPUT PYTHON TYPE:\nint" in sent[2].text


class NoNative(Fake):
    capabilities = Capabilities(native_schema=False)

    def respond(self, request: LMRequest) -> Any:
        raise AssertionError("must not be called")


async def test_native_structured_output_sends_schema_and_validates() -> None:
    lm = Scripted(['{"items": [{"name": "a"}]}'])
    out = await lf.query("Fruits?", Answer, lm=lm, native_structured_output=True)
    assert out == Answer(items=[Item(name="a")])
    req = lm.requests[0]
    assert req.response_schema == Answer.model_json_schema()
    assert req.messages[-1].text == "Fruits?"  # no protocol framing


async def test_native_non_object_schema_is_wrapped() -> None:
    lm = Scripted(['{"result": [1, 2]}'])
    msg = await lf.query("q", list[int], lm=lm, native_structured_output=True, returns_message=True)
    assert msg.result == [1, 2]
    assert msg.metadata["protocol"] == "native"
    assert lm.requests[0].response_schema == {
        "type": "object",
        "properties": {"result": {"items": {"type": "integer"}, "type": "array"}},
        "required": ["result"],
    }


async def test_native_invalid_json_is_mapping_error() -> None:
    with pytest.raises(lf.MappingError, match="not valid JSON"):
        await lf.query("q", Answer, lm=StaticResponse("nope"), native_structured_output=True)


async def test_native_unsupported_fails_before_io() -> None:
    with pytest.raises(lf.UnsupportedCapabilityError):
        await lf.query("q", Answer, lm=NoNative(), native_structured_output=True)


async def test_failed_parse_is_evicted_from_cache() -> None:
    cache = InMemoryCache()
    lm = Scripted(["garbage", fenced("7")], cache=cache)
    with pytest.raises(lf.MappingError):
        await lf.query("q", int, lm=lm)
    assert len(cache) == 0
    assert await lf.query("q", int, lm=lm) == 7  # asked again, not replayed
    assert len(cache) == 1
    msg = await lf.query("q", int, lm=lm, returns_message=True)  # a good answer stays cached
    assert msg.metadata.get("cache_hit") is True
    assert len(lm.requests) == 2


class Lenient(lf.Mapping):
    def parse_result(self, text: str) -> Any:
        return text


async def test_failed_parse_of_cache_hit_is_evicted() -> None:
    cache = InMemoryCache()
    lm = StaticResponse("not a number", cache=cache)
    await Lenient("q", int).call(lm=lm)  # caches the answer under the int prompt's key
    assert len(cache) == 1
    with pytest.raises(lf.MappingError):
        await lf.query("q", int, lm=lm)  # a cache hit that does not parse
    assert len(cache) == 0
    assert cache.hits == 1


class Custom(lf.Mapping):
    def postprocess_response(self, response: lf.AIMessage[Any]) -> str:
        return response.text.split("FINAL:", 1)[-1]

    def postprocess_result(self, value: Any) -> Any:
        return value * 2


async def test_mapping_hooks() -> None:
    m = Custom("q {{x}}", int, lm=StaticResponse("thinking... FINAL: 21"))
    msg = await m.call({"x": 1})
    assert msg.result == 42
    assert msg.metadata["raw_response"] == " 21"


async def test_mapping_is_concurrency_safe() -> None:
    def respond(req: LMRequest) -> str:
        n = req.messages[-1].text.split("REQUEST:\nn=")[-1].split("\n")[0]
        return fenced(n)

    m = lf.Mapping("n={{n}}", int, lm=Scripted([respond], loop=True))
    msgs = await asyncio.gather(*(m.call({"n": i}) for i in range(40)))
    assert [x.result for x in msgs] == list(range(40))


async def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown protocol"):
        await lf.query("q", int, lm=StaticResponse("1"), protocol="yaml")
    with pytest.raises(TypeError, match="MappingExample"):
        await lf.query("q", int, lm=StaticResponse("1"), examples=[("a", 1)])
    with pytest.raises(TypeError, match="schema"):
        await lf.query("q", lm=StaticResponse("1"), native_structured_output=True)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]


async def test_generic_model_gets_an_identifier_name() -> None:
    lm = Scripted([fenced("Page_Item(items=[Item(name='a')])")])
    assert await lf.query("q", Page[Item], lm=lm) == Page[Item](items=[Item(name="a")])
    assert "class Page_Item:\n  items: list[Item]" in lm.requests[0].messages[-1].text
