"""What the notebook remembers between cells: the default model and the recent runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from ..llms.base import LanguageModel
from ..llms.default import default_lm, set_default_lm

__all__ = [
    "MAX_SESSIONS",
    "NotebookState",
    "export",
    "from_registry",
    "new_session",
    "remember",
    "state",
    "use",
]

MAX_SESSIONS = 20  # the sessions of recent %%lf runs kept for %lf trace


@dataclass
class NotebookState:
    """The sessions of the last runs (newest last), where their traces are exported
    (``lf.nb.export``), and the default model: ``lm`` is the process-wide default of the core
    (``lf.set_default_lm``), so ``%%lf`` cells, ``lf.query``, ``lf.batch`` and ``lf.eval.run``
    share one; ``lm_name`` is what ``%lf use`` was given for it."""

    sessions: list[Any] = field(default_factory=list)
    tracer_provider: Any = None
    capture_content: bool = False
    _named: tuple[LanguageModel, str] | None = None

    @property
    def lm(self) -> LanguageModel | None:
        return default_lm()

    @lm.setter
    def lm(self, lm: LanguageModel | None) -> None:
        set_default_lm(lm)

    @property
    def lm_name(self) -> str | None:
        """The name ``%lf use`` gave the default model (``None`` once another is set)."""
        named = self._named
        return named[1] if named is not None and named[0] is default_lm() else None

    @lm_name.setter
    def lm_name(self, name: str | None) -> None:
        lm = default_lm()
        self._named = None if name is None or lm is None else (lm, name)

    @property
    def last_session(self) -> Any:
        return self.sessions[-1] if self.sessions else None


state = NotebookState()


def use(lm: LanguageModel | str, *, name: str | None = None) -> LanguageModel:
    """Make ``lm`` the notebook's default model: ``%%lf`` cells without ``--lm`` and every
    model call given none (``lf.query``, ``session.query`` in ``lf.batch`` and
    ``lf.eval.run``) use it; it is the core's ``lf.set_default_lm``.

    ``lm`` is a model or a registry id such as ``"fake:echo"``. Returns the model.
    """
    if isinstance(lm, str):
        name, lm = lm, from_registry(lm)
    if not isinstance(lm, LanguageModel):
        raise TypeError(f"use() needs a LanguageModel, not {type(lm).__name__}")
    state.lm = lm
    state.lm_name = name
    return lm


def from_registry(model_id: str) -> LanguageModel:
    """The model a registry id names (``fake:echo``); a ``UsageError`` when it names none."""
    from ..llms.registry import get

    try:
        return get(model_id)
    except ValueError as exc:
        raise UsageError(f"cannot resolve model {model_id!r}: {exc}") from exc


def export(tracer_provider: Any, *, capture_content: bool = False) -> None:
    """Export every later ``%%lf`` run, and runs ``%lf resume`` continues, as OpenTelemetry
    spans to ``tracer_provider`` (``lf.otel``; ``capture_content`` as there). ``None`` stops.
    """
    state.tracer_provider = tracer_provider
    state.capture_content = capture_content


def new_session(lm: LanguageModel | None) -> Any:
    """The session of one ``%%lf`` run: kept for ``%lf trace`` and exported when
    ``lf.nb.export`` named a tracer provider."""
    from ..agentic import Session

    session = remember(Session(lm))
    if state.tracer_provider is not None:
        from ..agentic.otel import export as export_spans

        export_spans(session, state.tracer_provider, capture_content=state.capture_content)
    return session


def remember(session: Any) -> Any:
    """Keep ``session`` for ``%lf trace`` (the last ``MAX_SESSIONS`` runs)."""
    state.sessions.append(session)
    del state.sessions[:-MAX_SESSIONS]
    return session


def in_kernel() -> bool:
    """True inside a notebook's kernel: a Jupyter kernel or a marimo notebook's (not terminal
    IPython, not a plain script), where views show in the running cell."""
    import sys

    from . import marimo_host

    if marimo_host.running():
        return True
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None
