"""The acceptance walk of a provider batch in a real Jupyter kernel: a cell submits a batch
the provider keeps pending, the kernel is restarted (as JupyterLab's "Restart Kernel":
a shutdown request, then a new kernel), the same cell runs again and polls the batch it
finds in the run manifest (no second upload or create request), shows that it resumed it,
and returns the answers once the provider finishes the batch."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .provider_server import ProviderServer

pytestmark = [pytest.mark.realserver, pytest.mark.timeout(90)]

jupyter_client = pytest.importorskip("jupyter_client")

SETUP = """
import langfx_nb as lf, pydantic  # in a kernel, the live batch view with no lf.nb
from langfx_nb.llms.openai import OpenAI
class Label(pydantic.BaseModel):
    item: str
    label: str
lm = OpenAI("gpt-4o-mini", api_key="sk-t", base_url="{url}/openai/v1")
async def label(row, session):
    return await session.query("Label this ticket: item={{{{id}}}}", Label, vars=row, lm=lm,
                               protocol="json")
items = [{{"id": f"t{{i}}"}} for i in range(12)]
"""
CELL = """
result = await lf.batch(label, items, run="run.sqlite",
                        engine=lf.engines.ProviderBatch(poll_interval=0.2))
print(json.dumps({"labels": [r.label for r in result.results], "failed": result.totals.failed}))
"""


class Cell:
    """One execution's iopub messages, read as they come."""

    def __init__(self, client: Any, code: str) -> None:
        self.client = client
        self.msg_id = client.execute(code)
        self.stdout = ""
        self.errors: list[str] = []
        self.providers: list[dict[str, Any]] = []  # the batch view's provider counts
        self.idle = False

    def read(self, until: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if until():
                return True
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != self.msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                self.idle = True
            elif kind == "stream" and content["name"] == "stdout":
                self.stdout += content["text"]
            elif kind == "error":
                self.errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind in ("comm_open", "comm_msg"):
                self.providers.extend(_providers(content))
        return until()


def _providers(node: Any) -> Iterator[dict[str, Any]]:
    """Every ``provider`` mapping in a widget message (the view's progress state)."""
    if isinstance(node, dict):
        found = node.get("provider")
        if isinstance(found, dict):
            yield found
        for value in node.values():
            yield from _providers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _providers(value)


def test_restart_the_kernel_while_the_batch_is_pending_then_resume_it(tmp_path: Path) -> None:
    with ProviderServer(steps_to_finish=10**9) as server:  # pending until told
        manager = jupyter_client.KernelManager(kernel_name="python3")
        manager.start_kernel(cwd=str(tmp_path))
        client = manager.client()
        client.start_channels()
        try:
            client.wait_for_ready(60)
            setup = Cell(client, "import json\n" + SETUP.format(url=server.url))
            assert setup.read(lambda: setup.idle, 30) and not setup.errors, setup.errors

            def polls() -> int:
                return sum(1 for m, p in server.requests if m == "GET" and "/batches/" in p)

            first = Cell(client, CELL)
            assert first.read(lambda: polls() >= 2, 30), first.errors
            (batch_id,) = server.batches
            assert server.create_requests("openai") == 1
            assert first.read(lambda: any(p.get("status") == "waiting" for p in first.providers), 5)

            manager.restart_kernel(now=False)  # a shutdown request, then a new kernel
            client.stop_channels()
            client = manager.client()
            client.start_channels()
            client.wait_for_ready(60)
            setup = Cell(client, "import json\n" + SETUP.format(url=server.url))
            assert setup.read(lambda: setup.idle, 30) and not setup.errors, setup.errors

            seen = len(server.requests)
            second = Cell(client, CELL)
            assert second.read(lambda: polls() >= 3 and len(server.requests) > seen + 1, 30)
            assert not second.idle  # still pending at the provider
            # polled by the id in the run manifest: nothing uploaded or created again
            assert server.create_requests("openai") == 1
            assert [p for m, p in server.requests[seen:] if m != "GET"] == []

            # the view says so: the batch by its id, resumed from the run manifest
            def waiting() -> list[dict[str, Any]]:
                return [p for p in second.providers if p.get("status") == "waiting"]

            assert second.read(lambda: bool(waiting()), 5)
            shown = waiting()[-1]
            assert shown["resumed_batches"] == 1 and shown["batches"] == 1
            assert [b["id"] for b in shown["per_batch"]] == [batch_id]
            assert all(p.get("status") != "submitting" for p in second.providers)

            server.steps_to_finish = 1  # the provider finishes the batch now
            assert second.read(lambda: second.idle, 30) and not second.errors, second.errors
            out = json.loads(second.stdout.strip().splitlines()[-1])
            assert out == {"labels": [f"label-t{i}" for i in range(12)], "failed": 0}
            assert server.create_requests("openai") == 1 and len(server.batches) == 1
            assert sorted(server.batched.values()) == [1] * 12 and not server.answered
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
