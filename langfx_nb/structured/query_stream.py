"""``lf.query_stream``: ``lf.query`` with progress: text deltas, or field events and one outcome.

``query_stream`` is a plain function: it checks everything it can (model given and able to
stream, schema adaptable, prompt renderable, request capabilities) and raises *before* the
first ``await``; it then returns an async generator. Nothing is sent until iteration starts.

Without a schema the generator yields the response text as ``str`` deltas; model errors
raise from the iterator, as with ``lm.stream``.

With a schema it yields field events from the single-pass ``StreamParser`` (paths relative to
the answer, so the JSON protocol's ``{"result": ...}`` wrapper is invisible), tool-call display
events from the model's chunks, and then exactly one terminal event:

* ``GenerationComplete(value, message)``: ``value`` is what ``lf.query`` returns for the same
  response text: the same prompt rendering (``Mapping``) and the same non-streaming protocol
  parser and pydantic validation run once on the complete text. ``message.result`` is set.
* ``ParsingFailed(error, text)``: a ``MappingError``. When the stream parser already failed,
  its error (with position and excerpt) is reported; otherwise the protocol parser's error.
* ``GenerationFailed(error)``: the model or transport raised (usually an ``LMError``).
* ``Cancelled()``: the model run was cancelled by something other than the consumer: the
  model stream raised ``CancelledError`` while the consuming task was not being cancelled
  (for example a request task the model awaits was cancelled by its owner).

The consumer's own cancellation is never an event: when its task is cancelled
(``task.cancel()``, ``asyncio.timeout``, ``asyncio.wait_for``, a ``TaskGroup``), the
``CancelledError`` propagates out of the iterator unchanged, after the upstream is closed, so
``asyncio.timeout`` raises ``TimeoutError`` and ``task.cancelling()`` stays balanced.

Breaking out of the loop early ends the stream without a terminal event; the upstream model
stream is closed in ``finally`` when the generator is closed: immediately with
``contextlib.aclosing(...)``/``await agen.aclose()``, or when the event loop finalizes the
dropped generator. Tool calls are reported, never executed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MappingError, UnsupportedCapabilityError
from ..llms.default import default_lm
from ..messages import AIMessage, Message
from ..template import Template, render_prompt
from .events import (
    Cancelled,
    FieldEvent,
    GenerationComplete,
    GenerationFailed,
    ParsingFailed,
    Repairing,
    StreamEvent,
)
from .mapping import Mapping as _Mapping
from .mapping import Repairs, native_response_schema
from .query import check_schemaless
from .stream_parser import StreamParseError, StreamParser

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from ..llms.streaming import StreamChunk
    from .mapping import AttemptHook
    from .protocols import Protocol

__all__ = ["query_stream"]

_EXCERPT = 24
_STREAM_ONLY = ("emulate", "cache_seed", "use_cache")


def query_stream(
    prompt: str | Template | Message[Any] | Sequence[Message[Any]],
    schema: Any = None,
    *,
    lm: LanguageModel | None = None,
    vars: Mapping[str, Any] | None = None,
    protocol: str | Protocol = "python",
    native_structured_output: bool = False,
    examples: Sequence[Any] | None = None,
    system_message: str | Message[Any] | None = None,
    repair: int = 0,
    on_attempt: AttemptHook | None = None,
    **options: Any,
) -> AsyncGenerator[Any, None]:
    """Stream a query: ``str`` deltas without a schema; field events then one terminal event
    with a schema. Setup errors raise here, before iteration starts.

    ``repair=N`` (schema only): when an answer fails to parse or validate, a ``Repairing``
    event reports it and the model is asked again (previous answer + exact error, as
    ``lf.query`` does), at most N times; the next attempt's field events follow. A final
    ``ParsingFailed`` error carries every attempt's error in ``attempts``. ``on_attempt``
    observes each attempt, as for ``lf.query`` (the session traces attempts with it)."""
    if lm is None:
        lm = default_lm()
    if lm is None:
        raise TypeError("query_stream() needs a model: pass lm=, or set lf.set_default_lm(lm)")
    if not lm.supports_streaming and not options.get("emulate"):
        raise UnsupportedCapabilityError(
            f"{lm.model_id} does not support streaming (pass emulate=True for one final chunk)"
        )
    if schema is None:
        check_schemaless(protocol, native_structured_output, examples, repair)
        message = render_prompt(prompt, vars)
        if system_message is not None:
            options["system_message"] = system_message
        _check_request(lm, message, options)
        return _text_stream(lm, message, options)

    repairs = Repairs(repair)
    mapping = _Mapping(
        prompt,
        schema,
        protocol=protocol,
        native_structured_output=native_structured_output,
        examples=examples,
        system_message=system_message,
    )
    message = mapping.prompt(vars)
    if mapping.system_message is not None and "system_message" not in options:
        options["system_message"] = mapping.system_message
    if native_structured_output:
        options["response_schema"] = native_response_schema(mapping.schema)
        grammar, unwrap = "json", not mapping.schema.is_object
    else:
        grammar = mapping.protocol.name
        if grammar not in ("json", "python"):
            raise ValueError(f"protocol {grammar!r} cannot be streamed")
        unwrap = grammar == "json"
    _check_request(lm, message, options)
    return _event_stream(lm, message, options, mapping, grammar, unwrap, repairs, on_attempt)


def _check_request(lm: LanguageModel, message: Any, options: dict[str, Any]) -> None:
    """Normalize the request and check capabilities now, so misuse fails before iteration."""
    lm.build_request(message, **{k: v for k, v in options.items() if k not in _STREAM_ONLY})


async def _text_stream(
    lm: LanguageModel, message: Any, options: dict[str, Any]
) -> AsyncGenerator[str, None]:
    upstream = lm.stream(message, **options)
    try:
        async for chunk in upstream:
            if chunk.delta:
                yield chunk.delta
    finally:
        await _aclose(upstream)


async def _event_stream(
    lm: LanguageModel,
    message: Any,
    options: dict[str, Any],
    mapping: _Mapping,
    grammar: str,
    unwrap: bool,
    repairs: Repairs,
    on_attempt: AttemptHook | None,
) -> AsyncGenerator[StreamEvent, None]:
    request = message
    number = 0
    while True:  # one pass per attempt: more than one only when repair= re-asks
        number += 1
        done = on_attempt(number) if on_attempt is not None else None
        # Both JSON modes answer with an object ({"result": ...} or the native object schema).
        parser = StreamParser(
            "python" if grammar == "python" else "json", object_root=True, unwrap_result=unwrap
        )
        parse_error: StreamParseError | None = None
        pieces: list[str] = []
        last: StreamChunk | None = None
        upstream = lm.stream(request, **options)
        terminal: StreamEvent
        try:
            try:
                async for chunk in upstream:
                    last = chunk
                    if chunk.events:
                        for tool_event in chunk.events:
                            yield tool_event
                    delta = chunk.delta
                    if not delta:
                        continue
                    pieces.append(delta)
                    if parse_error is not None:
                        continue
                    try:
                        events: list[FieldEvent] = parser.feed(delta)
                    except StreamParseError as exc:
                        parse_error = _with_context(exc, pieces)
                        events = exc.events
                    for ev in events:
                        yield ev
                if parse_error is None:
                    try:
                        events = parser.close()
                    except StreamParseError as exc:
                        parse_error = _with_context(exc, pieces)
                        events = exc.events
                    for ev in events:
                        yield ev
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise  # the consumer's own cancellation: it propagates, as asyncio's does
                terminal = Cancelled()  # the model run was cancelled by someone else
            except Exception as exc:  # the model or transport failed
                terminal = GenerationFailed(exc)
            else:
                terminal = _outcome(mapping, last, "".join(pieces), parse_error)
                if isinstance(terminal, ParsingFailed) and last is not None:
                    await lm.forget_cached(last.aggregated)  # never replay a bad answer
        except BaseException as exc:
            if done is not None:
                done(None, exc)
            raise
        finally:
            await _aclose(upstream)
        if done is not None:
            _attempt_done(done, terminal, "".join(pieces))
        if not isinstance(terminal, ParsingFailed) or not repairs.failed(terminal.error):
            break
        yield Repairing(repairs.used, terminal.error, terminal.text)
        request = repairs.reask(message, terminal.text, terminal.error)
    if isinstance(terminal, ParsingFailed):
        terminal.query_error.quote_answer()  # as lf.query's error quotes it
    yield terminal


def _attempt_done(
    done: Callable[[AIMessage[Any] | None, BaseException | None], None],
    terminal: StreamEvent,
    text: str,
) -> None:
    if isinstance(terminal, GenerationComplete):
        done(terminal.message, None)
    elif isinstance(terminal, ParsingFailed):
        done(AIMessage(text), terminal.error)
    elif isinstance(terminal, GenerationFailed):
        done(None, terminal.error)
    else:
        done(None, asyncio.CancelledError())


def _outcome(
    mapping: _Mapping, last: StreamChunk | None, text: str, parse_error: StreamParseError | None
) -> StreamEvent:
    response: AIMessage[Any] = last.aggregated if last is not None else AIMessage("")
    try:
        response = mapping.finish(response)
    except MappingError as exc:
        if parse_error is None:
            return ParsingFailed(exc, text)
        # the stream parser's error (where the text stopped being a document) is reported;
        # the protocol's (what lf.query raises for this answer) goes with it, with the
        # stream's error as its cause, so a reader can word it as the non-streamed query
        exc.__cause__ = parse_error
        return ParsingFailed(parse_error, text, answer_error=exc)
    return GenerationComplete(response.result, response)


def _with_context(exc: StreamParseError, pieces: list[str]) -> StreamParseError:
    """The parser sees one chunk at a time; rebuild the excerpt from the whole text."""
    text = "".join(pieces)
    pos = min(exc.position, len(text))
    excerpt = text[max(0, pos - _EXCERPT) : pos + _EXCERPT]
    reason = str(exc).split(" at position ")[0]
    better = StreamParseError(reason, position=exc.position, excerpt=excerpt)
    better.events = exc.events
    return better


async def _aclose(agen: AsyncIterator[Any]) -> None:
    aclose = getattr(agen, "aclose", None)
    if aclose is not None:
        await aclose()
