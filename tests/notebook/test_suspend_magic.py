"""``%%lf agent --suspend`` then ``%lf resume`` in a real InteractiveShell, including a
"restart" (a fresh namespace and nothing in memory: only the saved JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import langfx_nb as lf
from langfx_nb.notebook.suspended import RUNS_DIR

from ._ipython import lf_shell, run

SENT: list[str] = []


@lf.tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@lf.tool
async def send(to: str) -> str:
    """Send a message (a side effect)."""
    SENT.append(to)
    return "sent"


def model() -> lf.LanguageModel:
    return lf.llms.Scripted(
        [
            lf.ToolCall("c1", "lookup", {"key": "k"}),
            lf.ToolCall("c2", "send", {"to": "bob"}),
            "All done.",
        ]
    )


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LANGFX_NB_APPROVE", raising=False)
    shell = lf_shell()
    SENT.clear()
    yield shell
    for name in ("lm", "lookup", "send", "state", "ans"):
        shell.user_ns.pop(name, None)


def test_suspend_then_resume_after_a_restart(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    lm = model()
    ip.user_ns.update(lm=lm, lookup=lookup, send=send)
    state = run(
        ip,
        "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend "
        "--no-trace -o state\nTell bob.\n",
    )
    assert isinstance(state, lf.RunState) and ip.user_ns["state"] is state
    assert [c.id for c in state.pending] == ["c2"]
    assert SENT == []
    shown = capsys.readouterr().out
    assert "c2: send(to='bob')" in shown and "%lf resume --approve c2" in shown
    (saved,) = RUNS_DIR.glob("*.json")
    # "Restart": nothing in memory but the notebook's definitions and the saved file.
    for name in ("state", "lm"):
        ip.user_ns.pop(name)
    ip.user_ns["lm"] = lf.llms.Scripted(["All done."])
    answer = run(ip, "%lf resume --lm lm --approve c2 -o ans\n")
    assert answer == "All done." and ip.user_ns["ans"] == answer
    assert SENT == ["bob"]
    assert not saved.exists()  # resumed once: gone, so it cannot run twice
    with pytest.raises(UsageError, match="no suspended run saved"):
        run(ip, "%lf resume --approve c2\n")


def test_an_exported_run_resumed_by_the_magic_is_one_trace(ip: InteractiveShell) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    ip.user_ns.update(lm=model(), lookup=lookup, send=send)
    lf.nb.export(provider)
    try:
        run(
            ip,
            "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend "
            "--no-trace\nTell bob.\n",
        )
        ip.user_ns["lm"] = lf.llms.Scripted(["All done."])
        assert run(ip, "%lf resume --lm lm --approve c2\n") == "All done."
    finally:
        lf.nb.export(None)
    assert lf.otel.flush()
    agents = sorted(
        (s for s in memory.get_finished_spans() if s.name == "invoke_agent Agent"),
        key=lambda s: s.start_time or 0,
    )
    assert len(agents) == 2
    suspended, resumed = agents
    assert resumed.context.trace_id == suspended.context.trace_id
    assert resumed.parent is not None and resumed.parent.span_id == suspended.context.span_id
    provider.shutdown()


def test_resume_needs_a_decision_per_waiting_call(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=model(), lookup=lookup, send=send)
    run(ip, "%%lf agent --lm lm --tools lookup,send --suspend --no-trace\nGo.\n")
    with pytest.raises(UsageError, match="decide every waiting call: --approve or --deny c1"):
        run(ip, "%lf resume\n")
    with pytest.raises(UsageError, match="no waiting call zz"):
        run(ip, "%lf resume --approve c1,zz\n")
    ip.user_ns.pop("send")
    with pytest.raises(UsageError, match="the run uses tool 'send'"):
        run(ip, "%lf resume --lm lm --approve c1\n")
    assert len(list(RUNS_DIR.glob("*.json"))) == 1  # nothing consumed by the refusals


def test_a_resumed_run_that_needs_approval_again_is_saved_again(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=model(), lookup=lookup, send=send)
    run(ip, "%%lf agent --lm lm --tools lookup,send --suspend --no-trace\nGo.\n")
    again = run(ip, "%lf resume --lm lm --approve c1\n")
    assert isinstance(again, lf.RunState) and [c.id for c in again.pending] == ["c2"]
    assert run(ip, "%lf resume --lm lm --deny c2 --note 'not bob'\n") == "All done."
    assert SENT == []


def test_resume_option_mistakes_are_one_usage_error(ip: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="%lf resume: unrecognized arguments: --nope") as info:
        run(ip, "%lf resume --approve c1 --nope\n")
    assert "usage: %lf resume" in str(info.value)  # like every other %lf command
    with pytest.raises(UsageError, match="--approve: expected one argument"):
        run(ip, "%lf resume --approve\n")
    with pytest.raises(UsageError, match="unrecognized arguments: --appr"):
        run(ip, "%lf resume --appr c1\n")  # no abbreviations: a typo is not a decision


def test_a_damaged_newest_file_is_a_clear_usage_error(ip: InteractiveShell) -> None:
    ip.user_ns.update(lm=model(), lookup=lookup, send=send)
    run(ip, "%%lf agent --lm lm --tools lookup,send --suspend --no-trace\nGo.\n")
    (path,) = RUNS_DIR.glob("*.json")
    data = json.loads(path.read_text())
    del data["agent"]["tools"]
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"is not a run state: run state: agent\.tools is missing"):
        run(ip, "%lf resume --lm lm --approve c1\n")
    data["agent"]["tools"] = ["lookup", "send"]
    path.write_text(json.dumps({**data, "batch": [{"name": "send"}]}))
    with pytest.raises(UsageError, match=r"batch\[0\]\.args is missing"):
        run(ip, "%lf resume --lm lm --approve c1\n")
    assert path.exists() and SENT == []  # nothing lost, nothing ran


def test_a_call_approved_before_the_suspension_is_approved_again(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    lm = lf.llms.Scripted(
        [[lf.ToolCall("c1", "lookup", {"key": "k"}), lf.ToolCall("c2", "send", {"to": "bob"})]]
    )
    ip.user_ns.update(lm=lm, lookup=lookup, send=send)
    run(
        ip,
        "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend --no-trace\nGo.\n",
    )
    shown = capsys.readouterr().out
    assert "c1: lookup(key='k') (approved: approve it again)" in shown
    assert "%lf resume --approve c2,c1" in shown
    (path,) = RUNS_DIR.glob("*.json")
    # The file says c1 was approved; someone could have written that: it must be said again.
    ip.user_ns["lm"] = lf.llms.Scripted(["All done."])
    with pytest.raises(UsageError, match=r"--approve or --deny c1 \(c1 approved before"):
        run(ip, "%lf resume --lm lm --approve c2\n")
    assert path.exists() and SENT == []
    assert run(ip, "%lf resume --lm lm --approve c2 --allow lookup\n") == "All done."
    assert SENT == ["bob"]


def _in_notebook(ip: InteractiveShell, path: str | None) -> None:
    """Make the shell the kernel of notebook ``path`` (what Jupyter sets: ``__session__``)."""
    if path is None:
        ip.user_ns.pop("__session__", None)
    else:
        ip.user_ns["__session__"] = path


def test_a_notebook_resumes_only_its_own_suspended_runs(
    ip: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two notebooks in one folder, the same call ids: each resumes its own run."""
    try:
        _in_notebook(ip, str(tmp_path / "a.ipynb"))
        ip.user_ns.update(lm=model(), lookup=lookup, send=send)
        run(
            ip,
            "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend "
            "--no-trace\nTell bob.\n",
        )
        _in_notebook(ip, str(tmp_path / "b.ipynb"))
        ip.user_ns["lm"] = lf.llms.Scripted(
            [lf.ToolCall("c1", "lookup", {"key": "k"}), lf.ToolCall("c2", "send", {"to": "eve"})]
        )
        run(
            ip,
            "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend "
            "--no-trace\nTell eve.\n",
        )
        # notebook a, after a restart: its own run (bob), not b's newer one (eve)
        _in_notebook(ip, str(tmp_path / "a.ipynb"))
        ip.user_ns["lm"] = lf.llms.Scripted(["All done."])
        capsys.readouterr()
        assert run(ip, "%lf resume --lm lm --approve c2\n") == "All done."
        assert SENT == ["bob"]
        with pytest.raises(UsageError, match=r"no suspended run saved .* 1 run\(s\) of other"):
            run(ip, "%lf resume --lm lm --approve c2\n")
        # a kernel with no notebook sees neither
        _in_notebook(ip, None)
        with pytest.raises(UsageError, match="no suspended run saved"):
            run(ip, "%lf resume --lm lm --approve c2\n")
        assert SENT == ["bob"]
        _in_notebook(ip, str(tmp_path / "b.ipynb"))
        ip.user_ns["lm"] = lf.llms.Scripted(["Done."])
        assert run(ip, "%lf resume --lm lm --deny c2\n") == "Done."
        assert SENT == ["bob"] and not list(RUNS_DIR.glob("**/*.json"))
    finally:
        _in_notebook(ip, None)


@lf.tool
async def loud_send(to: str) -> str:
    """Send a message, saying so."""
    print(f"TOOL RAN: sent to {to}")
    SENT.append(to)
    return "sent"


def test_resume_says_what_it_resumes_before_a_tool_runs(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns.update(
        lm=lf.llms.Scripted([lf.ToolCall("c1", "loud_send", {"to": "bob"})]),
        loud_send=loud_send,
    )
    state = run(ip, "%%lf agent --lm lm --tools loud_send --suspend --no-trace\nGo.\n")
    ip.user_ns["lm"] = lf.llms.Scripted(["All done."])
    capsys.readouterr()
    run(ip, "%lf resume --lm lm --approve c1\n")
    shown = capsys.readouterr().out
    announced = shown.find(f"Resuming run {state.id} (agent ")
    assert 0 <= announced < shown.index("TOOL RAN: sent to bob"), shown
    assert "c1: loud_send(to='bob'): run" in shown


def test_limits_raised_in_a_saved_file_are_bounded_on_resume(ip: InteractiveShell) -> None:
    loop = [lf.ToolCall(f"s{i}", "lookup", {"key": str(i)}) for i in range(40)]
    ip.user_ns.update(lm=lf.llms.Scripted([lf.ToolCall("c1", "send", {"to": "bob"})]), send=send)
    ip.user_ns["lookup"] = lookup
    run(
        ip,
        "%%lf agent --lm lm --tools lookup,send --approve allow:lookup --suspend "
        "--max-steps 2 --no-trace\nGo.\n",
    )
    (path,) = RUNS_DIR.glob("*.json")
    data = json.loads(path.read_text())
    data["agent"]["limits"]["max_steps"] = 10**6
    path.write_text(json.dumps(data))
    ip.user_ns["lm"] = lf.llms.Scripted(loop)
    with pytest.raises(lf.BudgetExceededError, match="max_steps=8"):
        run(ip, "%lf resume --lm lm --approve c1 --allow lookup\n")
    ip.user_ns["lm"] = lf.llms.Scripted(loop)
    run(ip, "%%lf agent --lm lm --tools lookup,send --suspend --no-trace\nGo.\n")
    (path,) = RUNS_DIR.glob("*.json")
    ip.user_ns["lm"] = lf.llms.Scripted(loop)
    with pytest.raises(lf.BudgetExceededError, match="max_steps=3"):
        run(ip, "%lf resume --lm lm --approve s0 --allow lookup --max-steps 3\n")
