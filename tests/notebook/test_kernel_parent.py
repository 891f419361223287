"""After Run All, every async cell ends with an idle status for its own request (no stuck ``[*]``)
even when widget messages keep arriving (the ipykernel 7.4 race in ``kernel_parent``)."""

from __future__ import annotations

import queue
import time
from typing import Any

from langfx_nb.notebook.kernel_parent import ParentPin


def _req(msg_id: str, msg_type: str = "execute_request") -> dict[str, Any]:
    return {"header": {"msg_id": msg_id, "msg_type": msg_type}}


class FakeKernel:
    def __init__(self) -> None:
        self.parent: dict[str, Any] = {}
        self.ident = b""
        self._parent_ident = {"shell": b""}

    def get_parent(self, channel: str) -> dict[str, Any]:
        return self.parent

    def set_parent(self, ident: bytes, parent: dict[str, Any], channel: str = "shell") -> None:
        self.parent, self._parent_ident["shell"] = parent, ident


def test_a_stale_request_is_replaced_by_the_cells_own_before_the_reply() -> None:
    kernel = FakeKernel()
    pin = ParentPin(kernel)
    kernel.set_parent(b"id", _req("cell-2"))
    pin.pre_execute()
    kernel.set_parent(b"id", _req("cell-1"))  # the stale restore
    pin.post_execute()
    assert kernel.parent == _req("cell-2") and pin.repaired == 1


def test_comm_handlers_and_untouched_cells_are_left_alone() -> None:
    kernel = FakeKernel()
    pin = ParentPin(kernel)
    kernel.set_parent(b"id", _req("cell-2"))
    pin.pre_execute()
    kernel.set_parent(b"id", _req("c", "comm_msg"))  # a comm handler fires pre/post too
    pin.pre_execute()
    pin.post_execute()
    assert kernel.parent == _req("c", "comm_msg")
    kernel.set_parent(b"id", _req("cell-2"))
    pin.post_execute()
    assert kernel.parent == _req("cell-2") and pin.repaired == 0


SETUP = """
import asyncio
from comm import get_comm_manager

get_comm_manager().register_target("lfx-test-noop", lambda comm, msg: comm.on_msg(lambda m: None))
%load_ext langfx_nb
"""


def test_in_a_real_kernel_async_cells_get_their_idle_while_widget_messages_arrive() -> None:
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        assert kc.execute_interactive(SETUP, timeout=60)["content"]["status"] == "ok"
        kc.shell_channel.send(
            kc.session.msg(
                "comm_open", {"comm_id": "n0", "target_name": "lfx-test-noop", "data": {}}
            )
        )
        # Run All over short async cells while a view keeps messaging its widget. Without the
        # fix some cell's idle carries the previous cell's msg_id (every round, on ipykernel 7.4).
        cells = [kc.execute(f"await asyncio.sleep(0.05)\n{i}") for i in range(8)]
        for _ in range(300):
            kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": "n0", "data": {}}))
            time.sleep(0.002)
        idle: set[str] = set()
        deadline = time.monotonic() + 30
        while not set(cells) <= idle and time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle.add(msg["parent_header"].get("msg_id"))
        missing = [i for i, c in enumerate(cells) if c not in idle]
        assert not missing, f"cells {missing} never got an idle status with their own parent"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
