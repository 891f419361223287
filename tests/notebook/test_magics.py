"""``%%lf`` / ``%lf``: the input transformer on source text, and the magics in a real shell."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.notebook import kernel_state as nb_state
from langfx_nb.notebook import options
from langfx_nb.notebook.cells import transform_lf_cell
from langfx_nb.notebook.markdown import MarkdownText
from langfx_nb.notebook.options import resolve_type

from ._ipython import lf_shell, run


def _lines(cell: str) -> list[str]:
    return cell.splitlines(keepends=True)


def _call_args(source: str) -> list[Any]:
    """The literal arguments of the awaited call the transformer produced."""
    tree = ast.parse(source)
    (stmt,) = tree.body
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Await)
    call = stmt.value.value
    assert isinstance(call, ast.Call)
    assert isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic_async"
    return [ast.literal_eval(a) for a in call.args[:2]]


# -- the transformer on source text ------------------------------------------------------------


def test_other_cells_pass_through() -> None:
    for cell in ["x = 1\n", "%lf help\n", "%%lfx query\nhi\n", "# %%lf query\n", "%%time\nx\n"]:
        assert transform_lf_cell(_lines(cell)) == _lines(cell)


def test_lf_cell_becomes_one_awaited_call() -> None:
    out = transform_lf_cell(_lines("%%lf query --schema int\nWhat is {{x}} + {a: 1}?\n"))
    assert len(out) == 1
    assert _call_args(out[0]) == ["query --schema int", "What is {{x}} + {a: 1}?\n"]
    assert out[0].rstrip().endswith("globals())")


@given(
    line=st.text(
        alphabet=st.characters(blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
    ),
    body=st.text(),
)
def test_any_line_and_body_survive_the_rewrite(line: str, body: str) -> None:
    cell = "%%lf " + line + "\n" + body
    (out,) = transform_lf_cell(cell.splitlines(keepends=True))
    got_line, got_body = _call_args(out)
    assert got_line == line.strip()
    assert got_body == "".join(cell.splitlines(keepends=True)[1:])


def test_shell_transform_keeps_ipython_syntax_in_the_body() -> None:
    ip = lf_shell()
    src = ip.transform_cell("%%lf query\n!ls {{x}}\n%who\nWhat?\n")
    assert _call_args(src)[1] == "!ls {{x}}\n%who\nWhat?\n"


# -- a real InteractiveShell -------------------------------------------------------------------


@pytest.fixture
def ip() -> Iterator[InteractiveShell]:
    shell = lf_shell()
    shell.user_ns.update({"lf": lf})
    saved = nb_state.state.lm, nb_state.state.lm_name
    yield shell
    nb_state.state.lm, nb_state.state.lm_name = saved
    for name in ("lm", "x", "ans", "Answer", "Item", "msg", "City", "add"):
        shell.user_ns.pop(name, None)


def test_query_cell_value_is_the_answer_rendered_from_the_namespace(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=lf.llms.Echo(), x=41)
    value = run(ip, '%%lf query --lm lm -o ans\nWhat is {{x}} + 1? {"a": {b}}\n')
    assert value == 'What is 41 + 1? {"a": {b}}\n'
    assert isinstance(value, MarkdownText)
    assert ip.user_ns["ans"] == value
    assert ip.user_ns["Out"][ip.execution_count - 1] == value  # it is the cell's value


def test_default_model_from_lf_use_and_from_nb_use(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.StaticResponse("from the default")
    run(ip, "%lf use lm")
    assert run(ip, "%%lf query\nhi\n") == "from the default"
    lf.nb.use(lf.llms.StaticResponse("set in Python"))
    assert run(ip, "%%lf query\nhi\n") == "set in Python"


def test_lf_use_is_the_default_of_batches_evaluations_and_queries(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.StaticResponse("4")
    run(ip, "%lf use lm")
    run(
        ip,
        "async def task(x, session):\n"
        "    return await session.query('What is {{x}}?', vars={'x': x})\n"
        "batched = await lf.batch(task, ['2+2', '3+1'], progress=False)\n"
        "report = await lf.eval.run(task, [lf.eval.Case('2+2', expected='4')],\n"
        "                           [lf.eval.exact], progress=False, live=False)\n"
        "plain = await lf.query('hi')\n",
    )
    batched = ip.user_ns["batched"]
    assert batched.statuses == ["ok", "ok"] and batched.results == ["4", "4"]
    report = ip.user_ns["report"]
    assert report[0].status == "ok" and report.metrics["exact"].value == 1.0
    assert ip.user_ns["plain"] == "4"
    assert lf.default_lm() is ip.user_ns["lm"]
    for name in ("task", "batched", "report", "plain"):
        ip.user_ns.pop(name, None)


def test_lf_nb_export_sends_later_runs_as_opentelemetry_spans(ip: InteractiveShell) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    ip.user_ns["lm"] = lf.llms.Echo()
    run(ip, "%%lf query --lm lm\nnot exported\n")
    lf.nb.export(provider, capture_content=True)
    try:
        run(ip, "%%lf query --lm lm\nexported\n")
    finally:
        lf.nb.export(None)
    run(ip, "%%lf query --lm lm\nnot exported either\n")
    assert lf.otel.flush()
    (span,) = memory.get_finished_spans()
    assert span.name == "chat echo"
    assert "exported" in str((span.attributes or {})["gen_ai.input.messages"])
    assert span.attributes["gen_ai.conversation.id"] == nb_state.state.sessions[-2].id
    provider.shutdown()


def test_models_by_registry_id(ip: InteractiveShell) -> None:
    run(ip, "%lf use fake:echo")
    assert run(ip, "%%lf query\nhello {{x}}\n".replace("{{x}}", "there")) == "hello there\n"
    assert run(ip, "%%lf query --lm fake:echo\nagain\n") == "again\n"
    with pytest.raises(UsageError, match="cannot resolve model 'nope:x'"):
        run(ip, "%lf use nope:x")


def test_no_model_is_a_usage_error(ip: InteractiveShell) -> None:
    nb_state.state.lm = None
    with pytest.raises(UsageError, match="no model"):
        run(ip, "%%lf query\nhi\n")


def test_missing_template_variable_is_a_template_error(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.Echo()
    with pytest.raises(lf.TemplateError, match="nowhere"):
        run(ip, "%%lf query --lm lm\nHi {{nowhere}}\n")


def test_options_reach_the_model(ip: InteractiveShell) -> None:
    lm = lf.llms.Scripted(["ok"])
    ip.user_ns["lm"] = lm
    run(ip, '%%lf query --lm lm --system "Be brief." --temperature 0.2 --max-tokens 7\nhi\n')
    (request,) = lm.requests
    assert request.system == "Be brief."
    assert request.options.temperature == 0.2
    assert request.options.max_tokens == 7


def test_returns_message(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.StaticResponse("hello")
    msg = run(ip, "%%lf query --lm lm --returns-message\nhi\n")
    assert isinstance(msg, lf.AIMessage)
    assert msg.text == "hello"


def test_bad_options_are_short_usage_errors(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.Echo()
    with pytest.raises(UsageError, match="unrecognized arguments: --nope"):
        run(ip, "%%lf query --lm lm --nope\nhi\n")
    with pytest.raises(UsageError, match="invalid choice"):
        run(ip, "%%lf query --lm lm --protocol yaml\nhi\n")
    with pytest.raises(UsageError, match="no variable named 'other'"):
        run(ip, "%%lf query --lm other\nhi\n")
    with pytest.raises(UsageError, match="unknown command 'ask'"):
        run(ip, "%%lf ask\nhi\n")
    with pytest.raises(UsageError, match="empty"):
        run(ip, "%%lf query --lm lm\n\n")


def test_library_errors_raise_and_display_as_one_short_line(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.Scripted([lf.AuthenticationError("bad key (401)", status=401)])
    with pytest.raises(lf.AuthenticationError, match=r"bad key \(401\)") as info:
        run(ip, "%%lf query --lm lm\nhi\n")
    lines = info.value._render_traceback_()  # type: ignore[attr-defined]
    assert "AuthenticationError" in lines[0] and "bad key (401)" in lines[0]
    assert len(lines) == 2 and "%debug" in lines[1]
    assert info.value.__traceback__ is not None  # the full traceback is kept for %debug


def test_autoawait_off_is_explained(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.Echo()
    ip.autoawait = False
    try:
        with pytest.raises(UsageError, match="autoawait on"):
            run(ip, "%%lf query --lm lm\nhi\n")
    finally:
        ip.autoawait = True


def test_cell_magic_called_directly_explains_the_transformer(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="input transformer"):
        ip.run_cell_magic("lf", "query", "hi\n")


def test_line_commands(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    run(ip, "%lf help")
    assert "%%lf query" in capsys.readouterr().out
    ip.user_ns["lm"] = lf.llms.Echo()
    run(ip, "%lf use lm")
    run(ip, "%lf models")
    out = capsys.readouterr().out
    assert "default model: Echo('fake:echo') (lm)" in out
    assert "values never shown" in out
    with pytest.raises(UsageError, match="cell command"):
        run(ip, "%lf query")
    with pytest.raises(UsageError, match="no %%lf run yet"):
        nb_state.state.sessions.clear()
        run(ip, "%lf trace")


def _completions(ip: InteractiveShell, line: str) -> set[str]:
    from IPython.core.completer import provisionalcompleter

    assert ip.Completer is not None
    with provisionalcompleter():
        return {c.text for c in ip.Completer.completions(line, len(line))}


def test_completion_offers_commands_and_options(ip: InteractiveShell) -> None:
    assert {"use", "trace", "models", "help"} <= _completions(ip, "%lf ")
    assert "--schema" in _completions(ip, "%%lf query --sch")


# -- streaming ---------------------------------------------------------------------------------


class City(BaseModel):
    name: str
    landmarks: list[str]


CITY_ANSWER = "```python\nCity(name='Paris', landmarks=['Louvre', 'Eiffel Tower'])\n```"


def test_stream_query_text_and_typed(ip: InteractiveShell) -> None:
    ip.user_ns["lm"] = lf.llms.StaticResponse("streamed **text**", chunk_size=3)
    # the live view shows the answer once; the cell has no second copy in Out
    assert run(ip, "%%lf query --lm lm --stream -o ans\nhi\n") is None
    assert ip.user_ns["ans"] == "streamed **text**"
    ip.user_ns.update(lm=lf.llms.StaticResponse(CITY_ANSWER, chunk_size=5), City=City)
    run(ip, "%%lf query --lm lm --stream --schema City -o ans\nParis\n")
    city = ip.user_ns["ans"]
    assert city == City(name="Paris", landmarks=["Louvre", "Eiffel Tower"])
    run(ip, "%%lf query --lm lm --stream --schema City --returns-message -o ans\nParis\n")
    msg = ip.user_ns["ans"]
    assert isinstance(msg, lf.AIMessage) and msg.result == city


def test_stream_query_is_displayed_once_and_fails_like_the_plain_query(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns.update(lm=lf.llms.StaticResponse("REQUEST", chunk_size=3), City=City)
    with pytest.raises(lf.MappingError) as plain:
        run(ip, "%%lf query --lm lm --schema City\nParis\n")
    with pytest.raises(lf.MappingError) as streamed:
        run(ip, "%%lf query --lm lm --stream --schema City\nParis\n")
    assert type(streamed.value) is type(plain.value)  # not the parser's StreamParseError
    assert str(streamed.value) == str(plain.value)
    assert isinstance(streamed.value.__cause__, lf.StreamParseError)  # kept for debugging
    capsys.readouterr()
    with pytest.raises(lf.TemplateError):
        run(ip, "%%lf query --lm lm --stream\n{{not_defined}}\n")
    assert "[idle]" not in capsys.readouterr().out  # no empty view left behind


def test_a_failed_typed_query_can_be_inspected_with_lf_trace(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=lf.llms.StaticResponse("no python here"), City=City)
    with pytest.raises(lf.MappingError):
        run(ip, "%%lf query --lm lm --schema City\nParis\n")
    (query,) = nb_state.state.last_session.all_queries
    assert query.name == "query:City" and query.status == "failed"
    explorer = run(ip, "%lf trace")
    assert "failed 1" in repr(explorer._fallback_text())


def test_stream_parse_failure_raises_and_is_in_lf_trace(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=lf.llms.StaticResponse("no python here"), City=City)
    with pytest.raises(lf.MappingError):
        run(ip, "%%lf query --lm lm --stream --schema City\nParis\n")
    (query,) = nb_state.state.last_session.all_queries
    assert query.name == "query:City" and query.status == "failed"
    assert query.metadata["stream"] is True and query.outputs["text"] == "no python here"


def test_repair_option_reasks_a_bad_typed_answer(ip: InteractiveShell) -> None:
    lm = lf.llms.Scripted(["no python here", CITY_ANSWER, "no python here", CITY_ANSWER])
    ip.user_ns.update(lm=lm, City=City)
    city = run(ip, "%%lf query --lm lm --schema City --repair 1\nParis\n")
    assert city == City(name="Paris", landmarks=["Louvre", "Eiffel Tower"])
    query = nb_state.state.last_session.all_queries[0]
    assert [n.status for n in query.children] == ["failed", "ok"]
    run(ip, "%%lf query --lm lm --stream --schema City --repair 1 -o ans\nParis\n")
    assert ip.user_ns["ans"] == city


# -- agents ------------------------------------------------------------------------------------


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent_model() -> lf.LanguageModel:
    return lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])


def test_agent_with_allow_list_runs_tools_and_keeps_the_trace(ip: InteractiveShell) -> None:
    from langfx_nb.notebook.trace_explorer import TraceExplorer

    ip.user_ns.update(lm=_agent_model(), add=add, x=2)
    answer = run(
        ip, "%%lf agent --lm lm --tools add --approve allow:add -o ans\nWhat is {{x}} + 3?\n"
    )
    assert answer == "The sum is 5." and isinstance(answer, MarkdownText)
    assert ip.user_ns["ans"] == answer
    session = nb_state.state.last_session
    assert [n.name for n in session.all_tool_calls] == ["add"]
    assert "What is 2 + 3?" in ip.user_ns["lm"].requests[0].messages[0].text
    assert isinstance(run(ip, "%lf trace"), TraceExplorer)


def test_agent_deny_raises_tool_denied(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=_agent_model(), add=add)
    with pytest.raises(lf.ToolDeniedError, match="add"):
        run(ip, "%%lf agent --lm lm --tools add --approve deny\nWhat is 2 + 3?\n")


def test_unattended_env_replaces_ask(ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(options.APPROVE_ENV, "allow:add")
    ip.user_ns.update(lm=_agent_model(), add=add)
    assert run(ip, "%%lf agent --lm lm --tools add\nWhat is 2 + 3?\n") == "The sum is 5."
    # An explicit unattended mode is not overridden.
    ip.user_ns["lm"] = _agent_model()
    with pytest.raises(lf.ToolDeniedError):
        run(ip, "%%lf agent --lm lm --tools add --approve deny\nWhat is 2 + 3?\n")


def test_agent_option_errors(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=_agent_model(), add=add)
    with pytest.raises(UsageError, match="no variable named 'search'"):
        run(ip, "%%lf agent --lm lm --tools add,search\nhi\n")
    with pytest.raises(UsageError, match="lm is not a tool"):
        run(ip, "%%lf agent --lm lm --tools lm\nhi\n")
    with pytest.raises(UsageError, match="expected ask, deny"):
        run(ip, "%%lf agent --lm lm --tools add --approve maybe\nhi\n")
    with pytest.raises(UsageError, match="max_steps"):
        run(ip, "%%lf agent --lm lm --max-steps 0\nhi\n")


# -- typed results -----------------------------------------------------------------------------


class Item(BaseModel):
    name: str


def test_resolve_type_accepts_type_expressions_only() -> None:
    ns = {"Item": Item}
    assert resolve_type("Item", ns) is Item
    assert resolve_type("list[Item]", ns) == list[Item]
    assert resolve_type("Literal['a', 'b']", ns) == Literal["a", "b"]
    assert resolve_type("int | None", ns) == int | None
    for bad in ["__import__('os')", "Item()", "[Item]", "lambda: 1", "Item.__subclasses__()"]:
        with pytest.raises(UsageError):
            resolve_type(bad, ns)
    with pytest.raises(UsageError, match="no type named 'Missing'"):
        resolve_type("Missing", ns)


def test_a_misspelled_schema_suggests_the_close_type() -> None:
    class Movie(BaseModel):
        title: str

    ns = {"Movie": Movie, "movies": [1], "Item": Item}
    with pytest.raises(
        UsageError, match=r"no type named 'Movei' in the notebook \(did you mean Movie\?\)"
    ):
        resolve_type("Movei", ns)
    with pytest.raises(UsageError, match=r"did you mean Movie\?"):
        resolve_type("list[movie]", ns)
    with pytest.raises(UsageError) as info:
        resolve_type("Zzz", ns)
    assert "did you mean" not in str(info.value)


def test_unload_removes_the_transformer_and_load_is_idempotent(ip: InteractiveShell) -> None:
    ip.run_line_magic("load_ext", "langfx_nb")
    assert ip.input_transformers_cleanup.count(transform_lf_cell) == 1
    lf.nb.unload_ipython_extension(ip)
    assert transform_lf_cell not in ip.input_transformers_cleanup
    lf.nb.load_ipython_extension(ip)
    lf.nb.load_ipython_extension(ip)
    assert ip.input_transformers_cleanup.count(transform_lf_cell) == 1


# -- the lf.nb package ---------------------------------------------------------------------------


def test_lf_nb_exports_the_widgets_and_the_magics_helpers() -> None:
    from langfx_nb.notebook import approval, stream_view, trace_explorer

    assert lf.nb.TraceExplorer is trace_explorer.TraceExplorer
    assert lf.nb.ApprovalPolicy is approval.ApprovalPolicy
    assert lf.nb.StreamView is stream_view.StreamView
    for name in lf.nb.__all__:
        assert getattr(lf.nb, name) is not None, name
    assert lf.nb.use is nb_state.use


# -- a real ipykernel: the cell awaits, so the kernel still handles messages ------------------

KERNEL_SETUP = '''
import asyncio
from comm import get_comm_manager
import langfx_nb as lf

clicked = asyncio.Event()
loop = asyncio.get_event_loop()


def target(comm, open_msg):
    @comm.on_msg
    def _(msg):
        loop.call_soon_threadsafe(clicked.set)


get_comm_manager().register_target("lfx-test-click", target)


class WaitsForClick(lf.llms.Fake):
    """Answers only after a frontend message arrives, like a tool call waiting for Approve."""

    def respond(self, request):
        return "clicked!"

    async def _sample(self, request):
        await clicked.wait()
        return self._response(request)


lm = WaitsForClick()
%load_ext langfx_nb
'''


def _reply(kc: Any, msg_id: str, timeout: float) -> dict[str, Any]:
    while True:
        msg = kc.get_shell_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg  # type: ignore[no-any-return]


def _iopub_until_idle(kc: Any, msg_id: str, timeout: float) -> list[dict[str, Any]]:
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out


def test_in_a_real_kernel_a_waiting_lf_cell_still_receives_frontend_messages() -> None:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        setup = kc.execute(KERNEL_SETUP)
        assert _reply(kc, setup, 60)["content"]["status"] == "ok"
        cell = kc.execute("%%lf query --lm lm\nWait for the click.\n")
        # While that cell awaits the model, a widget-like comm message must get through.
        comm_id = "c0ffee"
        open_msg = kc.session.msg(
            "comm_open", {"comm_id": comm_id, "target_name": "lfx-test-click", "data": {}}
        )
        kc.shell_channel.send(open_msg)
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {}}))
        reply = _reply(kc, cell, 30)  # a blocked loop would never see the message: timeout
        assert reply["content"]["status"] == "ok", reply["content"]
        results = [
            m["content"]["data"]
            for m in _iopub_until_idle(kc, cell, 30)
            if m["msg_type"] == "execute_result"
        ]
        assert results and results[0]["text/plain"] == "'clicked!'"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
