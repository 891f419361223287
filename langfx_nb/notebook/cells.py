"""The ``%%lf`` input transformer and the coroutine the rewritten cell awaits.

Why an input transformer: a run may wait for a click (a tool approval). A kernel that
handles widget messages while a cell runs does so only while the cell is suspended at an
``await`` (``hosts.py`` probes for it; elsewhere the run waits in the background), and
IPython cell magics are synchronous functions. So a cell starting with ``%%lf`` is
rewritten *before* it is compiled into one line of ordinary Python::

    await __import__('langfx_nb').nb.cells.run_cell_magic_async(
        'query --schema Answer', '<the cell body>', globals())

IPython's autoawait then runs that coroutine on the kernel's own event loop, like any other
top-level ``await``. Nothing blocks the loop; ``nest_asyncio`` and ``jupyter_ui_poll`` are not
used (both fail on ipykernel 7.x).

The cell body is a ``lf.Template``: ``{{name}}`` reads the notebook namespace, single braces
(code, JSON) are plain text.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import MutableMapping
from typing import Any, NoReturn

from IPython.core.error import UsageError

from ..errors import LangFxError
from .options import LINE_COMMANDS, split
from .runners import run_agent, run_query

__all__ = ["run_cell_magic_async", "transform_lf_cell"]

_CELL_RE = re.compile(r"%%lf(?=\s|$)")
_RESUME_RE = re.compile(r"\s*%lf\s+resume(?=\s|$)")


def transform_lf_cell(lines: list[str]) -> list[str]:
    """IPython cleanup transform: a ``%%lf ...`` cell becomes one awaited call.

    Other cells pass through unchanged. The result is a single line, so a traceback's line 1
    points at the ``%%lf`` line of the cell the user wrote.
    """
    if lines and _RESUME_RE.match(lines[0]):  # `%lf resume` awaits too: run it like a cell
        lines = ["%%lf " + lines[0].lstrip()[len("%lf") :].lstrip(), *lines[1:]]
    if not lines or not _CELL_RE.match(lines[0]):
        return lines
    line = lines[0][len("%%lf") :].strip()
    body = "".join(lines[1:])
    from IPython import get_ipython

    ip = get_ipython()
    if ip is not None and not getattr(ip, "autoawait", True):
        call = "__import__('langfx_nb').nb.cells._autoawait_off()"
        return [call + "\n"]
    call = (
        f"await __import__('langfx_nb').nb.cells.run_cell_magic_async({line!r}, {body!r}, "
        "globals())"
    )
    if _streams(line):
        call += ";"  # the live stream view already shows the answer: no second copy in Out
    return [call + "\n"]


def _streams(line: str) -> bool:
    try:
        return "--stream" in shlex.split(line)
    except ValueError:
        return False


# Not run by IPython's check_complete, so a terminal still treats %%lf as a cell magic
# (a blank line ends it) instead of parsing the rewritten source.
transform_lf_cell.has_side_effects = True  # type: ignore[attr-defined]


def _autoawait_off() -> NoReturn:
    raise UsageError("%%lf cells need top-level await: run `%autoawait on` first")


async def run_cell_magic_async(line: str, body: str, ns: MutableMapping[str, Any]) -> Any:
    """Run one ``%%lf`` cell on the running event loop; the return value is the cell's value.

    Our own errors (``LangFxError``) display as one short line (``Type: message``) instead of
    a traceback through the library's internals; anything else shows its full traceback.
    """
    __tracebackhide__ = True
    args = split(line)
    if not args:
        raise UsageError("%%lf needs a command: `%%lf query` or `%%lf agent` (see %lf help)")
    command, rest = args[0], args[1:]
    from . import control

    try:
        with control.track(label=f"%%lf {command}"):  # Cancel run, %lf cancel, Interrupt
            if command == "query":
                return await run_query(rest, body, ns)
            if command == "agent":
                return await run_agent(rest, body, ns)
            if command == "resume":
                from .suspended import run_resume

                return await run_resume(rest, body, ns)
    except LangFxError as exc:
        # Shown as one line (type: message); the full traceback stays on the exception for
        # %debug. IPython renders an exception through `_render_traceback_` when it has one.
        exc._render_traceback_ = functools.partial(_short_traceback, exc, command)  # type: ignore[attr-defined]
        raise
    if command in LINE_COMMANDS:
        raise UsageError(f"`{command}` is a line command: write `%lf {command} ...`")
    raise UsageError(f"%%lf: unknown command {command!r}; use query or agent (see %lf help)")


def _short_traceback(exc: BaseException, command: str) -> list[str]:
    red, reset = "\x1b[0;31m", "\x1b[0m"
    return [
        f"{red}{type(exc).__name__}{reset}: {exc}",
        f"(raised by %%lf {command}; run %debug to inspect the full traceback)",
    ]
