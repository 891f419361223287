"""MCP servers as tools, against a real server built with the ``mcp`` SDK (mcp_server.py):
over stdio (a subprocess) and over Streamable HTTP on 127.0.0.1 (a free port)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.errors import ExecutionTimeoutError, ToolDeniedError, ToolExecutionError
from langfx_nb.llms import LMRequest, Scripted
from langfx_nb.messages import ToolResultPart

pytest.importorskip("mcp")

SERVER = str(Path(__file__).with_name("mcp_server.py"))
TC = lf.ToolCall


def results(request: LMRequest) -> list[ToolResultPart]:
    return [p for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]


@contextlib.asynccontextmanager
async def stdio_server(**kw: Any) -> AsyncIterator[Any]:
    async with lf.mcp.stdio(sys.executable, [SERVER, "stdio"], name="test", **kw) as server:
        yield server


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http"], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


async def test_stdio_tools_are_listed_with_the_servers_schemas() -> None:
    async with stdio_server(prefix="t_") as server:
        tools = {t.name: t for t in server.tools}
        assert {"t_add", "t_shout", "t_pixel", "t_fail", "t_crash", "t_hang"} <= set(tools)
        add = tools["t_add"]
        assert isinstance(add, lf.Tool)
        assert add.spec.input_schema["required"] == ["a", "b"]
        assert add.description == "Add two integers."
        assert add.mcp_server == "test"
    with pytest.raises(RuntimeError, match="not open"):
        _ = lf.mcp.stdio(sys.executable, [SERVER]).tools


async def test_agent_runs_mcp_tools_over_stdio_and_maps_results() -> None:
    seen: list[Any] = []

    def allow(call: lf.ToolCall, session: lf.Session) -> bool:
        seen.append(dict(session.node.metadata))
        return True

    lm = Scripted(
        [
            [TC("c1", "add", {"a": 2, "b": 3}), TC("c2", "shout", {"text": "hi"})],
            TC("c3", "pixel", {}),
            "done",
        ]
    )
    async with stdio_server() as server, lf.Session(lm) as session:
        agent = lf.Agent("go", tools=server.tools, allow_tool=allow)
        assert await agent.invoke(session) == "done"
    first = results(lm.requests[1])
    assert [(r.call_id, r.content, r.is_error) for r in first] == [
        ("c1", '{"result":5}', False),
        ("c2", "HI", False),
    ]
    image_turn = lm.requests[2].messages[-1]
    assert '"type":"image"' in image_turn.parts[0].content  # type: ignore[union-attr]
    images = [p for p in image_turn.parts if isinstance(p, lf.Image)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    # The policy (and the trace) learn that the call goes to an MCP server, and which.
    assert seen[0] == {"source": "mcp", "mcp_server": "test", "step": 1}
    calls = session.all_tool_calls
    assert [n.metadata.get("mcp_server") for n in calls] == ["test"] * 3


async def test_arguments_are_validated_against_the_schema_before_anything_runs() -> None:
    lm = Scripted([TC("c1", "add", {"a": "two"}), "never"])
    async with stdio_server() as server:
        agent = lf.Agent("go", tools=server.tools)
        with pytest.raises(ToolExecutionError, match=r"invalid arguments for MCP tool add"):
            await agent.invoke(lm=lm)
        (add,) = [t for t in server.tools if t.name == "add"]
        with pytest.raises(ToolExecutionError) as refused:
            add.validate_args({"a": "two", "b": 1})
    assert len(lm.requests) == 1
    # each problem names its argument, for the approval prompt to show it at the field
    assert refused.value.field_errors == [{"loc": ["a"], "msg": "is not of type 'integer'"}]


async def test_a_tool_error_result_goes_back_to_the_model_and_the_run_goes_on() -> None:
    lm = Scripted([TC("c1", "fail", {"reason": "no"}), "recovered"])
    async with stdio_server() as server, lf.Session(lm) as session:
        assert await lf.Agent("go", tools=server.tools).invoke(session) == "recovered"
    (result,) = results(lm.requests[1])
    assert result.is_error and "fail" in result.content
    (node,) = session.all_tool_calls
    assert node.status == "failed"


async def test_a_server_that_crashes_stops_the_run_with_a_clear_error() -> None:
    lm = Scripted([TC("c1", "crash", {}), "never"])
    async with stdio_server() as server, lf.Session(lm) as session:
        with pytest.raises(ToolExecutionError, match=r"MCP server 'test' failed during 'crash'"):
            await lf.Agent("go", tools=server.tools).invoke(session)
        (node,) = session.all_tool_calls
        assert node.status == "failed"
        # The dead server's other tools fail the same clear way.
        lm2 = Scripted([TC("c2", "add", {"a": 1, "b": 1}), "never"])
        with pytest.raises(ToolExecutionError, match="failed during 'add'"):
            await lf.Agent("go", tools=server.tools).invoke(session, lm=lm2)


async def test_a_hanging_tool_times_out() -> None:
    lm = Scripted([TC("c1", "hang", {}), "never"])
    async with stdio_server(timeout=0.5) as server, lf.Session(lm) as session:
        with pytest.raises(ExecutionTimeoutError, match=r"'hang' on server 'test' did not answer"):
            await lf.Agent("go", tools=server.tools).invoke(session)
        (node,) = session.all_tool_calls
        assert node.status == "timed_out"
        # The server itself is fine: the next call works.
        lm2 = Scripted([TC("c2", "add", {"a": 1, "b": 1}), "ok"])
        assert await lf.Agent("go", tools=server.tools).invoke(session, lm=lm2) == "ok"


async def test_denied_mcp_calls_never_reach_the_server() -> None:
    lm = Scripted([TC("c1", "crash", {}), "never"])
    async with stdio_server() as server:
        agent = lf.Agent("go", tools=server.tools, allow_tool=lambda c, s: False)
        with pytest.raises(ToolDeniedError):
            await agent.invoke(lm=lm)
        # Had `crash` run, this call would fail: the server is still alive.
        ok = Scripted([TC("c2", "add", {"a": 1, "b": 1}), "fine"])
        assert await lf.Agent("go", tools=server.tools).invoke(lm=ok) == "fine"


async def test_the_server_process_ends_with_the_block() -> None:
    async with stdio_server() as server:
        pids = _children()
        assert pids
    await asyncio.sleep(0)
    assert not (_children() & pids)
    lm = Scripted([TC("c1", "add", {"a": 1, "b": 1}), "never"])
    with pytest.raises(ToolExecutionError, match="is closed"):
        await lf.Agent("go", tools=server.tools).invoke(lm=lm)


def _children() -> set[int]:
    """Live child processes of this test process (zombies excluded)."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


async def test_http_tools_work_like_stdio_ones(http_url: str) -> None:
    lm = Scripted([TC("c1", "add", {"a": 40, "b": 2}), "42"])
    async with lf.mcp.http(http_url) as server, lf.Session(lm) as session:
        assert server.name.startswith("127.0.0.1:")
        assert await lf.Agent("go", tools=server.tools).invoke(session) == "42"
    (result,) = results(lm.requests[1])
    assert result.content == '{"result":42}'


async def test_http_error_and_timeout(http_url: str) -> None:
    async with lf.mcp.http(http_url, timeout=0.5) as server:
        lm = Scripted([TC("c1", "fail", {"reason": "x"}), "ok"])
        assert await lf.Agent("go", tools=server.tools).invoke(lm=lm) == "ok"
        assert results(lm.requests[1])[0].is_error
        lm = Scripted([TC("c2", "hang", {}), "never"])
        with pytest.raises(ExecutionTimeoutError):
            await lf.Agent("go", tools=server.tools).invoke(lm=lm)


async def test_an_unreachable_server_fails_to_open_with_a_clear_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolExecutionError, match="could not open MCP server"):
        async with lf.mcp.http(f"http://127.0.0.1:{port}/mcp", open_timeout=2):
            pass
    with pytest.raises(ValueError, match="http"):
        lf.mcp.http("file:///etc/passwd")


async def test_a_session_can_own_the_server_opened_in_another_task() -> None:
    server = lf.mcp.stdio(sys.executable, [SERVER, "stdio"], name="owned")
    session = lf.Session(Scripted([TC("c1", "add", {"a": 1, "b": 1}), "2"]))
    # Opened in one task (a notebook cell), used and closed from others.
    before = _children()
    await asyncio.ensure_future(server.open(session))
    pids = _children() - before
    assert pids
    assert await lf.Agent("go", tools=server.tools).invoke(session) == "2"
    await asyncio.ensure_future(session.dispose())  # the session closes what it owns
    assert not (_children() & pids)


async def test_a_call_timed_out_on_a_huge_answer_leaves_the_server_usable() -> None:
    # The SDK reads a stdio answer as one line: a 50 MB answer keeps its reader busy long
    # after the call timed out, and every later answer waits behind it.
    async with stdio_server(timeout=3) as server, lf.Session() as session:
        lm = Scripted([TC("c1", "big", {"megabytes": 50}), "never"])
        with pytest.raises(ExecutionTimeoutError, match="'big' on server 'test' did not answer"):
            await lf.Agent("go", tools=server.tools).invoke(session, lm=lm)
        for n in range(2):
            lm = Scripted([TC(f"c{n}", "add", {"a": n, "b": 1}), "ok"])
            assert await lf.Agent("go", tools=server.tools).invoke(session, lm=lm) == "ok"
            assert results(lm.requests[1])[0].content == f'{{"result":{n + 1}}}'


async def test_an_answer_over_max_result_bytes_is_a_clear_error_over_stdio() -> None:
    async with stdio_server(max_result_bytes=1024 * 1024) as server:
        lm = Scripted([TC("c1", "big", {"megabytes": 2}), "never"])
        with pytest.raises(ToolExecutionError, match=r"'big' .*more than 1048576 bytes"):
            await lf.Agent("go", tools=server.tools).invoke(lm=lm)
        ok = Scripted([TC("c2", "big", {"megabytes": 0}), TC("c3", "add", {"a": 1, "b": 1}), "ok"])
        assert await lf.Agent("go", tools=server.tools).invoke(lm=ok) == "ok"


async def test_an_answer_over_max_result_bytes_is_a_clear_error_over_http(http_url: str) -> None:
    async with lf.mcp.http(http_url, max_result_bytes=1024 * 1024) as server:
        lm = Scripted([TC("c1", "big", {"megabytes": 2}), "never"])
        with pytest.raises(ToolExecutionError, match=r"'big' .*more than 1048576 bytes"):
            await lf.Agent("go", tools=server.tools).invoke(lm=lm)
        ok = Scripted([TC("c3", "add", {"a": 1, "b": 1}), "ok"])
        assert await lf.Agent("go", tools=server.tools).invoke(lm=ok) == "ok"


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "$ref": "#"}, "refers to itself"),
        (
            {"type": "object", "allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"$ref": "#"}}},
            "refers to itself",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "points nowhere"),
        (
            {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}},
            "not a local",
        ),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "invalid"),
        ({"type": "object", "properties": {"a": {"minLength": "x"}}}, "invalid"),
        ({"type": "object", "properties": {"a": {"pattern": "(unclosed"}}}, "invalid"),
    ],
)
async def test_a_tool_with_a_hostile_schema_is_left_out_with_a_warning(
    schema: dict[str, Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"LF_TEST_SCHEMAS": json.dumps({"add": schema})}
    with caplog.at_level("WARNING", logger="langfx_nb.mcp"):
        async with stdio_server(env=env) as server:
            names = {t.name for t in server.tools}
            assert "add" not in names and "shout" in names  # the other tools still serve
            ok = Scripted([TC("c1", "shout", {"text": "hi"}), "ok"])
            assert await lf.Agent("go", tools=server.tools).invoke(lm=ok) == "ok"
    (record,) = [r for r in caplog.records if r.name == "langfx_nb.mcp"]
    assert re.match(
        rf"MCP server 'test' lists tool 'add' that cannot be used: .*{reason}.*left out",
        record.getMessage(),
    )


@pytest.mark.parametrize("pattern", [r"^\p{L}+$", "^[^]+$", r"^\cJ?[a-z]+$"])
async def test_ecma_patterns_that_python_re_cannot_read_open_and_validate(pattern: str) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string", "pattern": pattern}}}
    async with stdio_server(env={"LF_TEST_SCHEMAS": json.dumps({"shout": schema})}) as server:
        (shout,) = [t for t in server.tools if t.name == "shout"]
        assert shout.validate_args({"text": "abc"}) == {"text": "abc"}
        with pytest.raises(ToolExecutionError, match="does not match"):
            shout.validate_args({"text": ""})


def test_patterns_are_ecma_262_a_trailing_newline_and_unicode_digits_do_not_pass() -> None:
    from langfx_nb.agentic.mcp_schema import ArgsValidator

    schema = {
        "type": "object",
        "properties": {
            "branch": {"type": "string", "pattern": "^[a-z0-9_-]+$"},
            "n": {"type": "string", "pattern": r"^\d+$"},
            "word": {"type": "string", "pattern": r"^\w+$"},
        },
        "patternProperties": {"^[a-z]+$": {}},
        "additionalProperties": False,
    }
    validator = ArgsValidator(schema)
    assert validator.errors({"branch": "main", "n": "42", "word": "caf", "ab": 1}) == []
    for bad in ({"branch": "main\n"}, {"n": "٤٢"}, {"word": "café"}, {"ab\n": 1}):
        assert validator.errors(bad), bad


def test_the_draft_7_dependencies_keyword_is_honoured() -> None:
    from langfx_nb.agentic.mcp_schema import ArgsValidator

    schema = {
        "type": "object",
        "dependencies": {"card": ["billing"], "mode": {"required": ["level"]}},
    }
    validator = ArgsValidator(schema)
    assert validator.errors({"card": 1, "billing": 2, "mode": "x", "level": 1}) == []
    assert validator.errors({"card": 1})
    assert validator.errors({"mode": "x"})


async def test_a_server_that_pages_its_tools_for_ever_fails_to_open_clearly() -> None:
    env = {"LF_TEST_ENDLESS_PAGES": "1"}
    with pytest.raises(ToolExecutionError, match=r"MCP server 'test'.*more than 100 pages"):
        async with stdio_server(env=env):
            pass


async def test_a_timed_out_call_keeps_a_live_server_and_its_state() -> None:
    # the server answers the liveness check after the timeout, so it is not restarted:
    # its counter goes on (a restarted process would count from 1 again)
    async with stdio_server(timeout=0.5) as server, lf.Session() as session:
        lm = Scripted([TC("c1", "count", {}), TC("c2", "hang", {}), "never"])
        with pytest.raises(ExecutionTimeoutError):
            await lf.Agent("go", tools=server.tools).invoke(session, lm=lm)
        lm = Scripted([TC("c3", "count", {}), "ok"])
        assert await lf.Agent("go", tools=server.tools).invoke(session, lm=lm) == "ok"
        assert results(lm.requests[1])[0].content == '{"result":2}'


async def test_a_recursive_schema_that_descends_is_fine() -> None:
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}, "n": {"type": "integer"}}}
    async with stdio_server(env={"LF_TEST_SCHEMAS": json.dumps({"pixel": schema})}) as server:
        (pixel,) = [t for t in server.tools if t.name == "pixel"]
        assert pixel.validate_args({"child": {"child": {"n": 1}}}) == {"child": {"child": {"n": 1}}}
        with pytest.raises(ToolExecutionError, match=r"child\.child\.n"):
            pixel.validate_args({"child": {"child": {"n": "x"}}})


async def test_a_catastrophic_pattern_never_stalls_the_event_loop() -> None:
    schemas = {
        "shout": {
            "type": "object",
            "properties": {"text": {"type": "string", "pattern": "^(a+)+$"}},
        }
    }
    lag = 0.0

    async def ticker() -> None:
        nonlocal lag
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.01)
            lag = max(lag, loop.time() - before)

    async with stdio_server(env={"LF_TEST_SCHEMAS": json.dumps(schemas)}) as server:
        lm = Scripted([TC("c1", "shout", {"text": "a" * 24 + "!"}), "never"])
        tick = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.05)
        try:
            with pytest.raises(ToolExecutionError, match="MCP tool shout"):
                await lf.Agent("go", tools=server.tools).invoke(lm=lm)
        finally:
            await asyncio.sleep(0.05)  # the ticker sees a stall only once it runs again
            tick.cancel()
    # a behaviour bound, not a benchmark: plain `re` stalls the loop for seconds here
    assert lag < 1.0


def test_a_non_object_schema_is_refused() -> None:
    # the SDK's models refuse it on both ends today; a server built otherwise may send it
    from langfx_nb.agentic.mcp_schema import check_schema

    for schema in ({"type": "string"}, ["a"], None):
        with pytest.raises(ValueError, match="not an object schema"):
            check_schema(schema)


def test_patterns_run_under_one_time_budget() -> None:
    from langfx_nb.agentic.mcp_schema import ArgsValidator, SlowPatternError

    schema = {"type": "object", "patternProperties": {"^(a|a)*$": {"type": "integer"}}}
    with pytest.raises(SlowPatternError):
        ArgsValidator(schema).errors({"a" * 40 + "!": 1})
    pattern = {"type": "object", "properties": {"t": {"pattern": "^(a|a)*$"}}}
    with pytest.raises(SlowPatternError):
        ArgsValidator(pattern).errors({"t": "a" * 40 + "!"})
    assert ArgsValidator(pattern).errors({"t": "aaa"}) == []
