"""``%%lf agent --suspend`` and ``%lf resume``: approvals that outlive the kernel.

``%%lf agent --suspend`` runs the agent with ``on_approval="suspend"``: tools on the
``--approve allow:...`` list run, ``--approve deny`` denies, and any other call ends the run
with a ``RunState``. The cell shows the calls that wait (id, tool, arguments) and saves the
state as JSON under ``.langfx_nb/runs/`` in the working directory, so a kernel restart loses
nothing. A later cell ``%lf resume --approve c2 --deny c3`` (any kernel) loads the newest
saved state (or ``%lf resume RUN_ID``), finds the tools by name in the notebook, and
continues; a run that needs approval again is suspended and saved again. The saved file is
removed once it has been resumed, so a run cannot be resumed twice from this directory.

Suspended runs belong to their notebook: a kernel that knows its notebook (Jupyter sets
``__session__`` to its path, VS Code ``__vsc_ipynb_file__``) saves them under
``.langfx_nb/runs/<notebook name>-<hash of its path>/``, and ``%lf resume`` looks only
there, so notebooks sharing a folder (and their call ids ``c1``, ``c2``…) never resume
each other's runs; a kernel with no notebook (a terminal IPython) uses
``.langfx_nb/runs/`` itself. Before any tool runs, ``%lf resume`` prints which run it
continues (its id, agent, notebook, when it was suspended) and the decision for each call.

The saved file is not signed, so a call the allow-list approved before the suspension is
approved again on resume (``--approve`` it, or ``--allow`` its tool): a file someone else
changed can never approve a call by itself, nor raise the run's limits: they are bounded
by the defaults, or set by ``--max-steps``/``--max-tool-calls``/``--timeout`` on
``%lf resume``. A damaged file is a ``UsageError`` naming what is wrong, and stays where
it is.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from ..agentic.limits import AgentLimits
from ..agentic.runstate import RunState
from . import kernel_state, options
from .markdown import present

__all__ = [
    "RUNS_DIR",
    "notebook_of",
    "resume_parser",
    "run_resume",
    "runs_dir",
    "saved",
    "suspend_policy",
]

RUNS_DIR = Path(".langfx_nb") / "runs"


def resume_parser() -> argparse.ArgumentParser:
    p = options.parser("%lf resume")
    p.add_argument("run_id", nargs="?", help="a saved run (default: the newest)")
    p.add_argument("--approve", metavar="IDS", default="", help="call ids to run: c1,c2")
    p.add_argument("--deny", metavar="IDS", default="", help="call ids to skip: c3")
    p.add_argument("--note", metavar="TEXT", help="what denied calls tell the model")
    p.add_argument("--allow", metavar="TOOLS", default="", help="tools that run unasked later")
    p.add_argument("--lm", metavar="VAR", help="model variable (default: %lf use)")
    p.add_argument("-o", "--out", metavar="VAR", help="also store the answer (or state) in VAR")
    p.add_argument("--max-steps", type=int, help="model steps (default 8)")
    p.add_argument("--max-tool-calls", type=int, help="tool calls (default 12)")
    p.add_argument("--timeout", type=float, help="seconds for the resumed run (default 60)")
    return p


def notebook_of(ns: Mapping[str, Any]) -> str | None:
    """The path of the notebook this kernel runs, when the front end says it."""
    for name in ("__session__", "__vsc_ipynb_file__"):
        value = ns.get(name)
        if isinstance(value, str) and value:
            return value
    return os.environ.get("JPY_SESSION_NAME") or None


def runs_dir(ns: Mapping[str, Any]) -> Path:
    """Where this notebook's suspended runs are saved (see the module docstring)."""
    notebook = notebook_of(ns)
    if notebook is None:
        return RUNS_DIR
    digest = hashlib.sha256(notebook.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(notebook).stem)[:40] or "notebook"
    return RUNS_DIR / f"{stem}-{digest}"


def _limits(opts: argparse.Namespace) -> AgentLimits | None:
    """The resumed run's limits from the options given (``None``: none given)."""
    given = {
        k: v
        for k, v in (
            ("max_steps", opts.max_steps),
            ("max_tool_calls", opts.max_tool_calls),
            ("max_execution_time", opts.timeout),
        )
        if v is not None
    }
    try:
        return AgentLimits(**given) if given else None
    except ValueError as exc:
        raise UsageError(f"%lf resume: {exc}") from exc


def suspend_policy(policy: Any) -> Callable[[Any, Any], Any]:
    """The ``--approve`` policy for a suspending run: its allow-list approves, ``deny``
    denies, any other call waits for ``%lf resume`` (``None``)."""
    from ..agentic import Approve

    allow = frozenset(getattr(policy, "allow", ()))
    deny = getattr(policy, "mode", "") == "deny"

    def decide(call: Any, session: Any) -> Any:
        if call.name in allow:
            return Approve(by="allow-list")
        return False if deny else None

    return decide


def saved(state: RunState, ns: MutableMapping[str, Any], out: str | None) -> RunState:
    """Save a suspended run, print what waits and how to resume; the cell's value."""
    folder = runs_dir(ns)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{state.id}.json"
    path.write_text(state.to_json_str(), encoding="utf-8")
    lines = [f"Suspended: {len(state.pending)} tool call(s) wait for a decision (saved {path})"]
    for call in state.pending:
        lines.append(f"  {call.id}: {call.name}({_args(call.args)})")
    approved = _approved(state)
    for call in approved:
        lines.append(f"  {call.id}: {call.name}({_args(call.args)}) (approved: approve it again)")
    ids = ",".join(c.id for c in [*state.pending, *approved])
    lines.append(f"Resume (also after a kernel restart): %lf resume --approve {ids}")
    lines.append(f"                              or deny: %lf resume --deny {ids} --note 'why'")
    print("\n".join(lines))
    if out:
        ns[out] = state
    return state


def _approved(state: RunState) -> list[Any]:
    """The calls approved before the suspension: read back from the unsigned file, their
    approval does not count, so ``%lf resume`` asks for them again."""
    return [
        b.call for b in state.batch if b.decision is not None and b.decision.outcome == "approve"
    ]


def _args(args: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) <= 200 else text[:199] + "…"


def _load(run_id: str | None, folder: Path) -> tuple[RunState, Path]:
    if run_id is not None:
        path = folder / f"{Path(run_id).name}.json"
        if not path.is_file():
            raise UsageError(f"%lf resume: no saved run {run_id!r} in {folder}{_others(folder)}")
    else:
        found = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise UsageError(
                f"%lf resume: no suspended run saved in {folder} (this notebook's)"
                + _others(folder)
            )
        path = found[-1]
    try:
        return RunState.from_json(path.read_text(encoding="utf-8")), path
    except ValueError as exc:
        raise UsageError(f"%lf resume: {path} is not a run state: {exc}") from exc


def _others(folder: Path) -> str:
    """What other notebooks saved here, which this one does not resume."""
    count = sum(1 for p in RUNS_DIR.glob("**/*.json") if p.parent != folder)
    if not count:
        return ""
    return f"; {count} run(s) of other notebooks are saved in {RUNS_DIR}, resumed only there"


def _announce(state: RunState, path: Path, approved: list[str], denied: list[str]) -> None:
    """Say which run is resumed and what happens to each call, before any tool runs."""
    when = f", suspended {state.created_at}" if state.created_at else ""
    lines = [f"Resuming run {state.id} (agent {state.agent.name!r}{when}; {path}):"]
    for item in state.batch:
        call = item.call
        if call.id in denied:
            verdict = "deny"
        elif call.id in approved:
            verdict = "run"
        else:
            verdict = "as decided before the suspension"
        lines.append(f"  {call.id}: {call.name}({_args(call.args)}): {verdict}")
    print("\n".join(lines), flush=True)


def _ids(text: str) -> list[str]:
    return [i.strip() for i in text.split(",") if i.strip()]


async def run_resume(argv: Sequence[str], body: str, ns: MutableMapping[str, Any]) -> Any:
    """``%lf resume``: continue the newest (or the named) suspended run with decisions."""
    from ..agentic import Agent, Approve, Deny, Tool
    from .approval import ApprovalPolicy

    opts = resume_parser().parse_args(argv)
    limits = _limits(opts)
    state, path = _load(opts.run_id, runs_dir(ns))
    decisions: dict[str, Any] = {i: Approve(by="notebook") for i in _ids(opts.approve)}
    note = opts.note or "The user declined this tool call."
    for i in _ids(opts.deny):
        if i in decisions:
            raise UsageError(f"%lf resume: {i} is both approved and denied")
        decisions[i] = Deny(note, by="notebook")
    allowed = set(_ids(opts.allow))
    again = [c.id for c in state.unverified_approvals if c.name not in allowed]
    waiting = [c.id for c in state.pending] + again
    unknown = sorted(set(decisions) - {c.call.id for c in state.batch})
    if unknown:
        raise UsageError(f"%lf resume: no waiting call {', '.join(unknown)} (waiting: {waiting})")
    missing = [i for i in waiting if i not in decisions]
    if missing:
        raise UsageError(
            f"%lf resume: decide every waiting call: --approve or --deny {','.join(missing)}"
            + (f" ({', '.join(again)} approved before the suspension)" if again else "")
        )
    tools = []
    for name in state.agent.tools:
        tool = ns.get(name)
        if not isinstance(tool, Tool):
            raise UsageError(f"%lf resume: the run uses tool {name!r}: define it in the notebook")
        tools.append(tool)
    lm = options.resolve_lm(opts.lm, ns)
    allow = suspend_policy(ApprovalPolicy(mode="allow", allow=_ids(opts.allow)))
    _announce(state, path, _ids(opts.approve), _ids(opts.deny))
    path.unlink()  # resumed once from here: its tools must not run twice
    result = await Agent.resume(
        state,
        decisions,
        tools=tools,
        lm=lm,
        allow_tool=allow,
        on_approval="suspend",
        tracer_provider=kernel_state.state.tracer_provider,
        limits=limits,
    )
    if isinstance(result, RunState):
        return saved(result, ns, opts.out)
    value = present(result)
    if opts.out:
        ns[opts.out] = value
    return value
