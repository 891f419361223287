"""Background approvals on other hosts' kernels (issue 36): per host venv (scripts/host_env),
the probe's cost at ``%load_ext``, how soon a ``%%lf agent`` cell that may ask returns, and
click → tool start, over ROUNDS runs. The click is what a page's Approve button sends, on the
shell channel, while no cell runs.

    .venv/bin/python benchmarks/hosts_background.py [ipk629] [ipk71] [colab] [--rounds N]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hosts._kernel import (
    execute,
    host_python,
    kernel,
    send_to_widget,
    stdout,
    widget_ids,
)

ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 20
KNOWN = ("ipk629", "ipk71", "colab")
HOSTS = [a for a in sys.argv[1:] if a in KNOWN] or list(KNOWN)

SETUP = '''
import time, json, asyncio
_t = time.perf_counter()
%load_ext langfx_nb
load_ms = (time.perf_counter() - _t) * 1e3
import langfx_nb as lf
from langfx_nb.notebook import hosts
_t = time.perf_counter(); hosts.probe(get_ipython()); probe_ms = (time.perf_counter() - _t) * 1e3
started = []

@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    started.append(time.time())
    return a + b
'''

WAIT = """
run = _
for _i in range(500):
    if run.widgets[0].waiting_for():
        break
    await asyncio.sleep(0.01)
print(json.dumps(run.widgets[0].state["pending"]))
"""


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def bench(host: str) -> None:
    python = host_python(host)
    with tempfile.TemporaryDirectory() as tmp, kernel(python, Path(tmp)) as kc:
        reply, out, _ = execute(kc, SETUP, timeout=120)
        assert reply["status"] == "ok", reply
        _, out, _ = execute(kc, "print(load_ms, probe_ms)")
        load_ms, probe_ms = map(float, stdout(out).split())
        returned, clicks = [], []
        for i in range(ROUNDS):
            execute(
                kc,
                f"lm = lf.llms.Scripted([lf.ToolCall('c{i}', 'add', {{'a': 1, 'b': {i}}}), 'ok'])",
            )
            reply, out, took = execute(kc, f"%%lf agent --lm lm --tools add\nAdd 1 and {i}.\n")
            assert reply["status"] == "ok", reply
            returned.append(took * 1e3)
            approval = widget_ids(out)[0]
            _, out, _ = execute(kc, WAIT)
            pending = json.loads(stdout(out))
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
            _, out, _ = execute(kc, "print(await run); print(started[-1])")
            answer, tool_start = stdout(out).splitlines()
            assert answer == "ok", answer
            clicks.append((float(tool_start) - clicked) * 1e3)
    print(
        f"{host}: %load_ext {load_ms:.0f} ms (probe {probe_ms:.2f} ms); background cell returns "
        f"first {returned[0]:.0f} ms, then median {statistics.median(returned[1:]):.0f} / p95 "
        f"{p95(returned[1:]):.0f} ms; click -> tool start median "
        f"{statistics.median(clicks):.0f} / p95 {p95(clicks):.0f} ms ({ROUNDS} runs)"
    )


for name in HOSTS:
    bench(name)
