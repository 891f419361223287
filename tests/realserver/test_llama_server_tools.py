"""Real tool calls from llama-server and a whole ``lf.Agent`` round trip.

SmolLM2's own chat template has no tools, so llama-server would drop them. Started with
``--chat-template-file chatml_tools.jinja`` (ChatML, SmolLM2's turn format, plus a tool list
and ``<tool_call>{...}</tool_call>``), the server learns the tool-call form from the template
and constrains the output to it. A one-shot example in the transcript (a call, its result,
an answer) is what makes a 135M model take the tool path; the server then parses the call
and sends it back as OpenAI ``tool_calls`` with its own ids.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import langfx_nb as lf
from langfx_nb.llms.base import ToolSpec

from .conftest import LlamaServer, openai_at

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(120)]

TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
INSTRUCTIONS = "Always call the get_weather tool first."


def one_shot(question: str) -> lf.ComplexMessage:
    """An earlier exchange (call → result → answer), then the question."""
    call = lf.ToolCall("call_example", "get_weather", {"city": "Oslo"})
    return lf.ComplexMessage(
        [
            lf.UserMessage("What is the weather in Oslo?"),
            lf.AIMessage([call]),  # no text: sent with "content": ""
            lf.ToolMessage('{"sky": "sunny"}', call.id, call.name),
            lf.AIMessage("It is sunny in Oslo."),
            lf.UserMessage(question),
        ]
    )


@pytest.fixture(scope="module")
def tool_server(llama_paths: dict[str, str]) -> Iterator[LlamaServer]:
    server = LlamaServer(
        llama_paths["server"], llama_paths["model"], "--chat-template-file", str(TEMPLATE)
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def tool_lm(tool_server: LlamaServer, allow_requests: None) -> AsyncIterator[lf.llms.OpenAI]:
    model = openai_at(tool_server.url)
    try:
        yield model
    finally:
        await model.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_forced_tool_call_comes_back_as_a_real_tool_call(
    tool_lm: lf.llms.OpenAI, stream: bool
) -> None:
    opts = {"tools": [WEATHER], "tool_choice": "any", "temperature": 0, "max_tokens": 64}
    prompt = one_shot("What is the weather in Paris?")
    if stream:
        chunks = [c async for c in tool_lm.stream(prompt, system_message=INSTRUCTIONS, **opts)]
        msg = chunks[-1].aggregated
        kinds = [e.type for c in chunks for e in c.events]
        assert kinds[0] == "tool_call_start" and kinds[-1] == "tool_call_end"
        assert chunks[-1].finish_reason == "tool_calls"
    else:
        msg = await tool_lm.call(prompt, system_message=INSTRUCTIONS, **opts)
    (call,) = msg.tool_calls
    assert call.name == "get_weather" and isinstance(call.args["city"], str)
    assert call.id and call.id != "call_example"  # the server's own id
    assert msg.metadata["provider_finish_reason"] == "tool_calls"


async def test_agent_round_trip(tool_lm: lf.llms.OpenAI) -> None:
    """Step 1: a real tool call; the tool runs; step 2 sends the assistant turn (content "")
    and the tool result back, and the server answers with text."""
    asked: list[str] = []

    @lf.tool
    async def get_weather(city: str) -> dict[str, str]:
        """Current weather for a city."""
        asked.append(city)
        return {"sky": "cloudy"}

    answer = await lf.Agent(
        one_shot("What is the weather in Paris?"),
        instructions=INSTRUCTIONS,
        tools=[get_weather],
        limits=lf.AgentLimits(max_steps=3),
    ).invoke(lm=tool_lm, temperature=0, max_tokens=64)
    assert len(asked) == 1 and isinstance(asked[0], str)
    assert isinstance(answer, str) and answer.strip()
