"""``%%lf`` options: argument parsing, and resolving names against the notebook namespace.

Everything here turns what the user typed into values, or raises ``UsageError`` (IPython shows
it as one short line) naming the option and what was wrong. Types named by ``--schema`` are
looked up, never evaluated as code.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import os
import shlex
import typing
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from IPython.core.error import UsageError

from ..llms.base import LanguageModel
from ..template import Template
from .kernel_state import from_registry, state

__all__ = [
    "APPROVE_ENV",
    "LINE_COMMANDS",
    "agent_parser",
    "approval_policy",
    "parser",
    "query_parser",
    "resolve_lm",
    "resolve_type",
    "sampling",
    "split",
    "template",
    "template_vars",
]

APPROVE_ENV = "LANGFX_NB_APPROVE"
"""When set (``deny``, ``allow`` or ``allow:add,search``), replaces every ``ask`` approval of
``%%lf agent`` — the unattended mode for headless runs (nbval, nbconvert, CI)."""

LINE_COMMANDS = ("use", "trace", "models", "cancel", "doctor", "help")


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` (a short message in the notebook) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage().strip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError(message or self.format_usage().strip())


def parser(prog: str) -> argparse.ArgumentParser:
    """An option parser for ``prog`` (``%lf resume``, ...): no ``--help``, no abbreviations,
    and a mistake raises ``UsageError`` with the usage line instead of exiting the kernel."""
    return _Parser(prog=prog, add_help=False, allow_abbrev=False)


def query_parser() -> argparse.ArgumentParser:
    p = parser("%%lf query")
    p.add_argument("--lm", metavar="VAR", help="model variable (default: %%lf use / lf.nb.use)")
    p.add_argument("--schema", metavar="TYPE", help="answer type from the namespace")
    p.add_argument("-o", "--out", metavar="VAR", help="also store the result in VAR")
    p.add_argument("--protocol", choices=("python", "json"), default="python")
    p.add_argument("--stream", action="store_true", help="show the answer as it streams")
    p.add_argument("--system", metavar="TEXT", help="system message")
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--returns-message", action="store_true", help="return the Message")
    p.add_argument(
        "--repair", type=int, default=0, metavar="N", help="re-ask N times on a bad answer"
    )
    return p


def agent_parser() -> argparse.ArgumentParser:
    p = parser("%%lf agent")
    p.add_argument("--lm", metavar="VAR", help="model variable (default: %%lf use / lf.nb.use)")
    p.add_argument("--tools", metavar="A,B", default="", help="tools from the namespace")
    p.add_argument(
        "--approve",
        metavar="MODE",
        default="ask",
        help="ask | deny | allow | allow:add,search (default ask)",
    )
    p.add_argument("--instructions", metavar="TEXT", help="system instructions for the agent")
    p.add_argument("--max-steps", type=int, help="model steps (default 8)")
    p.add_argument("--max-tool-calls", type=int, help="tool calls (default 12)")
    p.add_argument(
        "--timeout", type=float, help="seconds for the whole run (default 60; 900 with ask)"
    )
    p.add_argument("-o", "--out", metavar="VAR", help="also store the answer in VAR")
    p.add_argument("--no-trace", action="store_true", help="do not show the live trace")
    p.add_argument(
        "--suspend", action="store_true", help="save calls that need approval; %lf resume"
    )
    return p


def split(line: str) -> list[str]:
    """The words of an option line, shell-quoted like a command line."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%lf: cannot parse options: {exc}") from exc


def sampling(opts: argparse.Namespace) -> dict[str, Any]:
    """The sampling options the user gave (only those), as query keyword arguments."""
    out: dict[str, Any] = {}
    if opts.temperature is not None:
        out["temperature"] = opts.temperature
    if opts.max_tokens is not None:
        out["max_tokens"] = opts.max_tokens
    return out


def resolve_lm(name: str | None, ns: Mapping[str, Any]) -> LanguageModel:
    """``--lm NAME``: a model variable, a registry id (``fake:echo``) or the default model."""
    if name is None:
        if state.lm is None:
            raise UsageError(
                "no model: pass --lm VAR, or set a default with `%lf use VAR` or lf.nb.use(lm)"
            )
        return state.lm
    if name in ns:
        value = ns[name]
        if not isinstance(value, LanguageModel):
            raise UsageError(f"--lm {name}: {name} is a {type(value).__name__}, not a model")
        return value
    if ":" in name:
        return from_registry(name)
    raise UsageError(f"--lm {name}: no variable named {name!r} in the notebook")


_TYPE_NODES = (
    ast.Expression,
    ast.Name,
    ast.Attribute,
    ast.Subscript,
    ast.Tuple,
    ast.Constant,
    ast.BinOp,
    ast.BitOr,
    ast.Load,
)


def resolve_type(expr: str, ns: Mapping[str, Any]) -> Any:
    """A type named in an option: ``Answer``, ``list[Item]``, ``Literal['a', 'b']``, ``int | None``.

    Only names, attributes, subscripts, ``|`` and constants are accepted, looked up in the
    notebook namespace, then builtins and ``typing``; nothing is evaluated as code.
    """
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"--schema {expr}: not a type expression") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _TYPE_NODES):
            raise UsageError(f"--schema {expr}: only names like Answer or list[Item] are allowed")

    def build(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            for scope in (ns, vars(builtins), vars(typing)):
                if node.id in scope:
                    return scope[node.id]
            raise UsageError(
                f"--schema {expr}: no type named {node.id!r} in the notebook"
                + _did_you_mean(node.id, ns)
            )
        if isinstance(node, ast.Attribute):
            base = build(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError as exc:
                raise UsageError(f"--schema {expr}: {node.attr!r} not found") from exc
        if isinstance(node, ast.Subscript):
            args = node.slice
            items = args.elts if isinstance(args, ast.Tuple) else [args]
            built = tuple(build(a) for a in items)
            return build(node.value)[built if len(built) > 1 else built[0]]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return build(node.left) | build(node.right)
        raise UsageError(f"--schema {expr}: unsupported syntax")

    return build(tree.body)


def _did_you_mean(name: str, ns: Mapping[str, Any]) -> str:
    """`` (did you mean Movie?)`` when a type in the notebook is spelled almost like ``name``."""
    types = [k for k, v in ns.items() if isinstance(v, type) and not k.startswith("_")]
    close = difflib.get_close_matches(name, types, n=1, cutoff=0.6)
    if not close:
        lowered = {k.lower(): k for k in types}
        close = [lowered[name.lower()]] if name.lower() in lowered else []
    return f" (did you mean {close[0]}?)" if close else ""


def template(body: str) -> Template:
    """The cell body as a prompt template; an empty body is a usage error."""
    if not body.strip():
        raise UsageError("%%lf: the cell body (the prompt) is empty")
    return Template(body)


def template_vars(prompt: Template, ns: Mapping[str, Any]) -> dict[str, Any]:
    """The notebook variables the template names (missing ones are left to the template)."""
    return {name: ns[name] for name in prompt.variables if name in ns}


def approval_policy(mode: str, tools: Sequence[Any]) -> Any:
    """``--approve`` → an ``ApprovalPolicy``; ``$LANGFX_NB_APPROVE`` replaces ``ask``."""
    from .approval import ApprovalPolicy

    if mode == "ask" and os.environ.get(APPROVE_ENV):
        mode = os.environ[APPROVE_ENV].strip()
    if mode == "ask":
        return ApprovalPolicy(mode="ask", tools=tools)
    if mode == "deny":
        return ApprovalPolicy(mode="deny", tools=tools)
    if mode == "allow":
        return ApprovalPolicy(mode="allow", allow=[t.name for t in tools], tools=tools)
    if mode.startswith("allow:"):
        names = [n.strip() for n in mode[len("allow:") :].split(",") if n.strip()]
        return ApprovalPolicy(mode="allow", allow=names, tools=tools)
    raise UsageError(f"--approve {mode}: expected ask, deny, allow or allow:NAME,NAME")
