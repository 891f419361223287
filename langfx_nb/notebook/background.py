"""Background runs: an agent run that goes on between cells, for kernels that hand a click to
Python only while no cell runs (``hosts``: approval mode ``background``).

``background(coro, ...)`` starts ``coro`` as a task on the kernel's loop and returns a
:class:`BackgroundRun` at once. Shown as a cell's value, the handle draws the widgets given
to it (the approval prompt, the trace explorer) in that cell, with one line saying what is
going on and what to do; their state updates travel to the page between cells like any
widget's. ``ns[out]`` (if named) holds the handle until the run ends, then its value; the
handle keeps the value too: ``await run`` in a later cell returns it (or raises the run's
error).

Stopping: ``run.cancel()``, ``%lf cancel``, the prompt's Cancel-run button. Kernel ›
Interrupt stops the running cell, so it stops a run only in a cell that awaits it (as asyncio
does when an awaited task's awaiter is cancelled). A cell that awaits a run which waits for a
decision could never receive the click on such a kernel: it stops with a ``UsageError`` that
says so, and the run keeps waiting for the click.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, MutableMapping, Sequence
from typing import Any

from IPython.core.error import UsageError

from . import control, hosts

__all__ = ["BackgroundRun", "background"]


class BackgroundRun:
    """The handle of a run going on between cells; ``await`` it for the run's value."""

    def __init__(
        self,
        task: asyncio.Task[Any],
        *,
        label: str,
        widgets: Sequence[Any] = (),
        waiting: Callable[[], str | None] = lambda: None,
        out: str | None = None,
        guide: str | None = None,
    ) -> None:
        self.task = task
        self.label = label
        self.out = out
        self.guide = guide  # what to do, when not the approval mode's own words
        self.widgets = list(widgets)
        self._waiting = waiting
        self._asked: asyncio.Event = asyncio.Event()

    def asked(self) -> None:
        """A prompt opened: a cell awaiting this run must stop (see the module docstring)."""
        self._asked.set()

    def done(self) -> bool:
        return self.task.done()

    def result(self) -> Any:
        """The run's value (raises its error); ``asyncio.InvalidStateError`` while it runs."""
        return self.task.result()

    def cancel(self, reason: str = "the background run was cancelled") -> bool:
        """Stop the run (a waiting prompt closes as cancelled); False when it had ended."""
        if self.task.done():
            return False
        control.cancel_task(self.task, reason)
        return True

    def status(self) -> str:
        if self.task.cancelled():
            return "cancelled"
        if self.task.done():
            return "failed" if self.task.exception() is not None else "done"
        pending = self._waiting()
        return f"waiting for your decision on {pending}" if pending else "running"

    def __repr__(self) -> str:
        return f"<BackgroundRun {self.label}: {self.status()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        print(self.explain())
        for widget in self.widgets:
            display(widget)  # type: ignore[no-untyped-call]

    def _display_(self) -> Any:
        """marimo's display protocol (IPython's is not used there): the same line and widgets
        as one output."""
        from .marimo_host import stack

        return stack(self.explain(), self.widgets)

    def explain(self) -> str:
        """Which mode, why, and what to do next (the line shown above the widgets)."""
        if self.guide is not None:
            return f"{self.label}: {self.guide}"
        host = hosts.current()
        if host is not None and host.marimo:
            forced = f", chosen by ${hosts.MODE_ENV}" if host.forced else ""
            return (
                f"{self.label}: runs in the background (approval mode background{forced}: "
                f"{host.kernel} hands clicks to Python only between cells). When the prompt "
                "below asks, click Approve or Deny while no cell runs; then `await` this run in "
                "a cell (run it after the click) for the answer. run.cancel() or Cancel run "
                "stop it."
            )
        if host is not None and host.forced:
            why = f"approval mode background, chosen by ${hosts.MODE_ENV}"
        else:
            why = f"approval mode background: {hosts.why_not_live(host)}"
        if host is not None and host.page is not None:  # nobody runs another cell there
            return (
                f"{self.label}: runs in the background ({why}). When the prompt below asks, "
                "click Approve or Deny; the trace below follows the run (its Agent row holds "
                "the answer)."
            )
        gets = f"`{self.out}` is this run until its answer replaces it; " if self.out else ""
        return (
            f"{self.label}: runs in the background ({why}). When the prompt below asks, click "
            f"Approve or Deny while no cell runs. {gets}`run = _` in the next cell names this "
            "run: `await run` gives the answer, run.cancel() stops it (as do Cancel run and "
            "%lf cancel)."
        )

    def __await__(self) -> Generator[Any, None, Any]:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        live = hosts.approval_mode() == "live"
        with control.track(None, label=f"await {self.label}"):
            while not self.task.done():
                pending = self._waiting()
                if pending and not live:
                    raise UsageError(self._cannot_wait(pending))
                self._asked.clear()
                asked = asyncio.ensure_future(self._asked.wait())
                try:
                    await asyncio.wait({self.task, asked}, return_when=asyncio.FIRST_COMPLETED)
                except asyncio.CancelledError:
                    self.cancel("interrupted while a cell awaited the background run")
                    raise
                finally:
                    asked.cancel()
        return self.task.result()

    def _cannot_wait(self, pending: str) -> str:
        return (
            f"{self.label} is waiting for your decision on {pending}. Here "
            f"{hosts.why_not_live()}, so a cell awaiting the run would never get it: click "
            "Approve or Deny in the run's prompt first, then `await` it again. The run keeps "
            "waiting."
        )


def background(
    coro: Coroutine[Any, Any, Any],
    *,
    label: str = "background run",
    widgets: Sequence[Any] = (),
    out: str | None = None,
    ns: MutableMapping[str, Any] | None = None,
    waiting: Callable[[], str | None] | None = None,
    present: Callable[[Any], Any] = lambda value: value,
    guide: str | None = None,
) -> BackgroundRun:
    """Run ``coro`` as a task on the running loop (the kernel's) and return its handle now.

    ``present`` turns the value into what ``await`` and ``ns[out]`` get; ``waiting`` says
    which decision the run waits for (None when it waits for none; by default asked of the
    approval prompts among ``widgets``, so a cell awaiting the run stops when one asks instead
    of holding the click back); ``guide`` replaces the approval mode's words above the
    widgets."""

    async def body() -> Any:
        control.mark_background()
        value = present(await coro)
        if out is not None and ns is not None:
            ns[out] = value
        return value

    task = asyncio.get_running_loop().create_task(body())
    task.add_done_callback(_retrieve)
    # cancelled before its first step: ``coro`` never started, so nothing ran; close it
    task.add_done_callback(lambda _: coro.close())
    prompts = [w for w in widgets if callable(getattr(w, "waiting_for", None))]

    def waits() -> str | None:
        return next(filter(None, (w.waiting_for() for w in prompts)), None)

    def opened(change: Any) -> None:
        if change["new"].get("pending"):
            run.asked()

    run = BackgroundRun(
        task, label=label, widgets=widgets, waiting=waiting or waits, out=out, guide=guide
    )
    for prompt in prompts:
        prompt.observe(opened, "state")
    if out is not None and ns is not None:
        ns[out] = run  # a later cell reading it sees the run (and its prompt), not a NameError
    return run


def _retrieve(task: asyncio.Task[Any]) -> None:
    # the error belongs to whoever awaits the handle; never an "exception was never
    # retrieved" warning printed into whichever cell runs when the task is collected
    if not task.cancelled():
        task.exception()
