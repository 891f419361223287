"""lf.otel: every trace node becomes a span, live, with GenAI semantic-convention attributes.

Spans go through the real OpenTelemetry SDK to its in-memory exporter (a
``SimpleSpanProcessor``, so a span is in the exporter the moment its node ends).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.agentic import FakeClock
from langfx_nb.errors import ExecutionTimeoutError, LMError, ToolDeniedError, ToolExecutionError
from langfx_nb.llms import Echo, OpenAI, Scripted, allow_model_requests
from tests.llms.local_server import Reply, local_server
from tests.llms.wire import fixture

from .conftest import Gated, settle

TC = lf.ToolCall


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def done(self) -> list[ReadableSpan]:
        assert lf.otel.flush()
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.done if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.done]
        return found[0]


@pytest.fixture
def spans() -> Iterator[Spans]:
    s = Spans()
    yield s
    s.provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def events(span: ReadableSpan, name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


class Point(BaseModel):
    x: int


@pytest.fixture
def add() -> lf.Tool[Any, Any]:
    @lf.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return add


# -- span kinds ------------------------------------------------------------------------------
async def test_query_span_follows_the_genai_conventions(spans: Spans) -> None:
    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        await session.query("Say {{x}}", vars={"x": "hi"}, temperature=0.2, max_tokens=50)
    node = session.all_queries[0]
    span = spans.one("chat echo")
    a = attrs(span)
    assert span.kind is SpanKind.CLIENT
    assert span.parent is None  # top-level work starts its own trace
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "fake"
    assert a["gen_ai.request.model"] == "echo"
    assert "gen_ai.response.model" not in a  # only what a server says answered (see below)
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert node.usage is not None
    assert a["gen_ai.usage.input_tokens"] == node.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == node.usage.completion_tokens
    assert a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.request.max_tokens"] == 50
    assert a["gen_ai.conversation.id"] == session.id
    assert a["langfx.node.id"] == node.id
    assert "langfx.status" not in a  # only an outcome other than ok is spelled out
    assert span.status.status_code is StatusCode.UNSET
    # content is opt-in: nothing of the prompt or the answer by default
    assert not [k for k in a if "messages" in k]
    assert "hi" not in json.dumps(a)


async def test_a_streamed_structured_query_is_one_chat_span(spans: Spans) -> None:
    lm = Scripted(['{"result": {"x": 7}}'], chunk_size=3)
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        events = [ev async for ev in session.query_stream("a point", Point, protocol="json")]
    assert events[-1].type == "generation_complete"
    (node,) = session.all_queries
    a = attrs(spans.one("chat scripted"))
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.output.type"] == "json"
    assert a["langfx.node.name"] == "query:Point"
    assert node.usage is not None
    assert a["gen_ai.usage.output_tokens"] == node.usage.completion_tokens


async def test_provider_names_follow_the_conventions(spans: Spans) -> None:
    class Gemini(Echo):
        provider = "gemini"

    async with lf.Session(Gemini("gemini-2.5-flash"), tracer_provider=spans.provider) as s:
        await s.query("q")
    a = attrs(spans.one("chat gemini-2.5-flash"))
    assert (a["gen_ai.provider.name"], a["gen_ai.request.model"]) == (
        "gcp.gemini",
        "gemini-2.5-flash",
    )


async def test_agent_tool_and_approval_spans_follow_the_trace_tree(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    clock = FakeClock(100.0)
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "The sum is 3."])

    def policy(call: lf.ToolCall, view: lf.Session) -> lf.Approve:
        clock.advance(1.5)  # the person took 1.5 s to decide
        return lf.Approve(by="alice")

    agent = lf.Agent("add 1 and 2", tools=[add], allow_tool=policy)
    async with lf.Session(lm, tracer_provider=spans.provider, clock=clock) as session:
        assert await agent.invoke(session) == "The sum is 3."
    run = spans.one("invoke_agent Agent")
    steps = spans.named("chat scripted")
    tool = spans.one("execute_tool add")
    a = attrs(run)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "Agent"
    assert (a["gen_ai.provider.name"], a["gen_ai.request.model"]) == ("fake", "scripted")
    assert a["langfx.agent.steps"] == 2 and a["langfx.agent.tool_calls"] == 1
    assert run.parent is None
    assert [attrs(s)["langfx.node.name"] for s in steps] == ["step 1", "step 2"]
    assert attrs(steps[0])["gen_ai.response.finish_reasons"] == ("tool_calls",)
    for child in [*steps, tool]:
        assert parent_of(child) == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    t = attrs(tool)
    assert tool.kind is SpanKind.INTERNAL
    assert t["gen_ai.operation.name"] == "execute_tool"
    assert (t["gen_ai.tool.name"], t["gen_ai.tool.call.id"]) == ("add", "c1")
    assert t["gen_ai.tool.type"] == "function"
    assert "langfx.status" not in t
    (approval,) = [e for e in tool.events if e.name == "langfx.approval"]
    assert dict(approval.attributes or {}) == {
        "langfx.approval.outcome": "approve",
        "langfx.approval.by": "alice",
    }
    # times are the trace's own, on the session clock: the decision 1.5 s after the start
    assert approval.timestamp == tool.start_time + 1_500_000_000
    assert tool.end_time is not None and tool.end_time >= approval.timestamp
    assert run.end_time is not None and run.start_time is not None
    assert run.end_time - run.start_time == 1_500_000_000


async def test_deny_is_an_outcome_and_stop_is_an_error(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "ok then"])
    deny = lf.Agent("x", tools=[add], allow_tool=lambda c, s: lf.Deny("no", by="bob"))
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        await deny.invoke(session)
    tool = spans.one("execute_tool add")
    assert attrs(tool)["langfx.status"] == "denied"
    assert tool.status.status_code is StatusCode.UNSET
    assert events(tool, "langfx.approval")[0]["langfx.approval.outcome"] == "deny"
    assert events(tool, "langfx.approval")[0]["langfx.approval.message"] == "no"
    assert events(tool, "langfx.approval")[0]["langfx.approval.by"] == "bob"

    spans.exporter.clear()
    stop = lf.Agent("x", tools=[add], allow_tool=lambda c, s: False)
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2})])
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        with pytest.raises(ToolDeniedError):
            await stop.invoke(session)
    run = spans.one("invoke_agent Agent")
    tool = spans.one("execute_tool add")
    assert events(tool, "langfx.approval")[0]["langfx.approval.outcome"] == "stop"
    for span in (run, tool):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "ToolDeniedError"
        assert attrs(span)["langfx.status"] == "denied"
        assert events(span, "exception")[0]["exception.type"] == "ToolDeniedError"


async def test_errors_set_the_span_status(spans: Spans, add: lf.Tool[Any, Any]) -> None:
    async with lf.Session(Scripted([LMError("quota")])) as s:
        lf.otel.export(s, spans.provider, capture_content=True)  # an error's text is content
        with pytest.raises(LMError):
            await s.query("q")
    span = spans.one("chat scripted")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "LMError: quota"
    assert events(span, "exception")[0]["exception.message"] == "quota"
    assert attrs(span)["error.type"] == "LMError"
    assert attrs(span)["langfx.status"] == "failed"
    assert "gen_ai.response.model" not in attrs(span)

    @lf.tool
    async def boom() -> int:
        """Fails."""
        raise RuntimeError("kaput")

    lm = Scripted([TC("c1", "boom", {})])
    async with lf.Session(lm, tracer_provider=spans.provider) as s:
        with pytest.raises(ToolExecutionError):
            await lf.Agent("x", tools=[boom]).invoke(s)
    tool = spans.one("execute_tool boom")
    assert tool.status.status_code is StatusCode.ERROR
    assert attrs(tool)["error.type"] == "ToolExecutionError"
    assert spans.one("invoke_agent Agent").status.status_code is StatusCode.ERROR


async def test_a_timeout_is_an_error_with_the_run_s_duration(spans: Spans) -> None:
    clock = FakeClock(0.0)
    gate = asyncio.Event()

    class Waits(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            await gate.wait()

    async with lf.Session(clock=clock, tracer_provider=spans.provider) as session:
        task = asyncio.ensure_future(Waits().invoke(session, max_execution_time=10))
        await settle()
        clock.advance(10)
        with pytest.raises(ExecutionTimeoutError):
            await task
    span = spans.one("Waits")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "ExecutionTimeoutError"
    assert attrs(span)["langfx.status"] == "timed_out"
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == 10_000_000_000


async def test_cancellation_is_an_outcome_not_an_error(spans: Spans) -> None:
    lm = Gated()
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        task = asyncio.ensure_future(session.query("q"))
        await lm.reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    span = spans.one("chat gated")
    assert attrs(span)["langfx.status"] == "cancelled"
    assert span.status.status_code is StatusCode.UNSET


async def test_spans_are_exported_live_while_the_run_goes_on(spans: Spans) -> None:
    seen: list[list[str]] = []

    class Two(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            await session.query("first")
            seen.append([s.name for s in spans.done])  # the first call is already exported
            await session.query("second")

    lm = Gated()
    lm.gate.set()
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        await Two().invoke(session)
        assert [s.name for s in spans.done] == ["chat gated", "chat gated", "Two"]
    assert seen == [["chat gated"]]


async def test_concurrent_branches_and_nested_agents_keep_their_parents(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    inner_lm = Scripted([TC("i1", "add", {"a": 2, "b": 2}), "4"])

    @lf.tool
    async def ask_helper(question: str, session: lf.Session) -> str:
        """Ask a helper agent."""
        helper = lf.Agent(question, tools=[add], name="Helper")
        return await helper.invoke(session, lm=inner_lm)

    class Fan(lf.Action[list[str]]):
        async def call(self, session: lf.Session) -> list[str]:
            async def one(i: int, branch: lf.Session) -> str:
                return str(await branch.query("q {{i}}", vars={"i": i}))

            return await session.concurrent_map(range(3), one, max_concurrency=3)

    outer_lm = Scripted([TC("o1", "ask_helper", {"question": "2+2?"}), "done"])
    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        await Fan().invoke(session)
        await lf.Agent("go", tools=[ask_helper]).invoke(session, lm=outer_lm)

    fan = spans.one("Fan")
    branches = spans.named("chat echo")
    assert len(branches) == 3
    assert {parent_of(b) for b in branches} == {fan.context.span_id}
    assert attrs(fan)["langfx.progress.done"] == 3
    outer = spans.one("invoke_agent Agent")
    call = spans.one("execute_tool ask_helper")
    helper = spans.one("invoke_agent Helper")
    inner_tool = spans.one("execute_tool add")
    assert parent_of(call) == outer.context.span_id
    assert parent_of(helper) == call.context.span_id
    assert parent_of(inner_tool) == helper.context.span_id
    assert {s.context.trace_id for s in (outer, call, helper, inner_tool)} == {
        outer.context.trace_id
    }
    assert fan.context.trace_id != outer.context.trace_id  # each top-level run: its own trace


async def test_a_resumed_run_continues_the_suspended_runs_trace(spans: Spans) -> None:
    class Suspends(lf.Action[str]):  # stands for an agent run that suspended for approval
        async def call(self, session: lf.Session) -> str:
            await session.query("first part")
            return "suspended"

    class Resumes(lf.Action[str]):
        def __init__(self, prior: str) -> None:
            self.prior = prior

        async def call(self, session: lf.Session) -> str:
            session.node.metadata["resumed_from"] = self.prior  # as Agent.resume records it
            return str(await session.query("second part"))

    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        await Suspends().invoke(session)
        await Resumes(session.all_actions[0].id).invoke(session)
        await Resumes("999").invoke(session)  # a run this export never saw: a trace of its own
    first = spans.one("Suspends")
    resumed, unknown = spans.named("Resumes")
    assert resumed.context.trace_id == first.context.trace_id
    assert parent_of(resumed) == first.context.span_id
    assert attrs(resumed)["langfx.resumed_from"] == session.all_actions[0].id
    query = spans.named("chat echo")[1]
    assert parent_of(query) == resumed.context.span_id
    assert unknown.parent is None and unknown.context.trace_id != first.context.trace_id
    assert resumed.start_time is not None and first.end_time is not None
    assert resumed.start_time >= first.end_time  # its own start time, not when it was created


async def test_logs_are_span_events(spans: Spans) -> None:
    class Noisy(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            session.log("warning", "careful", password="hunter2", n=3)

    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        await Noisy().invoke(session)
        session.log("info", "at the top")
    (event,) = events(spans.one("Noisy"), "langfx.log")
    assert event["langfx.log.level"] == "warning"
    assert "langfx.log.message" not in event  # a log's text is content: opt-in
    assert "langfx.log.data" not in event
    top = spans.one("log info")
    assert events(top, "langfx.log")[0]["langfx.log.level"] == "info"

    spans.exporter.clear()
    async with lf.Session(Echo()) as session:
        lf.otel.export(session, spans.provider, capture_content=True)
        await Noisy().invoke(session)
        session.log("info", "at the top")
    (event,) = events(spans.one("Noisy"), "langfx.log")
    assert event["langfx.log.level"] == "warning"
    assert event["langfx.log.message"] == "careful"
    assert json.loads(event["langfx.log.data"]) == {"password": "<redacted>", "n": 3}
    top = spans.one("log info")
    assert events(top, "langfx.log")[0]["langfx.log.message"] == "at the top"


async def test_content_is_opt_in_bounded_and_redacted(spans: Spans, add: lf.Tool[Any, Any]) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "3 " + "x" * 500])
    secret = "sk-" + "A1b2C3d4" * 4
    async with lf.Session(lm) as session:
        lf.otel.export(session, spans.provider, capture_content=True, max_content_chars=300)
        await lf.Agent(f"add 1 and 2, my key is {secret}", tools=[add]).invoke(session)
        session.log("info", "saw", detail="Bearer abcdefghijklmnopqrstuvwxyz")
    step1, step2 = spans.named("chat scripted")
    inputs = json.loads(attrs(step1)["gen_ai.input.messages"])
    assert inputs == [
        {
            "role": "user",
            "parts": [{"type": "text", "content": "add 1 and 2, my key is <redacted>"}],
        }
    ]
    outputs = json.loads(attrs(step1)["gen_ai.output.messages"])
    assert outputs == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    second = json.loads(attrs(step2)["gen_ai.input.messages"])
    assert [m["role"] for m in second] == ["user", "assistant", "tool"]
    assert second[2]["parts"] == [{"type": "tool_call_response", "id": "c1", "response": "3"}]
    cut = attrs(step2)["gen_ai.output.messages"]
    assert len(cut) <= 300  # bounded, and still JSON: the text inside is cut, and says so
    assert json.loads(cut)[0]["parts"][0]["content"].endswith(lf.otel.CUT_MARK)
    tool = attrs(spans.one("execute_tool add"))
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert json.loads(tool["gen_ai.tool.call.result"]) == 3
    data = events(spans.one("log info"), "langfx.log")[0]["langfx.log.data"]
    assert json.loads(data) == {"detail": "Bearer <redacted>"}
    assert secret not in json.dumps([attrs(s) for s in spans.done])


async def test_long_content_is_cut_inside_its_strings_and_stays_json(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    # about 1,500 tokens of prompt and of tool arguments, at the default 4,000-character limit
    long = "word " * 1200
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2, "note": long}), "done"])

    @lf.tool
    async def add(a: int, b: int, note: str) -> int:
        """Add two integers."""
        return a + b

    async with lf.Session(lm) as session:
        lf.otel.export(session, spans.provider, capture_content=True)
        await lf.Agent(long, instructions=long, tools=[add]).invoke(session)
    exported = [
        (key, value)
        for span in spans.done
        for key, value in attrs(span).items()
        if key.startswith("gen_ai.") and isinstance(value, str) and value[:1] in "[{"
    ]
    assert {k for k, _ in exported} >= {
        "gen_ai.input.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
    }
    for key, value in exported:
        assert len(value) <= 4000, key
        json.loads(value)  # never a broken attribute
    arguments = json.loads(attrs(spans.one("execute_tool add"))["gen_ai.tool.call.arguments"])
    assert arguments["a"] == 1 and arguments["note"].endswith(lf.otel.CUT_MARK)


async def test_system_instructions_and_tool_definitions_are_exported(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    lm = Scripted(["fine"])
    async with lf.Session(lm) as session:
        lf.otel.export(session, spans.provider, capture_content=True)
        await lf.Agent("add 1 and 2", instructions="Be brief.", tools=[add]).invoke(session)
    a = attrs(spans.one("chat scripted"))
    assert json.loads(a["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(a["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "add 1 and 2"}]}
    ]
    assert json.loads(a["gen_ai.tool.definitions"]) == [{"type": "function", "name": "add"}]


async def test_a_denied_call_exports_no_result(spans: Spans, add: lf.Tool[Any, Any]) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "ok then"])
    deny = lf.Agent("x", tools=[add], allow_tool=lambda c, s: lf.Deny("not today", by="bob"))
    async with lf.Session(lm) as session:
        lf.otel.export(session, spans.provider, capture_content=True)
        await deny.invoke(session)
    tool = spans.one("execute_tool add")
    a = attrs(tool)
    assert "gen_ai.tool.call.result" not in a  # the note went to the model, not from the tool
    assert "error.type" not in a and tool.status.status_code is StatusCode.UNSET
    assert events(tool, "langfx.approval")[0]["langfx.approval.message"] == "not today"


async def test_request_options_have_the_registry_s_types(spans: Spans) -> None:
    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        await session.query("hi", temperature=1, top_k=40, top_p=1, max_tokens=5, seed=7)
    a = attrs(spans.one("chat echo"))
    for key in ("temperature", "top_k", "top_p"):
        assert type(a[f"gen_ai.request.{key}"]) is float, key  # double in the registry
    assert a["gen_ai.request.top_k"] == 40.0
    assert type(a["gen_ai.request.max_tokens"]) is int and type(a["gen_ai.request.seed"]) is int


async def test_reasoning_is_part_of_the_captured_output(spans: Spans) -> None:
    from langfx_nb.messages import AIMessage, ReasoningPart

    answer = AIMessage([ReasoningPart("think of 2+2"), "4"])
    async with lf.Session(Scripted([answer])) as session:
        lf.otel.export(session, spans.provider, capture_content=True)
        await session.query("2+2?")
    (message,) = json.loads(attrs(spans.one("chat scripted"))["gen_ai.output.messages"])
    assert message["parts"] == [
        {"type": "reasoning", "content": "think of 2+2"},
        {"type": "text", "content": "4"},
    ]


def test_redact_secrets() -> None:
    r = lf.otel.redact_secrets
    assert r("key sk-proj-abcdefghijklmnop1234 end") == "key <redacted> end"
    assert r("AIza" + "x" * 35) == "<redacted>"
    assert r("Authorization: Bearer abc.def-ghi_jklmnop") == "Authorization: Bearer <redacted>"
    assert r('{"api_key": "s3cr3t-value"}') == '{"api_key": "<redacted>"}'
    assert r("password=hunter22&user=x") == "password=<redacted>&user=x"
    assert (
        r("a bearer of good news; the secret of tea") == "a bearer of good news; the secret of tea"
    )


# -- attaching and detaching -----------------------------------------------------------------
async def test_export_after_a_run_exports_what_the_session_holds(spans: Spans) -> None:
    lm = Scripted(["a", "b"])

    class Two(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            await session.query("one")
            session.log("info", "between")
            await session.query("two")

    async with lf.Session(lm) as session:
        await Two().invoke(session)
        lf.otel.export(session, spans.provider, capture_content=True)
    two = spans.one("Two")
    queries = spans.named("chat scripted")
    assert [parent_of(q) for q in queries] == [two.context.span_id] * 2
    assert events(two, "langfx.log")[0]["langfx.log.message"] == "between"
    node = session.all_actions[0]
    assert two.end_time is not None and two.start_time is not None
    assert node.duration is not None
    assert abs((two.end_time - two.start_time) / 1e9 - node.duration) < 1e-6


async def test_a_saved_trace_exports_at_its_original_time(spans: Spans) -> None:
    clock = FakeClock(0.0)
    lm = Scripted(["a"])

    class Slow(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            clock.advance(2.0)
            await session.query("one")

    async with lf.Session(lm, clock=clock) as session:
        await Slow().invoke(session)
    saved = session.trace_json_str()
    lf.otel.export(lf.Session.load_trace(saved), spans.provider)
    slow = spans.one("Slow")
    query = spans.one("chat scripted")
    assert parent_of(query) == slow.context.span_id
    created = datetime.datetime.fromisoformat(json.loads(saved)["session"]["created_at"])
    assert slow.start_time == int(created.timestamp() * 1e6) * 1000
    assert query.start_time == slow.start_time + 2_000_000_000


async def test_export_mid_run_and_close(spans: Spans) -> None:
    lm = Gated()
    async with lf.Session(lm) as session:
        task = asyncio.ensure_future(session.query("q"))
        await lm.reached.wait()
        export = lf.otel.export(session, spans.provider)  # the running query gets a span
        assert export.open_spans == 1
        export.close()  # ends it now, marked, and stops listening
        assert attrs(spans.one("chat gated"))["langfx.export_closed"] is True
        lm.gate.set()
        await task
        await session.query("after")
    assert len(spans.done) == 1


async def test_top_level_spans_join_the_callers_current_span(spans: Spans) -> None:
    class Act(lf.Action[str]):
        async def call(self, session: lf.Session) -> str:
            return "done"

    tracer = spans.provider.get_tracer("app")
    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        with tracer.start_as_current_span("request") as outer:
            await session.query("q")
            await Act().invoke(session)
        await Act().invoke(session)
    inside, outside = spans.named("Act")
    assert parent_of(spans.one("chat echo")) == outer.get_span_context().span_id
    assert parent_of(inside) == outer.get_span_context().span_id
    assert outside.parent is None


async def test_without_a_tracer_provider_nothing_is_exported(spans: Spans) -> None:
    session = lf.Session(Echo())
    assert not session._state.hub.active  # no observer, no event cost
    export = lf.otel.export(session)  # the global provider: OpenTelemetry's no-op default
    await session.query("q")
    await session.dispose()
    assert export.open_spans == 0
    assert spans.done == []


def test_otel_is_lazy() -> None:
    code = (
        "import sys, langfx_nb as lf; lf.otel; "
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_dispose_ends_every_span(spans: Spans) -> None:
    lm = Gated()
    session = lf.Session(lm, tracer_provider=spans.provider)

    class Waits(lf.Action[str]):
        async def call(self, session: lf.Session) -> str:
            return str(await session.query("q"))

    async def fan(item: int, branch: lf.Session) -> str:
        return await Waits().invoke(branch)

    task = asyncio.ensure_future(session.concurrent_map([1], fan))
    await lm.reached.wait()
    await settle()
    await session.dispose()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(attrs(s)["langfx.status"] for s in spans.done) == ["cancelled", "cancelled"]


# -- the export thread -------------------------------------------------------------------------
class ThreadOfStart(SpanProcessor):
    """A span processor that notes the thread each span is started on."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.threads.add(threading.current_thread().name)


async def test_spans_are_built_in_the_hook_and_disposing_ends_them(
    spans: Spans, add: lf.Tool[Any, Any]
) -> None:
    seen = ThreadOfStart()
    spans.provider.add_span_processor(seen)
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), "3"])
    async with lf.Session(tracer_provider=spans.provider) as session:
        await lf.Agent("go", tools=[add]).invoke(session, lm=lm)
    # No flush: every span had ended when the session did (read the exporter directly).
    names = sorted(s.name for s in spans.exporter.get_finished_spans())
    assert names == ["chat scripted", "chat scripted", "execute_tool add", "invoke_agent Agent"]
    # built on the run's thread; the SDK's batch processor exports off it
    assert seen.threads == {threading.current_thread().name}


async def test_an_exporter_failure_is_logged_and_the_run_goes_on(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(ThreadOfStart):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            raise RuntimeError("collector misconfigured")

    spans.provider.add_span_processor(Broken())
    async with lf.Session(Echo(), tracer_provider=spans.provider) as session:
        assert str(await session.query("still answered")) == "still answered"
        assert lf.otel.flush()
    assert "was not exported" in caplog.text
    assert "collector misconfigured" in caplog.text


# -- response id and server ----------------------------------------------------------------------
async def test_a_model_behind_http_gives_the_response_id_and_the_server(spans: Spans) -> None:
    body = fixture("llama_cpp_python_json_object.json")  # recorded from a real server
    allow_model_requests(True)  # a real server on 127.0.0.1 (blocked again below)
    async with local_server(Reply.json(body)) as server:
        lm = OpenAI("tiny", base_url=f"http://user:secret-pass@127.0.0.1:{server.port}/v1")
        try:
            async with lf.Session(lm, tracer_provider=spans.provider) as session:
                await session.query("hello")
        finally:
            await lm.aclose()
            allow_model_requests(False)
    node = session.all_queries[0]
    assert node.metadata["server"] == f"127.0.0.1:{server.port}"  # never the credentials
    a = attrs(spans.one("chat tiny"))
    assert a["gen_ai.response.id"] == json.loads(body)["id"]
    assert a["gen_ai.request.model"] == "tiny"
    assert a["gen_ai.response.model"] == json.loads(body)["model"] == "smollm2"  # who answered
    assert a["server.address"] == "127.0.0.1"
    assert a["server.port"] == server.port
    assert "secret-pass" not in json.dumps(a)


# -- a run resumed in another process -------------------------------------------------------------
RESUME_ELSEWHERE = """
import asyncio, json, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import langfx_nb as lf
from langfx_nb.llms import Scripted

@lf.tool
async def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b

async def main() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    answer = await lf.Agent.resume(
        open(sys.argv[1]).read(), {"c2": True}, tools=[add], lm=Scripted(["done"]),
        tracer_provider=provider,
    )
    spans = [
        {
            "name": s.name,
            "trace_id": s.context.trace_id,
            "span_id": s.context.span_id,
            "parent": s.parent.span_id if s.parent else None,
        }
        for s in memory.get_finished_spans()
    ]
    print(json.dumps({"answer": answer, "spans": spans}))

asyncio.run(main())
"""


async def test_a_run_resumed_in_another_process_continues_the_trace(
    spans: Spans, add: lf.Tool[Any, Any], tmp_path: Any
) -> None:
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 2}), TC("c2", "add", {"a": 3, "b": 4})])

    def first_only(call: lf.ToolCall, session: lf.Session) -> bool | None:
        return True if call.id == "c1" else None  # c2 waits for a person

    async with lf.Session(tracer_provider=spans.provider) as session:
        state = await lf.Agent("go", tools=[add], allow_tool=first_only).invoke(
            session, lm=lm, on_approval="suspend"
        )
    assert isinstance(state, lf.RunState)
    suspended = spans.one("invoke_agent Agent")
    tp = state.traceparent
    assert tp is not None
    assert tp.startswith(f"00-{suspended.context.trace_id:032x}-{suspended.context.span_id:016x}-")
    saved = tmp_path / "state.json"
    saved.write_text(state.to_json_str())

    out = subprocess.run(
        [sys.executable, "-c", RESUME_ELSEWHERE, str(saved)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["answer"] == "done"
    there = {s["name"]: s for s in result["spans"]}
    # Only the resumed work is exported there (the suspended part was exported here) ...
    assert sorted(s["name"] for s in result["spans"]) == [
        "chat scripted",
        "execute_tool add",
        "invoke_agent Agent",
    ]
    # ... and it continues the suspended run's trace, as a child of its agent span.
    resumed = there["invoke_agent Agent"]
    assert resumed["trace_id"] == suspended.context.trace_id
    assert resumed["parent"] == suspended.context.span_id
    assert there["execute_tool add"]["parent"] == resumed["span_id"]


async def test_capture_off_exports_no_model_tool_or_log_text(spans: Spans) -> None:
    """With capture off, no span attribute, event attribute, status or span name holds any
    of the run's text: prompts, responses, tool arguments, results and exception messages,
    log messages and data (the error class and the log level stay)."""
    sentinels = {
        "prompt": "PROMPTSENTINEL",
        "response": "RESPONSESENTINEL",
        "args": "ARGSENTINEL",
        "tool error": "TOOLERRORSENTINEL",
        "log": "LOGSENTINEL",
        "log data": "LOGDATASENTINEL",
        "query error": "QUERYERRORSENTINEL",
    }

    @lf.tool
    async def explode(word: str) -> int:
        """Fails with the word in its message."""
        raise RuntimeError(f"{sentinels['tool error']} {word}")

    class Chatty(lf.Action[None]):
        async def call(self, session: lf.Session) -> None:
            session.log("warning", f"{sentinels['log']} inside", detail=sentinels["log data"])
            await session.query(f"say {sentinels['prompt']}")
            with pytest.raises(LMError):
                await session.query("again")
            with pytest.raises(ToolExecutionError):
                await lf.Agent("use it", tools=[explode]).invoke(session)

    lm = Scripted(
        [
            f"here: {sentinels['response']}",
            LMError(f"server said {sentinels['query error']}"),
            TC("c1", "explode", {"word": sentinels["args"]}),
        ]
    )
    async with lf.Session(lm, tracer_provider=spans.provider) as session:
        await Chatty().invoke(session)
        session.log("info", f"{sentinels['log']} at the top")
    exported = []
    for span in spans.done:
        exported.append(span.name)
        exported.append(span.status.description or "")
        exported.extend(str(v) for v in (span.attributes or {}).values())
        for event in span.events:
            exported.append(event.name)
            exported.extend(str(v) for v in (event.attributes or {}).values())
    text = "\n".join(exported)
    for what, sentinel in sentinels.items():
        assert sentinel not in text, f"the {what} text was exported"
    # what stays: the outcome and the error's class, the log's level
    tool = spans.one("execute_tool explode")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "ToolExecutionError"
    assert events(tool, "exception") == [{"exception.type": "ToolExecutionError"}]
    assert events(spans.one("Chatty"), "langfx.log")[0]["langfx.log.level"] == "warning"
