"""The error ``lf.query`` raises for an answer that did not parse or validate quotes the
start of that answer: a person reading it sees what the model said."""

from __future__ import annotations

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted


class Point(pydantic.BaseModel):
    x: int
    y: int


async def test_the_raised_error_quotes_the_models_answer() -> None:
    with pytest.raises(lf.MappingError) as info:
        await lf.query("Where?", Point, lm=Scripted(["Point(x='one', y=2)"]))
    assert str(info.value).endswith("\nthe model's answer: \"Point(x='one', y=2)\"")


async def test_a_long_answer_is_quoted_in_part_with_control_characters_escaped() -> None:
    answer = "\x1b[31mI cannot " + "say " * 500
    with pytest.raises(lf.MappingError) as info:
        await lf.query("Where?", Point, lm=Scripted([answer]))
    quote = str(info.value).partition("\nthe model's answer: ")[2]
    assert quote.startswith("'\\x1b[31mI cannot say")
    assert "\x1b" not in quote
    assert quote.endswith(" …") and len(quote) < lf.MappingError.MAX_QUOTE_CHARS + 20


async def test_after_repairs_only_the_raised_error_quotes_its_answer() -> None:
    lm = Scripted(["Point(x=1)", "Point(y=2)"])
    with pytest.raises(lf.MappingError) as info:
        await lf.query("Where?", Point, lm=lm, repair=1)
    assert "the model's answer: 'Point(y=2)'" in str(info.value)
    assert "the model's answer" not in str(info.value.attempts[0])
    assert "the model's answer" not in lm.requests[1].messages[-1].text  # the re-ask
