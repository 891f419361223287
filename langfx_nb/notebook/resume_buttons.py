"""Buttons on a suspended run: click Approve or Deny for each waiting call and the run resumes.

``%%lf agent --suspend`` (and approval mode ``suspend``) ends a run that needs a decision with
a saved ``RunState`` and prints the ``%lf resume`` line. Where the kernel's loop runs between
cells (``hosts``), the cell also shows the waiting calls as approval prompts, one after the
other; when every call is decided, the run resumes in the background with exactly what
``%lf resume --approve ... --deny ... [--note ...]`` would do (the same function, the same
checks, the saved file removed once resumed). The typed command still works; whichever comes
first resumes the run, and the other finds no saved run.

Edited arguments cannot travel into a resumed run (its file holds the calls as the model made
them), so an edited approval is refused at the prompt and the call asked again.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from .approval import ApprovalWidget, ask
from .background import BackgroundRun, background

__all__ = ["offer"]


def offer(
    state: Any, ns: MutableMapping[str, Any], out: str | None, lm: str | None
) -> BackgroundRun:
    """Prompts for ``state``'s waiting calls; the returned run resumes it once all are
    decided (its value: the answer, or a new ``RunState`` if it suspends again)."""
    from .suspended import run_resume

    widget = ApprovalWidget()
    calls = [*state.pending, *state.unverified_approvals]
    tools = {name: ns.get(name) for name in state.agent.tools}

    async def decide_and_resume() -> Any:
        approve: list[str] = []
        deny: list[str] = []
        notes: list[str] = []
        for call in calls:
            decision = await ask(widget, call, tools.get(call.name))
            while decision.action == "approve_edited":
                widget.state = {**widget.state, "notice": _NO_EDITS}
                decision = await ask(widget, call, tools.get(call.name))
            (approve if decision.action == "approve" else deny).append(call.id)
            if decision.note:
                notes.append(decision.note)
        argv = [state.id]
        if approve:
            argv += ["--approve", ",".join(approve)]
        if deny:
            argv += ["--deny", ",".join(deny)]
        if notes:
            argv += ["--note", " ".join(notes)]
        if lm:
            argv += ["--lm", lm]
        if out:
            argv += ["-o", out]
        return await run_resume(argv, "", ns)

    return background(
        decide_and_resume(),
        label=f"suspended run {state.id}",
        widgets=[widget],
        waiting=widget.waiting_for,
        guide=(
            "decide each waiting call below (Approve or Deny, while no cell runs) and the run "
            "resumes here, as `%lf resume` would"
            + (f"; `{out}` then holds its answer." if out else ".")
        ),
    )


_NO_EDITS = (
    "A suspended run resumes the calls as the model made them: approve or deny this call "
    "(edit the arguments by denying it with a note)."
)
