"""What a running batch reports: frozen ``BatchProgress`` snapshots, and who receives them.

A batch hands snapshots to a *reporter*: ``update(progress)`` at most about four times a
second while it runs (never once per item), then ``close(progress)`` exactly once with the
final counts (``progress.finished`` is then True), also when the batch fails or is
cancelled. A snapshot is immutable and holds plain values only, so a reporter may keep it,
send it to another thread or serialise it (``to_json``).

``lf.batch(progress=...)`` chooses the reporter:

- ``None`` (automatic): the factory registered with ``set_default_reporter`` (the notebook
  layer registers one when it is loaded, showing a live widget), if it returns a reporter;
  otherwise, when stderr is a terminal, a text bar (tqdm when installed, else one line
  rewritten on stderr); otherwise none.
- ``False``: none.
- an object with ``update`` and ``close``: used as given.
- a callable: called with every snapshot, the final one included (``finished`` True).

This module is part of the core: it never imports the notebook layer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

from ..agentic.usage import cost_label
from ..messages import Usage

if TYPE_CHECKING:
    from ..agentic.session import Session

__all__ = [
    "MAX_GROUP_ITEMS",
    "UPDATE_INTERVAL_S",
    "BatchProgress",
    "ErrorGroup",
    "Reporter",
    "ReporterFactory",
    "check_progress",
    "default_reporter",
    "provider_lines",
    "resolve_reporter",
    "set_default_reporter",
    "stopped_note",
]

#: Seconds between two ``update`` calls at most (about four a second).
UPDATE_INTERVAL_S = 0.25
#: How many item indices (and node ids) an ``ErrorGroup`` keeps.
MAX_GROUP_ITEMS = 20


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """The items that failed with one exception class.

    ``count`` is exact; ``items`` holds the input indices of the first ``MAX_GROUP_ITEMS``
    of them in input order (whatever order they failed in), ``first_message`` the message
    of the first of them, ``node_ids`` their ``item`` trace nodes (same order, ``None`` for
    an item whose node is unknown), so a viewer can open their traces with
    ``session.find(node_id)`` while the session still holds them.
    """

    type: str
    count: int
    first_message: str
    items: tuple[int, ...]
    node_ids: tuple[str | None, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "count": self.count,
            "first_message": self.first_message,
            "items": list(self.items),
            "node_ids": list(self.node_ids),
        }


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """One moment of a batch. Counts are exact; ``done + failed + running + left == total``.

    - ``done``: items finished with a result, including ``resumed`` ones (done in an earlier
      run of the same ``run=`` manifest, so nothing was sent for them now).
    - ``failed``: items whose ``fn`` raised (or that were cancelled); ``errors`` groups them
      by exception class, largest group first. ``cancelled``: of these, the items stopped in
      flight by the batch's end (a cancellation, ``on_error="raise"``): they have no error.
    - ``running``: started, not finished. ``left``: not started yet.
    - ``elapsed_s``: wall time since the batch started. ``items_per_s`` and
      ``tokens_per_s`` count only what this run did (resumed items excluded); ``eta_s`` is
      ``left + running`` items at that rate (``None`` until an item has finished).
    - ``requests``, ``usage``: model requests made through the items' sessions and their
      token counts (``None`` counts are unknown, never guessed). ``cost``: in the
      session's price currency, ``None`` when no model used had a price (never 0 for
      unpriced usage); ``unpriced_models`` lists the models it leaves out and
      ``unpriced_requests`` counts their requests (``cost_text`` labels a partial sum).
    - ``batch_node_id``: the ``batch`` trace node; ``session_id``: its session.
    - ``provider``: with ``engine=lf.engines.ProviderBatch()``, the provider's own counts
      over the batches it runs (``batches``, of them ``resumed_batches`` found in the run
      manifest (submitted by an earlier process), ``total``, ``succeeded``, ``errored``,
      ``expired``, ``canceled``, ``processing``, ``resubmitted``), ``status``
      (``collecting``, ``submitting``, ``waiting``, ``collected``) and ``per_batch``: each
      submitted batch's last poll (``id``, ``provider``, the provider's ``status``,
      ``total`` and the same counts); ``provider_lines`` words them. ``None`` otherwise.
    - ``finished``: True only in the snapshot given to ``close``.
    - ``run``: the run manifest's path (``run=``), else ``None``.
    """

    total: int
    done: int = 0
    failed: int = 0
    running: int = 0
    left: int = 0
    resumed: int = 0
    cancelled: int = 0
    elapsed_s: float = 0.0
    items_per_s: float = 0.0
    tokens_per_s: float = 0.0
    eta_s: float | None = None
    requests: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    unpriced_models: tuple[str, ...] = ()
    unpriced_requests: int = 0
    errors: tuple[ErrorGroup, ...] = ()
    finished: bool = False
    batch_node_id: str | None = None
    session_id: str | None = None
    name: str = "batch"
    provider: Mapping[str, Any] | None = None
    run: str | None = None

    @property
    def settled(self) -> int:
        """Items finished either way (``done + failed``)."""
        return self.done + self.failed

    @property
    def fraction(self) -> float:
        """Share of items settled, 0.0 to 1.0 (1.0 for an empty batch)."""
        return 1.0 if not self.total else self.settled / self.total

    @property
    def cost_text(self) -> str:
        """The cost as a reader should see it (``cost_label``): ``$1.23``, ``≥ $1.23 (3
        calls unpriced: fake:b)`` when some requests had no price, ``cost unknown`` when
        none had one."""
        return cost_label(self.cost, self.unpriced_requests, self.unpriced_models)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (what a widget or a saved notebook keeps)."""
        return {
            "name": self.name,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "running": self.running,
            "left": self.left,
            "resumed": self.resumed,
            "cancelled": self.cancelled,
            "elapsed_s": self.elapsed_s,
            "items_per_s": self.items_per_s,
            "tokens_per_s": self.tokens_per_s,
            "eta_s": self.eta_s,
            "requests": self.requests,
            "usage": self.usage.to_json(),
            "cost": self.cost,
            "unpriced_models": list(self.unpriced_models),
            "unpriced_requests": self.unpriced_requests,
            "errors": [g.to_json() for g in self.errors],
            "finished": self.finished,
            "batch_node_id": self.batch_node_id,
            "session_id": self.session_id,
            "provider": None if self.provider is None else dict(self.provider),
            "run": self.run,
        }

    def line(self) -> str:
        """A one-line text summary (the plain terminal bar, logs)."""
        parts = [f"{self.name}: {self.settled}/{self.total}"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.running:
            parts.append(f"{self.running} running")
        parts.append(f"{self.items_per_s:.1f} items/s")
        if self.tokens_per_s:
            parts.append(f"{self.tokens_per_s:.0f} tok/s")
        if self.eta_s is not None and not self.finished:
            parts.append(f"ETA {_duration(self.eta_s)}")
        if self.provider is not None:
            parts.append(provider_lines(self.provider)[0])
        if self.cost is not None or self.requests:
            parts.append(self.cost_text)
        if self.finished:
            parts.append(f"in {_duration(self.elapsed_s)}")
        return " · ".join(parts)


@runtime_checkable
class Reporter(Protocol):
    """Receives a batch's snapshots: ``update`` while it runs, ``close`` once at the end.

    Both are called on the event loop's thread and must return quickly; what they raise
    is ignored (a broken progress view never stops a batch).
    """

    def update(self, progress: BatchProgress) -> None: ...

    def close(self, progress: BatchProgress) -> None: ...


#: Makes the reporter of one batch from its session and first snapshot, or returns None to
#: leave the choice to the next fallback (the terminal bar).
ReporterFactory = Callable[["Session", BatchProgress], "Reporter | None"]

_default_factory: ReporterFactory | None = None


def set_default_reporter(factory: ReporterFactory | None) -> ReporterFactory | None:
    """Register the factory ``progress=None`` uses first (None removes it); returns the
    previous one. The notebook layer calls this when it is loaded."""
    global _default_factory
    previous, _default_factory = _default_factory, factory
    return previous


def default_reporter() -> ReporterFactory | None:
    """The factory registered with ``set_default_reporter`` (None when there is none)."""
    return _default_factory


class _CallableReporter:
    """A plain callable as a reporter: called with every snapshot, the last one included."""

    def __init__(self, fn: Callable[[BatchProgress], Any]) -> None:
        self._fn = fn

    def update(self, progress: BatchProgress) -> None:
        self._fn(progress)

    def close(self, progress: BatchProgress) -> None:
        self._fn(progress)


class TextReporter:
    """One line on ``stream`` (stderr), rewritten in place; a final line at ``close``."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._width = 0

    def _write(self, text: str, end: str) -> None:
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self._stream.write("\r" + text + " " * pad + end)
        self._stream.flush()

    def update(self, progress: BatchProgress) -> None:
        self._write(progress.line(), "")

    def close(self, progress: BatchProgress) -> None:
        self._write(progress.line(), "\n")
        note = stopped_note(progress.to_json())
        if note:
            self._stream.write(note + "\n")
            self._stream.flush()


class TqdmReporter:
    """A tqdm bar (tqdm is optional: only used when it is installed)."""

    def __init__(self, first: BatchProgress) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=first.total, desc=first.name, unit="item", initial=first.settled)
        self._shown = first.settled

    def _show(self, progress: BatchProgress) -> None:
        self._bar.update(progress.settled - self._shown)
        self._shown = progress.settled
        postfix: dict[str, Any] = {"failed": progress.failed}
        if progress.tokens_per_s:
            postfix["tok/s"] = f"{progress.tokens_per_s:.0f}"
        if progress.cost is not None:
            postfix["cost"] = f"{progress.cost:.4f}"
        self._bar.set_postfix(postfix, refresh=False)

    def update(self, progress: BatchProgress) -> None:
        self._show(progress)

    def close(self, progress: BatchProgress) -> None:
        self._show(progress)
        self._bar.close()


def terminal_reporter(first: BatchProgress) -> Reporter | None:
    """The text bar when stderr is a terminal: tqdm if installed, else ``TextReporter``."""
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is None or not isatty():
        return None
    try:
        return TqdmReporter(first)
    except ImportError:
        return TextReporter()


def resolve_reporter(progress: Any, session: Session, first: BatchProgress) -> Reporter | None:
    """The reporter ``lf.batch(progress=...)`` uses (see the module docstring)."""
    if progress is False:
        return None
    if progress is None or progress is True:
        factory = _default_factory
        if factory is not None:
            try:
                made = factory(session, first)
            except Exception:  # a broken view must not stop the batch
                made = None
            if made is not None:
                return made
        return terminal_reporter(first)
    check_progress(progress)
    if isinstance(progress, Reporter):
        return progress
    return _CallableReporter(progress)


def check_progress(progress: Any) -> None:
    """Refuse a ``progress=`` that ``resolve_reporter`` cannot use (``TypeError``): the
    runner calls it before anything is made, so a typo leaves no run manifest behind."""
    if progress is None or isinstance(progress, (bool, Reporter)):
        return
    if not callable(progress):
        raise TypeError(
            "progress must be None (automatic), False, a reporter with update() and close(), "
            f"or a callable of a BatchProgress, not {type(progress).__name__}"
        )


def _provider_counts(counts: Mapping[str, Any]) -> str:
    def n(key: str) -> int:
        value = counts.get(key)
        return value if isinstance(value, int) else 0

    text = f"{n('succeeded'):,} / {n('total'):,} completed, {n('errored'):,} failed"
    for key in ("expired", "canceled"):
        if n(key):
            text += f", {n(key):,} {key}"
    return text


def provider_lines(provider: Mapping[str, Any]) -> list[str]:
    """A provider batch's counts in words: first the run's (``provider waiting: 41,200 /
    50,000 completed, 12 failed in 1 batch``), then one line per submitted batch
    (``<provider> batch_1: 41,200 / 50,000 completed, 12 failed (in_progress)``)."""
    batches = provider.get("batches")
    count = batches if isinstance(batches, int) else 0
    status = str(provider.get("status") or "")
    head = f"provider {status}: " + _provider_counts(provider)
    head += f" in {count:,} batch{'' if count == 1 else 'es'}"
    resumed = provider.get("resumed_batches")
    if isinstance(resumed, int) and resumed:
        head += f" ({resumed:,} resumed from the run manifest)"
    resubmitted = provider.get("resubmitted")
    if isinstance(resubmitted, int) and resubmitted:
        head += f" ({resubmitted:,} resubmitted)"
    lines = [head]
    for one in provider.get("per_batch") or ():
        if isinstance(one, Mapping):
            lines.append(
                f"{one.get('provider', '')} {one.get('id', '')}: {_provider_counts(one)}"
                f" ({one.get('status', '')})"
            )
    return lines


def stopped_note(progress: Mapping[str, Any]) -> str:
    """What a batch that stopped before every item settled (cancelled, interrupted,
    ``on_error="raise"``) says about its results, from a snapshot's JSON: how many items
    finished, and that without ``run=`` they are lost (``lf.batch`` raises instead of
    returning them) or where they are kept. ``""`` for a batch still running or complete."""
    total = int(progress.get("total") or 0)
    settled = int(progress.get("done") or 0) + int(progress.get("failed") or 0)
    settled -= int(progress.get("cancelled") or 0)  # stopped in flight: not finished
    if not progress.get("finished") or settled >= total:
        return ""
    what = f"stopped with {settled:,} of {total:,} items finished ({total - settled:,} not run)"
    run = progress.get("run")
    if run:
        return f"{what}; the finished results are kept in {run}: run it again to resume"
    return f"{what}; without run= their results are lost (pass run='name' to keep them)"


def group_errors(groups: Mapping[str, list[Any]]) -> tuple[ErrorGroup, ...]:
    """``ErrorGroup``s from ``{type: [count, first_message, indices, node_ids]}``,
    largest first."""
    out = [ErrorGroup(name, g[0], g[1], tuple(g[2]), tuple(g[3])) for name, g in groups.items()]
    out.sort(key=lambda g: (-g.count, g.type))
    return tuple(out)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
