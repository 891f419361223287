"""Per provider: plain query, typed query per protocol, text stream, structured stream,
streamed tool round trip. Marked ``live``: ``pytest tests/live -m live``."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import LanguageModel

pytestmark = [pytest.mark.live, pytest.mark.timeout(180)]


class City(BaseModel):
    name: str
    country: str
    population_millions: float


async def test_plain_query(lm: LanguageModel) -> None:
    answer = await lf.query("What is 17 + 25? Reply with the number only.", lm=lm)
    assert "42" in str(answer)


@pytest.mark.parametrize("protocol", ["python", "json"])
async def test_typed_query(lm: LanguageModel, protocol: str) -> None:
    city = await lf.query(
        "Describe the capital of France.", City, lm=lm, protocol=protocol, temperature=0
    )
    assert isinstance(city, City) and city.name.lower() == "paris"


async def test_native_structured_output_where_supported(lm: LanguageModel) -> None:
    if not lm.capabilities.native_schema:
        with pytest.raises(lf.UnsupportedCapabilityError):
            await lf.query("x", City, lm=lm, native_structured_output=True)
        return
    city = await lf.query(
        "Describe the capital of Japan.", City, lm=lm, native_structured_output=True
    )
    assert isinstance(city, City) and city.name.lower() == "tokyo"


async def test_text_stream(lm: LanguageModel) -> None:
    chunks = [c async for c in lm.stream("Count from 1 to 20, separated by spaces.")]
    assert len(chunks) > 1 and chunks[-1].final
    message = chunks[-1].aggregated
    assert "".join(c.delta for c in chunks) == message.text
    assert "20" in message.text
    if getattr(lm, "uses_default_endpoint", True):  # compatible servers may omit usage
        assert message.usage is not None and message.usage.prompt_tokens


async def test_structured_stream(lm: LanguageModel) -> None:
    events = [
        ev
        async for ev in lf.query_stream(
            "Describe the capital of Italy.", City, lm=lm, protocol="json"
        )
    ]
    terminal = events[-1]
    assert isinstance(terminal, lf.GenerationComplete), terminal
    assert terminal.value.name.lower() == "rome"
    assert len(events) > 1


async def test_streamed_tool_round_trip(lm: LanguageModel) -> None:
    seen: list[tuple[int, int]] = []

    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        seen.append((a, b))
        return a + b

    answer = await lf.Agent(
        "Use the add tool to compute 1234 + 4321, then state the result.",
        tools=[add],
        stream=True,
    ).invoke(lm=lm)
    assert seen and "5555" in answer.replace(",", "")
