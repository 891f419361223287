"""A status says what happened, and a parent says how many problems below it, each counted
once where it started."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import Scripted, StaticResponse
from tests.notebook.trace_oracle import trace_rows

TC = lf.ToolCall


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def rows(session: lf.Session) -> dict[str, dict[str, Any]]:
    nodes = [n.to_json() for n in session.trace_store.nodes.values()]
    return {r["name"]: r for r in trace_rows(nodes)}


async def test_a_denied_call_goes_from_waiting_to_denied_and_is_counted_once() -> None:
    statuses: list[str] = []

    def watch(event: dict[str, Any]) -> None:
        node = event.get("node")
        if event["type"] in ("node_start", "node_end") and node["kind"] == "tool_call":
            statuses.append(node["status"])
        elif event["type"] == "node_update" and "status" in event["changes"]:
            statuses.append(event["changes"]["status"])

    lm = Scripted([TC("c1", "add", {"a": 9, "b": 1}), "Could not."])
    deny = lambda call, session: lf.Deny("no", by="me")  # noqa: E731
    async with lf.Session(lm) as session:
        session.subscribe(watch)
        await lf.Agent("go", tools=[add], allow_tool=deny).invoke(session)
        shown = rows(session)
    assert statuses == ["running", "waiting", "denied"]
    assert shown["session"]["below"] == "1 denied below"


async def test_a_stopped_call_and_the_agent_it_stopped_are_one_problem() -> None:
    lm = Scripted([TC("c1", "add", {"a": 9, "b": 1}), "never"])
    session = lf.Session(lm)
    with pytest.raises(lf.AgentError):
        await lf.Agent("go", tools=[add], allow_tool=lambda c, s: False).invoke(session)
    (call,) = session.all_tool_calls
    assert call.status == "denied"
    assert rows(session)["session"]["below"] == "1 denied below"


class A(pydantic.BaseModel):
    n: int


async def test_failed_items_are_counted_once_and_the_batch_says_they_failed() -> None:
    async def fn(x: int, s: lf.Session) -> A:
        return await s.query("say {{x}}", A, vars={"x": x})

    session = lf.Session(StaticResponse("not json"))
    await lf.batch(fn, range(3), progress=False, session=session, name="numbers")
    shown = rows(session)
    assert shown["numbers"]["status"] == "failed"
    assert shown["numbers"]["below"] == "3 failed below"
    assert shown["session"]["below"] == "3 failed below"
    batch = next(n for n in session.trace_store.nodes.values() if n.kind == "batch")
    assert batch.error is not None and batch.error["message"] == "3 of 3 items failed"


async def test_a_warning_log_shows_its_level_not_ok() -> None:
    session = lf.Session(StaticResponse("x"))
    session.log("warning", "the cache is cold")
    session.log("info", "hello")
    shown = rows(session)
    assert shown["warning"]["status"] == "warning" and shown["info"]["status"] == "info"
    nodes = [n.to_json() for n in session.trace_store.nodes.values()]
    assert trace_rows(nodes, ended=True)[0]["status"] == "closed"
