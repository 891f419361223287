"""End to end: an agent run exported over OTLP/HTTP to a real Phoenix server, read back
through Phoenix's own REST API, and photographed in Phoenix's UI.

Phoenix (``arize-phoenix`` from PyPI) lives in its own venv, ``.venv-phoenix``, made by
``scripts/test`` (its dependency tree is large and pinned; the project's venv stays lean).
The fixture starts ``phoenix serve`` on 127.0.0.1 on free ports with its SQLite storage in a
temporary directory, telemetry and external resources off, and stops it afterwards.
Run alone: ``.venv/bin/pytest tests/agentic/test_otel_phoenix.py -m phoenix``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.messages import AIMessage, Usage
from tests.local import CHROMIUM, CHROMIUM_ARGS, free_port

pytestmark = pytest.mark.phoenix

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
ARTIFACTS = ROOT / "artifacts" / "phoenix"
START_TIMEOUT = 240.0  # a cold start on a loaded 2-core box imports a lot (≈60 s seen)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not PHOENIX.exists():
        message = f"{PHOENIX} is missing: scripts/test installs Phoenix in .venv-phoenix"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    workdir = tmp_path_factory.mktemp("phoenix")
    log_path = workdir / "phoenix.log"
    # a port free when picked may be taken before Phoenix binds it (its start takes up to a
    # minute; other processes' outgoing connections draw from the same range): pick again
    for attempt in range(3):
        port = free_port()
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_WORKING_DIR": str(workdir),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        }
        base = f"http://127.0.0.1:{port}"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [str(PHOENIX), "serve"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            if _started(proc, base, log_path, last=attempt == 2):
                yield base
                return
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _started(proc: subprocess.Popen[bytes], base: str, log_path: Path, *, last: bool) -> bool:
    """Whether Phoenix answers at ``base``; False when it could not bind a port picked for
    it (and ``last`` is False: the caller picks again); any other failure fails the test."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            if "address already in use" in tail and not last:
                return False
            pytest.fail(f"phoenix serve exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return True
        if time.monotonic() > deadline:
            pytest.fail(f"Phoenix did not answer within {START_TIMEOUT:.0f} s")
        time.sleep(0.5)


def _spans(base: str, project: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans from Phoenix's REST API, once ingestion has stored them all."""
    deadline = time.monotonic() + 60
    while True:
        response = httpx.get(f"{base}/v1/projects/{project}/spans", params={"limit": 100})
        if response.status_code == 200:
            data = response.json()["data"]
            if len(data) >= expected:
                return list(data)
        if time.monotonic() > deadline:
            pytest.fail(f"Phoenix holds {response.text[:500]} for {project}, not {expected} spans")
        time.sleep(0.5)


def _provider(phoenix: str, project: str) -> TracerProvider:
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "langfx_nb-tests", "openinference.project.name": project}
        )
    )
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces"))
    )
    return provider


@pytest.mark.timeout(600)
async def test_an_agent_run_arrives_in_phoenix_as_genai_spans(phoenix: str) -> None:
    project = f"langfx-{uuid.uuid4().hex[:8]}"
    provider = _provider(phoenix, project)

    @lf.tool
    async def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"rainy, 14 °C in {city}"

    lm = Scripted(
        [
            AIMessage(
                [lf.ToolCall("call_1", "get_weather", {"city": "Paris"})], usage=Usage(42, 9, 51)
            ),
            AIMessage("Take an umbrella: it is rainy in Paris.", usage=Usage(73, 11, 84)),
        ]
    )
    agent = lf.Agent(
        "Do I need an umbrella in Paris?",
        tools=[get_weather],
        allow_tool=lambda call, view: lf.Approve(by="alice"),
        name="WeatherAgent",
    )
    try:
        async with lf.Session(lm) as session:
            lf.otel.export(session, provider, capture_content=True)
            assert await agent.invoke(session) == "Take an umbrella: it is rainy in Paris."
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()

    spans = _spans(phoenix, project, 4)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert sorted(by_name) == [
        "chat scripted",
        "execute_tool get_weather",
        "invoke_agent WeatherAgent",
    ]
    (run,) = by_name["invoke_agent WeatherAgent"]
    (tool,) = by_name["execute_tool get_weather"]
    steps = sorted(by_name["chat scripted"], key=lambda s: s["start_time"])
    assert len(steps) == 2
    # the tree: one trace, the agent at its root, steps and the tool call below it
    assert run["parent_id"] is None
    trace_id = run["context"]["trace_id"]
    for child in [*steps, tool]:
        assert child["parent_id"] == run["context"]["span_id"]
        assert child["context"]["trace_id"] == trace_id
    # Phoenix read the GenAI conventions: its own span kinds and session follow from them
    assert (run["span_kind"], tool["span_kind"]) == ("AGENT", "TOOL")
    assert [s["span_kind"] for s in steps] == ["LLM", "LLM"]
    assert {s["attributes"]["session.id"] for s in spans} == {session.id}
    a = run["attributes"]
    assert (a["gen_ai.operation.name"], a["gen_ai.agent.name"]) == ("invoke_agent", "WeatherAgent")
    for step, (prompt, completion) in zip(steps, [(42, 9), (73, 11)], strict=True):
        s = step["attributes"]
        assert s["gen_ai.operation.name"] == "chat"
        assert (s["gen_ai.provider.name"], s["gen_ai.request.model"]) == ("fake", "scripted")
        assert "gen_ai.response.model" not in s  # a fake names no model that answered
        assert (s["gen_ai.usage.input_tokens"], s["gen_ai.usage.output_tokens"]) == (
            prompt,
            completion,
        )
        # ... and Phoenix's token counts, derived from them
        assert (s["llm.token_count.prompt"], s["llm.token_count.completion"]) == (
            prompt,
            completion,
        )
        # our gen_ai.input/output.messages passed Phoenix's schema and became its messages
        assert s["llm.input_messages.0.message.role"] == "user"
        assert s["llm.input_messages.0.message.content"] == "Do I need an umbrella in Paris?"
        assert s["llm.output_messages.0.message.role"] == "assistant"
    first = steps[0]["attributes"]
    assert first["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == (
        "get_weather"
    )
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert steps[1]["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    t = tool["attributes"]
    assert (t["gen_ai.tool.name"], t["gen_ai.tool.call.id"]) == ("get_weather", "call_1")
    (approval,) = [e for e in tool["events"] if e["name"] == "langfx.approval"]
    assert approval["attributes"]["langfx.approval.by"] == "alice"
    assert approval["attributes"]["langfx.approval.outcome"] == "approve"

    await _screenshot(phoenix, project, trace_id)


@pytest.mark.timeout(600)
async def test_a_run_resumed_later_is_one_trace_in_phoenix(phoenix: str) -> None:
    """Suspended for an approval in one session and provider, resumed from its saved JSON
    with a new provider and no session (as another kernel would): one trace in Phoenix."""
    project = f"langfx-{uuid.uuid4().hex[:8]}"

    @lf.tool
    async def book(room: str) -> str:
        """Book a meeting room."""
        return f"booked {room}"

    lm = Scripted([lf.ToolCall("call_1", "book", {"room": "Ada"}), "Booked Ada."])
    agent = lf.Agent("Book Ada", tools=[book], name="Booker")
    first = _provider(phoenix, project)
    try:
        async with lf.Session(lm, tracer_provider=first) as session:
            state = await agent.invoke(session, on_approval="suspend")
        assert isinstance(state, lf.RunState)
        saved = state.to_json_str()
    finally:
        first.shutdown()
    later = _provider(phoenix, project)
    try:
        answer = await lf.Agent.resume(
            saved, {"call_1": lf.Approve(by="bob")}, tools=[book], lm=lm, tracer_provider=later
        )
        assert answer == "Booked Ada."
    finally:
        later.shutdown()

    spans = _spans(phoenix, project, 5)
    runs = sorted(
        (s for s in spans if s["name"] == "invoke_agent Booker"), key=lambda s: s["start_time"]
    )
    assert len(runs) == 2
    suspended, resumed = runs
    assert suspended["attributes"]["langfx.status"] == "suspended"
    assert {s["context"]["trace_id"] for s in spans} == {suspended["context"]["trace_id"]}
    assert resumed["parent_id"] == suspended["context"]["span_id"]
    tools = [s for s in spans if s["name"] == "execute_tool book"]
    ran = [t for t in tools if t["parent_id"] == resumed["context"]["span_id"]]
    assert len(ran) == 1
    (approval,) = [e for e in ran[0]["events"] if e["name"] == "langfx.approval"]
    assert approval["attributes"]["langfx.approval.by"] == "bob"


async def _screenshot(base: str, project: str, trace_id: str) -> None:
    """The run in Phoenix's UI, the tool span open on its events (the approval)."""
    from playwright.async_api import async_playwright

    projects = httpx.get(f"{base}/v1/projects").json()["data"]
    project_id = next(p["id"] for p in projects if p["name"] == project)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 860})
            await page.goto(f"{base}/projects/{project_id}/traces/{trace_id}", timeout=120_000)
            await page.get_by_text("execute_tool get_weather").first.click(timeout=120_000)
            await page.get_by_role("tab", name="Events").click(timeout=30_000)
            await page.get_by_text("langfx.approval").first.click(timeout=30_000)
            await page.get_by_text("alice").first.wait_for(timeout=30_000)  # who approved
            await page.wait_for_timeout(500)
            await page.screenshot(path=str(ARTIFACTS / "agent_trace.png"))
        finally:
            await browser.close()
