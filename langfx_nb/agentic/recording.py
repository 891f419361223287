"""RecordingModel: the one way a Session learns what a query sent to its model and got back.

``Session.query`` and ``Session.query_stream`` hand a ``RecordingModel`` wrapping the
session's model to ``lf.query`` / ``lf.query_stream`` and, when the query ends, write its
node from what the wrapper kept (``query_node.record_calls``): the prompt of the first request
as the model received it (rendered), the last response, the usage of every response and the
number of requests. Code that adds its own records (an exporter, an agent loop) reads the
node, or wraps a model the same way; nothing else in the library knows this class.

It is a real ``LanguageModel`` subclass, so ``isinstance`` checks hold without tricks. It adds
no behaviour of its own: requests, streaming, the cache and retries are the wrapped model's.
With a ``budget`` (a ``BudgetMeter``: the session's token/cost budget) each request reserves
what it may spend first, goes out with its ``max_tokens`` capped by what the budget has left,
and is charged its real usage when it comes back (released on an error or a cancellation);
a stream is stopped once its output passes the budget. The cap is ``max_tokens_cap``, which
is not part of the cache key: a stored answer is found, and a fresh one stored, under the
caller's own options whatever the budget has left. A cached answer costs the budget nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ..errors import GenerationError
from ..llms.base import LanguageModel, LMRequest, Prompt
from ..llms.streaming import StreamChunk
from ..messages import AIMessage
from .budget import BudgetMeter, Reservation

__all__ = ["RecordingModel"]


class RecordingModel(LanguageModel):
    """Forwards ``call`` and ``stream`` to ``inner``; keeps ``prompts`` and ``responses``.

    A streamed response is kept when its final chunk arrives; a stream that stops before that
    (an error, a cancellation, the consumer closing it) leaves what had arrived in
    ``partial``, so the trace still shows the text a failed or cancelled stream received.
    An answer the provider sent but that cannot be used (``GenerationError.response``:
    truncated, refused, empty) is kept in ``responses`` too: it was billed.
    The cache is the wrapped model's, so a parse failure that drops a cached answer drops it
    where it lives.
    """

    def __init__(
        self,
        inner: LanguageModel,
        *,
        budget: BudgetMeter | None = None,
    ) -> None:
        # it sends nothing itself (no retry policy or rate limit of its own): it shows the
        # wrapped model's name, sampling and cache
        super().__init__(inner.model, sampling=inner.sampling, cache=inner.cache)
        self.inner = inner
        self.partial: AIMessage[Any] | None = None  # of the last stream, if it stopped early
        self.prompts: list[Prompt] = []
        self.responses: list[AIMessage[Any]] = []
        self._budget = budget

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def supports_streaming(self) -> bool:
        return self.inner.supports_streaming

    def cache_identity(self) -> dict[str, Any]:
        return self.inner.cache_identity()

    def build_request(self, prompt: Prompt, **options: Any) -> LMRequest:
        return self.inner.build_request(prompt, **options)

    async def call(self, prompt: Prompt, **options: Any) -> AIMessage[Any]:
        if self._budget is None:  # the common case, without the reservation's awaits
            self.prompts.append(prompt)
            try:
                answer = await self.inner.call(prompt, **options)
            except GenerationError as exc:
                if exc.response is not None:  # answered, unusable: billed all the same
                    self.responses.append(exc.response)
                raise
            self.responses.append(answer)
            return answer
        reservation, options = await self._reserve(prompt, options)
        self.prompts.append(prompt)
        response: AIMessage[Any] | None = None
        try:
            response = await self.inner.call(prompt, **options)
        except GenerationError as exc:
            response = exc.response  # answered, unusable: charged as any response
            if response is not None:
                self.responses.append(response)
                self._settle(reservation, response)
            raise
        finally:
            if reservation is not None and response is None:
                reservation.release()  # an error or a cancellation: nothing known was spent
        self.responses.append(response)
        self._settle(reservation, response)
        return response

    async def stream(self, prompt: Prompt, **options: Any) -> AsyncIterator[StreamChunk]:
        reservation, options = await self._reserve(prompt, options)
        self.prompts.append(prompt)
        upstream = self._track(self.inner.stream(prompt, **options))
        try:
            async for chunk in upstream:
                if chunk.final:
                    self.responses.append(chunk.aggregated)
                    self._settle(reservation, chunk.aggregated)
                elif reservation is not None:
                    reservation.observe(chunk)  # raises once the output passes the budget
                yield chunk
        except GenerationError as exc:
            if exc.response is not None:  # answered, unusable: billed, and shown whole
                self.partial = None
                self.responses.append(exc.response)
                self._settle(reservation, exc.response)
            raise
        finally:
            if reservation is not None:
                reservation.stopped()  # no-op once settled; else charges what arrived
            await upstream.aclose()  # type: ignore[attr-defined]

    async def _reserve(
        self, prompt: Prompt, options: dict[str, Any]
    ) -> tuple[Reservation | None, dict[str, Any]]:
        """The budget's reservation for this request and the options to send it with
        (``max_tokens`` capped); none for a cached answer, which is only checked."""
        meter = self._budget
        if meter is None:
            return None, options
        if self.inner.cache is not None and await self.inner.cached(prompt, **options):
            meter.check_request()  # a replay: nothing to reserve
            return None, options
        request_options = {k: v for k, v in options.items() if k not in _NOT_SENT}
        reservation = await meter.reserve(self.inner.build_request(prompt, **request_options))
        if reservation.max_tokens is not None:
            caps = (reservation.max_tokens, options.get("max_tokens_cap"))
            options = {**options, "max_tokens_cap": min(c for c in caps if c is not None)}
        return reservation, options

    def _settle(self, reservation: Reservation | None, response: AIMessage[Any]) -> None:
        if reservation is not None:  # a cached answer (no reservation) costs nothing
            reservation.settle(response)

    async def _track(self, upstream: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
        """``upstream``'s chunks; sets ``partial`` if it stops before its final chunk."""
        last: StreamChunk | None = None
        try:
            async for chunk in upstream:
                last = chunk
                yield chunk
        finally:
            self.partial = last.aggregated if last is not None and not last.final else None
            await upstream.aclose()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return repr(self.inner)


#: Options that steer the call (cache, stream emulation) rather than the request itself.
_NOT_SENT = frozenset({"cache_seed", "use_cache", "emulate", "max_tokens_cap"})
