"""Repair by re-asking: ``lf.query(..., repair=N)``, ``query_stream``, ``Session`` traces."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import InMemoryCache, Scripted
from langfx_nb.messages import AIMessage


class Point(BaseModel):
    x: int
    y: int


GOOD = "Point(x=1, y=2)"
BAD_TYPE = "Point(x='one', y=2)"
NOT_CODE = "I think it is (1, 2)"


async def test_default_is_no_repair_and_no_extra_call() -> None:
    lm = Scripted([BAD_TYPE, GOOD])
    with pytest.raises(lf.MappingError) as info:
        await lf.query("Where?", Point, lm=lm)
    assert len(lm.requests) == 1
    assert info.value.attempts == []


async def test_a_repair_reasks_with_the_previous_answer_and_the_exact_error() -> None:
    lm = Scripted([BAD_TYPE, GOOD])
    message = await lf.query("Where?", Point, lm=lm, repair=2, returns_message=True)
    assert message.result == Point(x=1, y=2)
    assert len(lm.requests) == 2
    with pytest.raises(lf.MappingError) as first:
        await lf.query("Where?", Point, lm=Scripted([BAD_TYPE]))
    second = lm.requests[1].messages
    assert second[0] == lm.requests[0].messages[0]  # the original prompt, unchanged
    assert isinstance(second[1], AIMessage) and second[1].text == BAD_TYPE
    # the exact error the answer produced (the raised one also quotes the answer, which a
    # re-ask already sends as the previous turn)
    error = str(first.value).partition("\nthe model's answer: ")[0]
    assert error in second[2].text
    assert message.metadata["repairs"] == [{"error": error, "raw": BAD_TYPE}]


async def test_at_most_n_repairs_and_the_error_carries_every_attempt() -> None:
    lm = Scripted([NOT_CODE, BAD_TYPE, "Point(x=1)", GOOD])
    with pytest.raises(lf.MappingError) as info:
        await lf.query("Where?", Point, lm=lm, repair=2)
    assert len(lm.requests) == 3
    attempts = info.value.attempts
    assert [a.raw for a in attempts] == [NOT_CODE, BAD_TYPE, "Point(x=1)"]
    assert attempts[-1] is info.value
    # Each re-ask shows only the latest failed answer, so the prompt stays bounded.
    assert len(lm.requests[2].messages) == 3
    assert lm.requests[2].messages[1].text == BAD_TYPE


async def test_repair_is_checked_before_any_call() -> None:
    lm = Scripted([GOOD])
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="repair"):
            await lf.query("Where?", Point, lm=lm, repair=bad)
    with pytest.raises(TypeError, match="repair= needs a schema"):
        await lf.query("Where?", lm=lm, repair=1)
    assert lm.requests == []


async def test_a_failed_answer_is_not_replayed_from_the_cache() -> None:
    cache = InMemoryCache()
    lm = Scripted([BAD_TYPE, GOOD, BAD_TYPE, GOOD], cache=cache)
    assert await lf.query("Where?", Point, lm=lm, repair=1) == Point(x=1, y=2)
    # The good answer to the re-ask is cached; the bad first answer was dropped.
    assert await lf.query("Where?", Point, lm=lm, repair=1) == Point(x=1, y=2)
    assert len(lm.requests) == 3


async def test_mapping_repairs_too() -> None:
    mapping = lf.Mapping("Where?", Point)
    message = await mapping.call(lm=Scripted([NOT_CODE, GOOD]), repair=1)
    assert message.result == Point(x=1, y=2)


async def test_each_attempt_is_a_child_node_with_its_error() -> None:
    lm = Scripted([NOT_CODE, BAD_TYPE, GOOD])
    async with lf.Session(lm) as session:
        assert await session.query("Where?", Point, repair=3) == Point(x=1, y=2)
    (query,) = [n for n in session.root.children if n.kind == "query"]
    assert query.status == "ok"
    assert query.metadata["attempts"] == 3
    attempts = query.children
    assert [(n.name, n.status) for n in attempts] == [
        ("attempt 1", "failed"),
        ("attempt 2", "failed"),
        ("attempt 3", "ok"),
    ]
    assert attempts[0].error is not None and attempts[0].error["type"] == "MappingError"
    assert attempts[1].outputs == {"text": BAD_TYPE}
    assert query.usage is not None and query.usage.total_tokens  # summed over attempts


async def test_a_query_without_repair_has_no_attempt_nodes() -> None:
    async with lf.Session(Scripted([GOOD])) as session:
        await session.query("Where?", Point)
    (query,) = session.all_queries
    assert query.children == ()


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


async def test_streamed_queries_repair_and_report_each_new_attempt() -> None:
    lm = Scripted([BAD_TYPE, GOOD])
    events = await collect(lf.query_stream("Where?", Point, lm=lm, repair=1))
    kinds = [e.type for e in events]
    assert kinds.count("repairing") == 1
    repairing = events[kinds.index("repairing")]
    assert repairing.attempt == 1 and repairing.text == BAD_TYPE
    assert kinds[-1] == "generation_complete" and events[-1].value == Point(x=1, y=2)
    # The new attempt's fields follow the repairing event from the root again.
    assert "object_start" in kinds[kinds.index("repairing") :]
    assert lm.requests[1].messages[1].text == BAD_TYPE
    assert str(repairing.error) in lm.requests[1].messages[2].text


async def test_a_streamed_query_that_never_parses_ends_with_every_attempt() -> None:
    lm = Scripted([NOT_CODE, BAD_TYPE])
    events = await collect(lf.query_stream("Where?", Point, lm=lm, repair=1))
    assert events[-1].type == "parsing_failed"
    assert [a for a in events[-1].error.attempts][-1] is events[-1].error
    assert len(events[-1].error.attempts) == 2


async def test_session_stream_attempts_are_child_nodes() -> None:
    lm = Scripted([BAD_TYPE, GOOD])
    async with lf.Session(lm) as session:
        await collect(session.query_stream("Where?", Point, repair=1))
    (query,) = [n for n in session.root.children if n.kind == "query"]
    assert query.status == "ok"
    assert [(n.name, n.status) for n in query.children] == [
        ("attempt 1", "failed"),
        ("attempt 2", "ok"),
    ]


# -- the Agent's final structured answer ----------------------------------------------------
@lf.tool
async def locate(name: str) -> str:
    """Where something is."""
    return "x=1, y=2"


async def test_agent_output_is_parsed_and_repaired_within_its_steps() -> None:
    lm = Scripted(
        [
            lf.ToolCall("c1", "locate", {"name": "treasure"}),
            '{"result": {"x": "one", "y": 2}}',
            '{"result": {"x": 1, "y": 2}}',
        ]
    )
    agent = lf.Agent("Where is the treasure?", tools=[locate], output=Point, repair=1)
    async with lf.Session(lm) as session:
        assert await agent.invoke(session) == Point(x=1, y=2)
    first = lm.requests[0].messages[0].text
    assert "Where is the treasure?" in first and "OUTPUT JSON OBJECT" in first  # format asked
    reask = lm.requests[2].messages[-1]
    assert reask.role == "user" and "does not match the expected type Point" in reask.text
    (log,) = session.all_logs
    assert log.name == "warning" and "attempt 1" in log.inputs["message"]
    assert log.inputs["error"] in reask.text


async def test_agent_output_without_repair_fails_with_the_mapping_error() -> None:
    lm = Scripted(['{"result": "nowhere"}', '{"result": {"x": 1, "y": 2}}'])
    with pytest.raises(lf.MappingError) as info:
        await lf.Agent("Where?", output=Point).invoke(lm=lm)
    assert len(lm.requests) == 1 and info.value.attempts == []
    lm = Scripted(['{"result": "a"}', '{"result": "b"}', '{"result": "c"}'])
    with pytest.raises(lf.MappingError) as info:
        await lf.Agent("Where?", output=Point, repair=1).invoke(lm=lm)
    assert len(lm.requests) == 2 and len(info.value.attempts) == 2
    with pytest.raises(TypeError, match="repair= needs output="):
        lf.Agent("Where?", repair=1)


async def test_agent_repair_sends_only_the_latest_failed_answer_as_lf_query_does() -> None:
    # Six 1 MB answers that never parse: each re-ask must carry only the latest failed
    # answer (bounded, as lf.query), not every earlier one (5 MB by the sixth request).
    big = [f'{{"result": "{str(i) * 1_000_000}"}}' for i in range(6)]
    lm = Scripted(big)
    agent = lf.Agent("Where?", output=Point, repair=5, limits=lf.AgentLimits(max_steps=8))
    with pytest.raises(lf.MappingError) as info:
        await agent.invoke(lm=lm)
    assert len(lm.requests) == 6 and len(info.value.attempts) == 6
    sent = [sum(len(m.text) for m in r.messages) for r in lm.requests]
    assert max(sent) < 1_200_000  # the prompt, one failed answer and its error
    last = lm.requests[-1].messages
    assert [m.role for m in last] == ["user", "ai", "user"]
    assert last[1].text == big[4]  # the latest failed answer, not the first
    query_lm = Scripted(big)
    with pytest.raises(lf.MappingError):
        await lf.query("Where?", Point, lm=query_lm, repair=5, protocol="json")
    assert [m.role for m in query_lm.requests[-1].messages] == ["user", "ai", "user"]
