"""Fake models shipped with the library: for tests, notebooks and offline work.

They are real ``LanguageModel`` subclasses (options, cache, retries, streaming all apply), so
code written against them runs unchanged against a provider. Usage is reported as
whitespace-separated word counts, so traces show numbers, and ``max_tokens`` is honoured as
a provider does: an answer longer than that many words is cut there (``finish_reason``
``"length"``). A scripted message that brings its own ``usage`` is sent as it is.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidRequestError, LMError
from ..messages import AIMessage, Message, Provenance, TextPart, ToolCall, Usage
from .base import Capabilities, LanguageModel, LMRequest
from .streaming import StreamAccumulator, StreamChunk, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = ["Echo", "Fake", "Scripted", "StaticMapping", "StaticResponse", "StaticSequence"]

Step = str | Message[Any] | ToolCall | Sequence[str | ToolCall] | BaseException
StepFn = Callable[[LMRequest], Step]


class Fake(LanguageModel):
    """Common base: subclasses say what to answer in ``respond``; this class streams it.

    ``chunk_size`` splits streamed text into pieces of that many characters; ``delay`` sleeps
    between chunks (seconds) so live views have something to show.
    """

    provider = "fake"
    capabilities = Capabilities(
        modalities=frozenset({"image", "audio", "video", "pdf", "mime"}),
        tools=True,
        native_schema=True,
    )

    def __init__(
        self, model: str | None = None, *, chunk_size: int = 8, delay: float = 0.0, **kw: Any
    ) -> None:
        super().__init__(model or type(self).__name__.lower(), **kw)
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.chunk_size = chunk_size
        self.delay = delay

    def respond(self, request: LMRequest) -> Step:
        raise NotImplementedError

    def _response(self, request: LMRequest) -> AIMessage[Any]:
        step = self.respond(request)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, Message):
            msg: AIMessage[Any] = AIMessage(step.parts, metadata=step.metadata, usage=step.usage)
        elif isinstance(step, (str, ToolCall)):
            msg = AIMessage([step])
        else:
            msg = AIMessage(list(step))
        if msg.usage is None:
            limit = request.options.max_tokens
            if limit is not None and _cut_words(msg, limit):
                msg.metadata["finish_reason"] = "length"
            msg.usage = _word_usage(request, msg)
        msg.provenance = Provenance(model=self.model_id)
        msg.metadata.setdefault("finish_reason", "tool_calls" if msg.tool_calls else "stop")
        return msg

    async def _sample(self, request: LMRequest) -> AIMessage[Any]:
        if self.delay:
            await asyncio.sleep(self.delay)
        return self._response(request)

    async def _stream(self, request: LMRequest) -> AsyncGenerator[StreamChunk, None]:
        msg = self._response(request)
        acc = StreamAccumulator(self.model_id)
        size = self.chunk_size
        for part in msg.parts:
            if isinstance(part, ToolCall):
                args = json.dumps(part.args)
                yield acc.events(ToolCallStart(part.id, part.name))
                for i in range(0, len(args), size):
                    yield acc.events(ToolCallDelta(part.id, args[i : i + size]))
                yield acc.events(ToolCallEnd(part))
            elif isinstance(part, TextPart):  # reasoning has text too, but is not the answer
                text = part.text
                for i in range(0, len(text), size):
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    yield acc.text(text[i : i + size])
            else:
                acc.add_part(part)
        yield acc.finish(usage=msg.usage, finish_reason=msg.metadata.get("finish_reason"))


class Echo(Fake):
    """Answers with the text of the last prompt turn."""

    def respond(self, request: LMRequest) -> Step:
        return request.messages[-1].text


class StaticResponse(Fake):
    """Always gives the same answer."""

    def __init__(self, response: str | Message[Any], **kw: Any) -> None:
        super().__init__(**kw)
        self.response = response

    def respond(self, request: LMRequest) -> Step:
        return self.response

    def cache_identity(self) -> dict[str, Any]:
        text = self.response if isinstance(self.response, str) else self.response.to_json()
        return {**super().cache_identity(), "response": text}


class StaticMapping(Fake):
    """Answers by looking up the last prompt turn's text; an unknown prompt is an error."""

    def __init__(self, mapping: Mapping[str, str | Message[Any]], **kw: Any) -> None:
        super().__init__(**kw)
        self.mapping = dict(mapping)

    def respond(self, request: LMRequest) -> Step:
        text = request.messages[-1].text
        if text not in self.mapping:
            raise InvalidRequestError(f"StaticMapping has no response for prompt {text[:80]!r}")
        return self.mapping[text]


class StaticSequence(Fake):
    """Gives its responses in order, one per request; running out is an error."""

    def __init__(self, responses: Iterable[str | Message[Any]], **kw: Any) -> None:
        super().__init__(**kw)
        self.responses = list(responses)
        self._next = 0

    def respond(self, request: LMRequest) -> Step:
        if self._next >= len(self.responses):
            raise LMError(f"StaticSequence ran out after {len(self.responses)} responses")
        self._next += 1
        return self.responses[self._next - 1]


class Scripted(Fake):
    """Plays a script of steps: text, tool calls, messages, errors to raise, or functions of
    the request that return one of those. Records every request it saw in ``requests``.

    ``Scripted(["thinking...", lf.ToolCall("c1", "add", {"a": 1, "b": 2}), "The sum is 3."])``
    makes a three-request agent run.
    """

    def __init__(self, steps: Iterable[Step | StepFn], *, loop: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.steps = list(steps)
        self.loop = loop
        self.requests: list[LMRequest] = []

    def respond(self, request: LMRequest) -> Step:
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.steps):
            if not self.loop or not self.steps:
                raise LMError(f"Scripted model ran out after {len(self.steps)} steps")
            index %= len(self.steps)
        step = self.steps[index]
        return step(request) if callable(step) else step


def _word_usage(request: LMRequest, response: Message[Any]) -> Usage:
    prompt = sum(len(m.text.split()) for m in request.messages) + len(
        (request.system or "").split()
    )
    completion = len(response.text.split()) + sum(
        len(json.dumps(c.args).split()) for c in response.tool_calls
    )
    return Usage(prompt, completion, prompt + completion)


def _cut_words(msg: Message[Any], limit: int) -> bool:
    """Cut ``msg``'s text after ``limit`` words (tool-call arguments count first); whether
    anything was cut."""
    left = limit - sum(len(json.dumps(c.args).split()) for c in msg.tool_calls)
    cut = False
    parts: list[Any] = []
    for part in msg.parts:
        if isinstance(part, TextPart):
            words = list(re.finditer(r"\S+", part.text))
            if len(words) > max(left, 0):
                cut = True
                part = TextPart(part.text[: words[left - 1].end()] if left > 0 else "")
            left -= len(words)
        parts.append(part)
    msg.parts = parts
    return cut
