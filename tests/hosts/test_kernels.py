"""The host matrix: a real kernel from another host's environment loads the extension, runs
``%%lf query``, and takes a tool approval end to end in the mode its probe picks.

Each host is a venv made by scripts/host_env (scripts/test makes them before the suite; a
first run here makes them too, which needs the package index): ipykernel 6.29.5 (conda,
Kaggle, most hosted notebooks), ipykernel 7.1.0 (7.0-7.3 also queue clicks behind a running
cell) and Google Colab's pinned kernel packages. The click is the
message a page's Approve button sends, on the shell channel, between cells.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ._kernel import (
    ROOT,
    execute,
    host_python,
    kernel,
    kernel_specs,
    send_to_widget,
    stdout,
    widget_ids,
)

pytestmark = pytest.mark.hosts

HOSTS = ["ipk629", "ipk71", "colab"]

SETUP = '''
import time, json
%load_ext langfx_nb
import langfx_nb as lf
from langfx_nb.notebook import hosts
_t = time.perf_counter(); hosts.probe(get_ipython()); probe_ms = (time.perf_counter() - _t) * 1e3
started = []

@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    started.append(time.time())
    return a + b

lm = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])
lf.nb.use("fake:echo")
topic = "autumn"
'''

AGENT = "%%lf agent --lm lm --tools add -o ans\nWhat is 2 + 3?\n"

WAIT_FOR_PROMPT = """
import asyncio
run = _
for _i in range(400):
    if run.widgets[0].waiting_for():
        break
    await asyncio.sleep(0.01)
print(json.dumps(run.widgets[0].state["pending"]))
"""


@pytest.mark.parametrize("host", HOSTS)
def test_a_host_kernel_loads_and_approves_in_the_background(host: str, tmp_path: Path) -> None:
    python = host_python(host)
    with kernel(python, tmp_path) as kc:
        reply, out, _ = execute(kc, SETUP, timeout=120)
        assert reply["status"] == "ok", reply  # ImportError on these kernels before
        reply, out, _ = execute(kc, "%lf doctor")
        doctor = stdout(out)
        assert "widget messages handled while a cell awaits: no" in doctor, doctor
        assert "approvals: background" in doctor

        reply, out, _ = execute(kc, "%%lf query\nWrite a haiku about {{topic}}.\n")
        assert reply["status"] == "ok", reply
        result = [m for m in out if m["msg_type"] == "execute_result"]
        assert "Write a haiku about autumn." in result[0]["content"]["data"]["text/plain"]

        reply, out, returned_s = execute(kc, AGENT)
        assert reply["status"] == "ok", reply
        assert "runs in the background" in stdout(out)
        approval, _explorer = widget_ids(out)

        reply, out, _ = execute(kc, WAIT_FOR_PROMPT)
        pending = json.loads(stdout(out))
        assert pending["tool"] == "add"
        clicked = time.time()
        send_to_widget(kc, approval, {"kind": "rendered", "prompt_id": pending["prompt_id"]})
        send_to_widget(
            kc,
            approval,
            {
                "kind": "decision",
                "prompt_id": pending["prompt_id"],
                "call_id": pending["call_id"],
                "action": "approve",
            },
        )
        reply, out, _ = execute(kc, "print(await run); print(ans); print(started[0])")
        assert reply["status"] == "ok", reply
        answer, stored, tool_start = stdout(out).splitlines()
        assert answer == stored == "The sum is 5."
        # once the views are imported, as in every later agent cell
        execute(kc, "lm = lf.llms.Scripted([lf.ToolCall('c2', 'add', {'a': 1, 'b': 1}), 'ok'])")
        reply, out, again_s = execute(kc, AGENT)
        assert reply["status"] == "ok", reply
        reply, out, _ = execute(kc, "print(_.cancel()); print(probe_ms)")
        cancelled, probe_ms = stdout(out).splitlines()
        assert cancelled == "True"
        print(
            f"{host}: probe {float(probe_ms):.2f} ms; background cell returned in "
            f"{returned_s * 1e3:.0f} ms (first), {again_s * 1e3:.0f} ms (next); click -> tool "
            f"start {(float(tool_start) - clicked) * 1e3:.0f} ms"
        )


@pytest.mark.parametrize("host", HOSTS)
def test_the_tour_notebooks_run_in_a_host_kernel(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tour runs top to bottom, headless as under nbval (``LANGFX_NB_APPROVE``)."""
    import nbformat
    from nbclient import NotebookClient

    kernel_specs(host_python(host), tmp_path, {"LANGFX_NB_APPROVE": "allow:add,search"})
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))  # finds kernels/host
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        work = tmp_path / path.stem
        work.mkdir()
        for helper in (ROOT / "notebooks").glob("*.py"):
            (work / helper.name).write_text(helper.read_text())
        client = NotebookClient(
            nb, kernel_name="host", timeout=120, resources={"metadata": {"path": str(work)}}
        )
        try:
            client.execute()
        except Exception as exc:
            raise AssertionError(f"{host}: {path.name}: {str(exc)[-2000:]}") from exc


INTERRUPT_SETUP = '''
import os
os.environ["LANGFX_NB_APPROVAL"] = "live"  # a cell that waits for a click this kernel holds
%load_ext langfx_nb
import langfx_nb as lf

@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

lm = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])
'''


@pytest.mark.parametrize("host", HOSTS)
def test_interrupt_ends_a_waiting_cell_with_one_line(host: str, tmp_path: Path) -> None:
    """Kernel › Interrupt on a cell that waits (ipykernel's own handler would end it only at
    the loop's next wake-up, here the 15 s render deadline, with a ToolDeniedError)."""
    with kernel(host_python(host), tmp_path) as kc:
        reply, _, _ = execute(kc, INTERRUPT_SETUP, timeout=120)
        assert reply["status"] == "ok", reply
        msg_id = kc.execute("%%lf agent --lm lm --tools add\nWhat is 2 + 3?\n")
        while True:  # the prompt is shown: the cell now waits
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "display_data":
                break
        time.sleep(0.5)
        kc.parent.interrupt_kernel()
        while True:
            reply = kc.get_shell_msg(timeout=60)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "CancelledError", reply["content"]
        assert "interrupted" in reply["content"]["evalue"]


def test_run_all_of_the_approval_tour_on_a_background_kernel_meets_no_surprise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run All of 03 as a person on such a kernel does it (nobody has clicked yet): the asking
    cell returns at once, the next cell shows the waiting run, and the one error is the tour's
    deliberate denial at the end."""
    import nbformat
    from nbclient import NotebookClient

    kernel_specs(host_python("ipk629"), tmp_path)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    nb = nbformat.read(ROOT / "notebooks" / "03_agents_with_approval.ipynb", as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="host",
        timeout=120,
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o.ename for c in code for o in c.outputs if o.output_type == "error"]
    assert errors == ["ToolDeniedError"], errors
    answer_cell = next(c for c in code if c.source.strip() == "calc_answer")
    shown = "".join(o.get("text", "") for o in answer_cell.outputs)
    assert "runs in the background" in shown, answer_cell.outputs
