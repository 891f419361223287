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

from collections.abc import Iterator
from contextlib import contextmanager

from .base import CAPTURE, Capture

__all__ = ["Capture", "DeferredCall", "capturing", "current_capture"]


class DeferredCall(BaseException):
    """Raised by a collecting ``Capture`` at a model call: the request was kept for a
    provider batch. A ``BaseException`` so that ``fn``'s own ``except Exception`` does not
    swallow it; only the batch engine catches it."""


def current_capture() -> Capture | None:
    return CAPTURE.get()


@contextmanager
def capturing(capture: Capture | None) -> Iterator[None]:
    """Model calls in this context (and tasks started in it) go to ``capture``."""
    token = CAPTURE.set(capture)
    try:
        yield
    finally:
        CAPTURE.reset(token)
