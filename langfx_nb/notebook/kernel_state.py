"""What the notebook remembers between cells: the default model and the recent runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError

from ..llms.base import LanguageModel

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
    """The default model of ``%%lf`` cells, the sessions of the last runs (newest last), and
    where their traces are exported (``lf.nb.export``)."""

    lm: LanguageModel | None = None
    lm_name: str | None = None
    sessions: list[Any] = field(default_factory=list)
    tracer_provider: Any = None
    capture_content: bool = False

    @property
    def last_session(self) -> Any:
        return self.sessions[-1] if self.sessions else None


state = NotebookState()


def use(lm: LanguageModel | str, *, name: str | None = None) -> LanguageModel:
    """Make ``lm`` the model ``%%lf`` cells use when they have no ``--lm``.

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
        raise UsageError(f"cannot resolve model {model_id!r}: {exc}") from None


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
    """True inside a Jupyter kernel (not terminal IPython, not a plain script)."""
    import sys

    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None
