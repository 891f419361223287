"""Model calls answered by someone else: the hook a provider batch engine works through.

While a ``Capture`` is set (``capturing``), a model call that misses the LLM cache (or does
not read it: ``capture.reads_cache``) does not send its request: ``LanguageModel.call``
(and ``stream``) hands the built request to ``capture.answer(model, request)`` and
continues with the message it returns exactly as with an online answer (finish-reason
checks, usage, the cache write, kept in ``capture.cache_writes`` when it has one).
``lf.batch`` with ``engine=lf.engines.ProviderBatch()`` sets one per item: first a
collector that reads the cache, keeps the request and raises ``DeferredCall`` (so ``fn``
stops there), then, once the provider's batch has answered, a replayer that returns the
batch's answer and groups the cache writes.
"""

from __future__ import annotations

from contextvars import Token
from types import TracebackType

from .base import CAPTURE, Capture

__all__ = ["Capture", "DeferredCall", "capturing", "current_capture"]


class DeferredCall(BaseException):
    """Raised by a collecting ``Capture`` at a model call: the request was kept for a
    provider batch. A ``BaseException`` so that ``fn``'s own ``except Exception`` does not
    swallow it; only the batch engine catches it."""


def current_capture() -> Capture | None:
    return CAPTURE.get()


class capturing:
    """Model calls in this context (and tasks started in it) go to ``capture``.

    A plain class, not ``contextlib.contextmanager``: a provider batch enters one per item
    twice (collect, replay), and the generator costs 2.7 µs per entry against 0.9 µs."""

    __slots__ = ("_capture", "_token")

    def __init__(self, capture: Capture | None) -> None:
        self._capture = capture
        self._token: Token[Capture | None] | None = None

    def __enter__(self) -> None:
        self._token = CAPTURE.set(self._capture)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            CAPTURE.reset(self._token)
            self._token = None
