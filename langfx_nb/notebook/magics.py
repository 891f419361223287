"""The registered ``lf`` magic (``%lf use | trace | models | cancel | doctor | help``), setup.

``%%lf`` cells never reach the magic: :mod:`.cells` rewrites them into an awaited call before
they compile (see there why). The magic still exists, so ``%lf help`` and tab completion
work; if the ``%%lf`` cell magic is ever reached directly (the transformer bypassed), it
explains that instead of blocking.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from ..llms.base import LanguageModel
from ..llms.registry import key_variables
from .cells import transform_lf_cell
from .kernel_state import state, use
from .options import LINE_COMMANDS, agent_parser, query_parser, resolve_lm, split

__all__ = ["LfMagics", "register"]


_HELP = """\
%%lf query [options]      the cell body is a prompt template; {{name}} reads the notebook
    --lm VAR              model variable or registry id (default: %lf use / lf.nb.use)
    --schema TYPE         answer type: Answer, list[Item], int, Literal['a','b'] ...
    -o, --out VAR         also store the result in VAR
    --protocol python|json  structured-answer protocol (default python)
    --stream              show the answer live as it streams (text or fields)
    --system TEXT         system message
    --repair N            re-ask up to N times when the typed answer fails to parse
    --temperature T, --max-tokens N, --returns-message (return the whole Message)
%%lf agent [options]      run a tool-using agent on the cell body, with a live trace
    --tools add,search    tools from the notebook (made with @lf.tool)
    --approve MODE        ask (click to approve, default) | deny | allow | allow:add,search
                          $LANGFX_NB_APPROVE replaces `ask` for headless runs
    --timeout S           deadline for the whole run (default 60 s; 900 s when asking)
    --instructions TEXT, --max-steps N, --max-tool-calls N, -o VAR, --no-trace
    --suspend             calls that need approval end the run, saved to .langfx_nb/runs/
%lf resume [RUN_ID] --approve c1,c2 --deny c3 [--note TEXT] [--allow TOOLS] [--lm VAR]
          [--max-steps N] [--max-tool-calls N] [--timeout S]
                          continue this notebook's newest (or RUN_ID) suspended run, also
                          after a restart; limits are this cell's (a saved file's never raise them)
%lf use VAR               the notebook's default model (a variable or an id like fake:echo):
                          %%lf cells, lf.query, lf.batch and lf.eval.run given no model
%lf trace [SESSION]       trace explorer on the last %%lf run, or on SESSION
%lf models                the default model, models in the notebook, provider keys present
%lf cancel                cancel running %%lf runs and waiting approvals (see docs/notebook.md)
%lf doctor                what this kernel can do, and how approvals wait here
%lf help                  this text
"""


def _line_command(line: str, ns: MutableMapping[str, Any]) -> Any:
    args = split(line)
    if not args or args[0] == "help":
        from .hosts import current

        host = current()
        print(_HELP, end="")
        if host is not None:
            print(f"\napprovals here: {host.mode} (%lf doctor says why and what that means)")
        return None
    if args[0] == "doctor":
        from .hosts import doctor_text

        print(doctor_text(), end="")
        return None
    command, rest = args[0], args[1:]
    if command == "use":
        if len(rest) != 1:
            raise UsageError("usage: %lf use VAR (a model variable or an id like fake:echo)")
        name = rest[0]
        model = resolve_lm(name, ns)
        use(model, name=name)
        return None
    if command == "trace":
        if len(rest) > 1:
            raise UsageError("usage: %lf trace [SESSION]")
        if rest:
            if rest[0] not in ns:
                raise UsageError(f"%lf trace: no variable named {rest[0]!r} in the notebook")
            session = ns[rest[0]]
        else:
            session = state.last_session
            if session is None:
                raise UsageError("%lf trace: no %%lf run yet; pass a session: %lf trace S")
        from .trace_explorer import TraceExplorer

        return TraceExplorer(session)
    if command == "models":
        print(_models_text(ns), end="")
        return None
    if command == "cancel":
        from .control import cancel

        n = cancel("the run was cancelled with %lf cancel")
        print(f"cancelled {n} run{'s' if n != 1 else ''}")
        return None
    if command in ("query", "agent"):
        raise UsageError(f"`{command}` is a cell command: start the cell with `%%lf {command}`")
    raise UsageError(f"%lf: unknown command {command!r} (see %lf help)")


def _models_text(ns: Mapping[str, Any]) -> str:
    lines = []
    if state.lm is None:
        lines.append("default model: none (set one with %lf use VAR)")
    else:
        label = f" ({state.lm_name})" if state.lm_name else ""
        lines.append(f"default model: {state.lm!r}{label}")
    found = sorted(
        (k, v) for k, v in ns.items() if not k.startswith("_") and isinstance(v, LanguageModel)
    )
    if found:
        lines.append("models in the notebook:")
        lines.extend(f"  {k} = {v!r}" for k, v in found)
    lines.append("provider keys in the environment (values never shown):")
    for provider, names in key_variables().items():
        present = [n for n in names if os.environ.get(n)]
        lines.append(f"  {provider}: {', '.join(present) if present else 'not set'}")
    return "\n".join(lines) + "\n"


@magics_class
class LfMagics(Magics):
    """The registered ``lf`` magic: line commands run here; cells go through the transformer."""

    @line_cell_magic
    def lf(self, line: str, cell: str | None = None) -> Any:
        __tracebackhide__ = True
        if cell is not None:
            raise UsageError(
                "%%lf runs as top-level async code through an input transformer, which did "
                "not handle this cell. Put %%lf on the first line of the cell and keep "
                "`%autoawait` on; it cannot be called via run_cell_magic or nested in "
                "another cell magic."
            )
        assert self.shell is not None
        return _line_command(line, self.shell.user_ns)


def _complete(ip: Any, event: Any) -> list[str]:
    words = event.line.split()
    cell = bool(words) and words[0].startswith("%%")
    if len(words) == 1 or (len(words) == 2 and not event.line.endswith(" ")):
        return ["query", "agent"] if cell else list(LINE_COMMANDS)
    command = words[1] if len(words) > 1 else ""
    if cell and command in ("query", "agent"):
        parser = query_parser() if command == "query" else agent_parser()
        return [a for a in parser._option_string_actions if a.startswith("--")]
    if command in ("use", "trace"):
        return [k for k in ip.user_ns if not k.startswith("_")]
    return []


def register(ip: Any) -> None:
    """Install the transformer, the ``lf`` magic and option completion (idempotent)."""
    cleanup = ip.input_transformers_cleanup
    if transform_lf_cell not in cleanup:
        cleanup.append(transform_lf_cell)
    # IPython ships a shell alias `%lf` (ls -F -l | grep ^-); ours replaces it, and dropping it
    # from the defaults keeps `%reset` from logging "Invalid alias" when it re-adds aliases.
    aliases = ip.alias_manager
    aliases.default_aliases = [a for a in aliases.default_aliases if a[0] != "lf"]
    ip.register_magics(LfMagics)
    for key in ("%lf", "%%lf"):
        ip.set_hook("complete_command", _complete, str_key=key)
