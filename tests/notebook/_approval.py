"""Approval test helpers: a counted tool, a scripted model and a simulated page clicking."""

from __future__ import annotations

import asyncio
from typing import Any

import langfx_nb as lf
from langfx_nb.llms import Scripted
from langfx_nb.notebook.approval import ApprovalPolicy, ApprovalWidget

CALLS: list[tuple[int, int]] = []


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    CALLS.append((a, b))
    return a + b


def final_step(request: Any) -> str:
    return f"The answer is {request.messages[-1].text}."


def script(*calls: lf.ToolCall) -> Scripted:
    return Scripted([list(calls) if len(calls) > 1 else calls[0], final_step])


async def never_sleep(_seconds: float) -> None:  # the render timeout never fires
    await asyncio.Event().wait()


async def instant_sleep(_seconds: float) -> None:  # the render timeout fires at once
    return None


def ask_policy(**kw: Any) -> ApprovalPolicy:
    kw.setdefault("sleep", never_sleep)
    return ApprovalPolicy(tools=[add], display=lambda w: None, who="tester", **kw)


async def wait_for_pending(widget: ApprovalWidget, previous: str | None = None) -> dict[str, Any]:
    for _ in range(1000):
        pending = widget.state.get("pending")
        if pending and pending["prompt_id"] != previous:
            return pending
        await asyncio.sleep(0)
    raise AssertionError("no approval prompt appeared")


def click(widget: ApprovalWidget, pending: dict[str, Any], action: str, **extra: Any) -> None:
    widget._on_view_message(widget, {"kind": "rendered", "prompt_id": pending["prompt_id"]}, [])
    widget._on_view_message(
        widget,
        {
            "kind": "decision",
            "prompt_id": pending["prompt_id"],
            "call_id": pending["call_id"],
            "action": action,
            **extra,
        },
        [],
    )
