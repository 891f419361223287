"""RecordingModel: the one way a Session learns what a query sent to its model and got back.

``Session.query`` and ``Session.query_stream`` hand a ``RecordingModel`` wrapping the
session's model to ``lf.query`` / ``lf.query_stream`` and, when the query ends, write its
node from what the wrapper kept (``query_node.record_calls``): the prompt of the first request
as the model received it (rendered), the last response, the usage of every response and the
number of requests. Code that adds its own records (an exporter, an agent loop) reads the
node, or wraps a model the same way; nothing else in the library knows this class.

It is a real ``LanguageModel`` subclass, so ``isinstance`` checks hold without tricks. It adds
no behaviour: requests, streaming, the cache and retries are the wrapped model's. Optional
``before``/``after`` hooks run around each request (the session's token/cost budget).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ..llms.base import LanguageModel, LMRequest, Prompt
from ..llms.streaming import StreamChunk
from ..messages import AIMessage

__all__ = ["RecordingModel"]


class RecordingModel(LanguageModel):
    """Forwards ``call`` and ``stream`` to ``inner``; keeps ``prompts`` and ``responses``.

    A streamed response is kept when its final chunk arrives; a stream that stops before that
    (an error, a cancellation, the consumer closing it) leaves what had arrived in
    ``partial``, so the trace still shows the text a failed or cancelled stream received.
    The cache is the wrapped model's, so a parse failure that drops a cached answer drops it
    where it lives.
    """

    def __init__(
        self,
        inner: LanguageModel,
        *,
        before: Callable[[], None] | None = None,
        after: Callable[[AIMessage[Any]], None] | None = None,
    ) -> None:
        super().__init__(inner.model, sampling=inner.sampling, cache=inner.cache)
        self.inner = inner
        self.partial: AIMessage[Any] | None = None  # of the last stream, if it stopped early
        self.prompts: list[Prompt] = []
        self.responses: list[AIMessage[Any]] = []
        self._before = before  # e.g. a budget check: may raise to stop the request
        self._after = after  # e.g. a budget charge: may raise after the response

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
        if self._before is not None:
            self._before()
        self.prompts.append(prompt)
        response = await self.inner.call(prompt, **options)
        self.responses.append(response)
        if self._after is not None:
            self._after(response)
        return response

    async def stream(self, prompt: Prompt, **options: Any) -> AsyncIterator[StreamChunk]:
        if self._before is not None:
            self._before()
        self.prompts.append(prompt)
        upstream = self._track(self.inner.stream(prompt, **options))
        try:
            async for chunk in upstream:
                if chunk.final:
                    self.responses.append(chunk.aggregated)
                    if self._after is not None:
                        self._after(chunk.aggregated)
                yield chunk
        finally:
            await upstream.aclose()  # type: ignore[attr-defined]

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
