"""The process-wide default model: what a model call uses when it is given none.

``lf.set_default_lm(lm)`` sets it (the notebook's ``%lf use`` and ``lf.nb.use`` call it), and
every place that needs a model and has none reads it: ``lf.query`` and ``lf.query_stream``
without ``lm=``, a ``Session`` (so ``lf.batch`` and ``lf.eval.run`` items calling
``session.query``) or ``lf.Mapping``/``lf.LangFunc`` built without one. An explicit ``lm=``
and a session's own model always come first. It is a plain module global, not a context
variable: it is one setting of this process, shared by every cell and task (it does not
travel to other processes: a Ray worker has its own).
"""

from __future__ import annotations

from .base import LanguageModel

__all__ = ["default_lm", "set_default_lm"]

_default: LanguageModel | None = None


def set_default_lm(lm: LanguageModel | None) -> LanguageModel | None:
    """Make ``lm`` the model of calls given none (``None`` clears it); returns the previous."""
    global _default
    if lm is not None and not isinstance(lm, LanguageModel):
        raise TypeError(f"set_default_lm() needs a LanguageModel, not {type(lm).__name__}")
    previous, _default = _default, lm
    return previous


def default_lm() -> LanguageModel | None:
    """The model set with ``set_default_lm`` (``None`` when none is)."""
    return _default
