"""A real kernel from a host's venv (scripts/host_env), driven as a page would drive it."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager

ROOT = Path(__file__).resolve().parents[2]


def host_python(name: str) -> str:
    """The python of ``.venv-hosts/NAME``, made (once) by scripts/host_env."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "host_env"), name],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def kernel_specs(python: str, tmp: Path, env: dict[str, str] | None = None) -> KernelSpecManager:
    """Kernel specs with one kernel, ``host``: ipykernel from ``python``'s venv. ``ask`` asks
    and the probe decides unless ``env`` says otherwise (nbval's conftest sets
    ``LANGFX_NB_APPROVE`` for the whole session, which kernels would inherit)."""
    spec = tmp / "kernels" / "host"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "host",
                "language": "python",
                "env": {
                    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                    "LANGFX_NB_APPROVE": "",
                    "LANGFX_NB_APPROVAL": "",
                    **(env or {}),
                },
            }
        )
    )
    return KernelSpecManager(kernel_dirs=[str(spec.parent)])


@contextmanager
def kernel(python: str, tmp: Path) -> Iterator[Any]:
    km = KernelManager(kernel_name="host", kernel_spec_manager=kernel_specs(python, tmp))
    km.start_kernel(cwd=str(tmp))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc: BlockingKernelClient, code: str, timeout: float = 60) -> tuple[dict, list, float]:
    """Run ``code``; (reply content, iopub messages of the request, seconds until the reply)."""
    start = time.perf_counter()
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    took = time.perf_counter() - start
    out = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        out.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return reply["content"], out, took


def stdout(messages: list) -> str:
    return "".join(
        m["content"]["text"]
        for m in messages
        if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
    )


def widget_ids(messages: list) -> list[str]:
    return [
        m["content"]["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for m in messages
        if m["msg_type"] == "display_data"
        and "application/vnd.jupyter.widget-view+json" in m["content"]["data"]
    ]


def send_to_widget(kc: BlockingKernelClient, model_id: str, content: dict[str, Any]) -> None:
    """What a widget view's ``model.send(content)`` puts on the shell channel."""
    data = {"method": "custom", "content": content}
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": model_id, "data": data}))
