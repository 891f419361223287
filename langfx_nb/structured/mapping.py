"""Mapping: a LangFunc that maps a request to a typed value through a prompt protocol.

Pipeline of one call (each step a hook a subclass may override)::

    render(vars)               user prompt framed by the protocol (instruction, examples,
                               REQUEST, type section, output header)
    transform_input(message)   (LangFunc hook) last edits to the prompt message
    LanguageModel.call         system_message goes as the provider's system role
    transform_output(message)  (LangFunc hook)
    postprocess_response(msg)  the text to parse (default: the message text)
    parse_result(text)         protocol parse + pydantic validation → value
    postprocess_result(value)  final touch on the value

Nothing about one call is stored on the instance, so a ``Mapping`` can serve concurrent
calls. A response that fails to parse is removed from the model's cache so a re-run asks the
model again instead of replaying the bad answer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..errors import MappingError
from ..messages import AIMessage, ComplexMessage, Message, Part, TextPart, UserMessage
from ..modalities import Mime
from ..template import LangFunc, Template, cached_template

if TYPE_CHECKING:
    # pydantic loads on the first structured query, not at ``import langfx_nb``
    from ..llms.base import LanguageModel
    from ..schema import Schema
    from .protocols import Protocol

__all__ = [
    "REPAIR_REQUEST",
    "AttemptHook",
    "Mapping",
    "MappingExample",
    "Repairs",
    "check_repair",
]

#: What the model is told when its answer failed to parse or validate (``{error}`` is the
#: exact error message); the previous answer is the turn just before.
REPAIR_REQUEST = (
    "Your previous answer could not be used:\n{error}\n\n"
    "Answer the same request again, in full, in the required format."
)

AttemptHook = Callable[[int], Callable[[AIMessage[Any] | None, BaseException | None], None]]


def check_repair(repair: Any) -> None:
    """``repair`` is how many re-asks are allowed: a non-negative int."""
    if isinstance(repair, bool) or not isinstance(repair, int) or repair < 0:
        raise ValueError(f"repair must be a non-negative integer, not {repair!r}")


class Repairs:
    """The rules of re-asking after an answer fails to parse (``repair=N``): the one loop
    ``lf.query``, ``lf.query_stream`` and ``lf.Agent(output=...)`` follow.

    Each failed answer is counted (``failed``); while re-asks remain, the model is sent the
    request, its *latest* failed answer and that answer's exact error — never the earlier
    failed answers, so what is sent stays bounded however many attempts fail. When none
    remain, the last error is raised with ``attempts`` holding every attempt's error (when
    ``repair > 0``)."""

    __slots__ = ("failures", "limit", "used")

    def __init__(self, limit: int, used: int = 0) -> None:
        check_repair(limit)
        self.limit = limit
        self.used = used  # failed answers so far (a resumed agent run carries its count)
        self.failures: list[MappingError] = []

    def failed(self, error: MappingError, *, more: bool = True) -> bool:
        """Count a failed answer. True when it may be re-asked (``more=False``: the caller
        has no attempt left for other reasons, e.g. an agent's steps); otherwise False, with
        ``error.attempts`` set when repairs were allowed."""
        self.used += 1
        self.failures.append(error)
        if self.used <= self.limit and more:
            return True
        if self.limit:
            error.attempts = list(self.failures)
        return False

    @staticmethod
    def request(error: MappingError) -> UserMessage:
        """The user turn that asks again, with the exact error."""
        return UserMessage(REPAIR_REQUEST.format(error=error))

    @staticmethod
    def is_request(message: Message[Any]) -> bool:
        """Whether ``message`` is a re-ask this loop wrote (``request``)."""
        return isinstance(message, UserMessage) and message.text.startswith(_REPAIR_PREFIX)

    def reask(self, prompt: Message[Any], answer: str, error: MappingError) -> Message[Any]:
        """The prompt, the latest failed answer and its error: what a re-ask sends."""
        return ComplexMessage([*prompt.turns(), AIMessage(answer), self.request(error)])

    def summary(self) -> list[dict[str, Any]]:
        """The failed attempts as ``message.metadata["repairs"]`` lists them."""
        return [{"error": str(e), "raw": e.raw} for e in self.failures]


_REPAIR_PREFIX = REPAIR_REQUEST.split("{", 1)[0]


@dataclass(frozen=True, eq=False)
class MappingExample:
    """A few-shot example: a request (``input``), the answer (``output``), and optionally the
    answer's schema (default: inferred from ``output``'s class, else the query's schema) and
    a context shown before the request."""

    input: Any
    output: Any
    schema: Any = None
    context: str | None = None


PromptLike = str | Template | Message[Any] | Sequence[Message[Any]]


class Mapping(LangFunc):
    """Prompt protocol + model + parser for one schema. ``call`` returns the response message
    with ``.result`` set to the validated value; ``lf.query`` is the convenience wrapper."""

    __slots__ = (
        "_frame",
        "_message",
        "examples",
        "native_structured_output",
        "protocol",
        "schema",
        "system_message",
    )

    def __init__(
        self,
        prompt: PromptLike,
        schema: Any,
        *,
        lm: LanguageModel | None = None,
        protocol: str | Protocol = "python",
        native_structured_output: bool = False,
        examples: Sequence[MappingExample] | None = None,
        system_message: str | Message[Any] | None = None,
        **bound: Any,
    ) -> None:
        self._message: Message[Any] | None = None
        if isinstance(prompt, str):
            parsed = cached_template(prompt)
            self.text, self._pieces, self.bound = prompt, parsed._pieces, bound
        elif isinstance(prompt, Template):
            self.text, self._pieces = prompt.text, prompt._pieces
            self.bound = {**prompt.bound, **bound} if bound else prompt.bound
        elif isinstance(prompt, Message):
            self.text, self._pieces, self.bound, self._message = "", (), {}, prompt
        elif isinstance(prompt, Sequence) and all(isinstance(m, Message) for m in prompt):
            self.text, self._pieces, self.bound = "", (), {}
            self._message = ComplexMessage(list(cast("Sequence[Message[Any]]", prompt)))
        else:
            raise TypeError(f"a prompt is a str, Template or Message, not {type(prompt).__name__}")
        schema_of, get_protocol = _loaders()
        self.lm = lm
        self.schema = schema_of(schema)
        self.protocol = get_protocol(protocol)
        self.native_structured_output = native_structured_output
        self.examples = tuple(examples) if examples is not None else None
        if self.examples and native_structured_output:
            raise ValueError("examples are not used with native_structured_output=True")
        for ex in self.examples or ():
            if not isinstance(ex, MappingExample):
                raise TypeError(f"examples must be MappingExample, not {type(ex).__name__}")
        self.system_message = system_message
        self._frame: tuple[list[str | Part], str] | None = None

    # -- hooks -----------------------------------------------------------------------------
    def render(  # type: ignore[override]  # a multi-turn prompt renders to a ComplexMessage
        self, vars: AbcMapping[str, Any] | None = None, /, **kwargs: Any
    ) -> Message[Any]:
        """The full prompt: the user's request framed by the protocol."""
        if self._message is not None:
            request: Message[Any] = self._message
        else:
            request = super().render(vars, **kwargs)
        if self.native_structured_output:
            return request
        prefix, suffix = self.frame()
        if isinstance(request, ComplexMessage):
            turns = request.messages
            last = turns[-1]
            framed = type(last)([*prefix, *last.parts, suffix]) if last.role == "user" else None
            if framed is None:
                return ComplexMessage([*turns, UserMessage([*prefix, suffix])])
            return ComplexMessage([*turns[:-1], framed])
        return UserMessage([*prefix, *request.parts, suffix])

    def postprocess_response(self, response: AIMessage[Any]) -> str:
        """The text to parse; override to strip reasoning or pick another part."""
        return response.text

    def parse_result(self, text: str) -> Any:
        """Read the validated value out of ``text``; raise ``MappingError`` when it fails."""
        if self.native_structured_output:
            return _parse_native(text, self.schema)
        return self.protocol.parse(text, self.schema)

    def postprocess_result(self, value: Any) -> Any:
        return value

    # -- the pipeline ----------------------------------------------------------------------
    async def call(
        self,
        vars: AbcMapping[str, Any] | None = None,
        *,
        lm: LanguageModel | None = None,
        repair: int = 0,
        on_attempt: AttemptHook | None = None,
        **options: Any,
    ) -> AIMessage[Any]:
        """Ask the model and parse its answer; with ``repair=N``, re-ask up to N times.

        A re-ask sends the original prompt, the model's previous answer and the exact
        parse/validation error (``repair_prompt``). The answer that parses is returned, with
        ``metadata["repairs"]`` listing the failed attempts; when none parses, the last
        ``MappingError`` is raised with ``attempts`` holding every attempt's error.
        ``on_attempt(n)`` is called as attempt ``n`` starts and returns a function called
        with (response or None, error or None) when it ends (the session traces attempts
        with it).
        """
        check_repair(repair)
        model = self._model(lm)
        prompt = self.prompt(vars)
        if self.system_message is not None and "system_message" not in options:
            options["system_message"] = self.system_message
        if self.native_structured_output:
            options["response_schema"] = native_response_schema(self.schema)
        repairs = Repairs(repair)
        request: Message[Any] = prompt
        number = 0
        while True:
            number += 1
            done = on_attempt(number) if on_attempt is not None else None
            try:
                raw_response = await model.call(request, **options)
            except BaseException as exc:
                if done is not None:
                    done(None, exc)
                raise
            try:
                response = self.finish(raw_response)
            except MappingError as exc:
                await model.forget_cached(raw_response)
                if done is not None:
                    done(raw_response, exc)
                if not repairs.failed(exc):
                    exc.quote_answer()
                    raise
                request = self.repair_prompt(prompt, raw_response, exc)
                continue
            if done is not None:
                done(response, None)
            response.metadata["rendered_prompt"] = prompt.text
            if repairs.failures:
                response.metadata["repairs"] = repairs.summary()
            return response

    def repair_prompt(
        self, prompt: Message[Any], response: AIMessage[Any], error: MappingError
    ) -> Message[Any]:
        """The re-ask after a failed answer: the prompt, that answer, and its exact error."""
        return Repairs(0).reask(prompt, response.text, error)

    def finish(self, response: AIMessage[Any]) -> AIMessage[Any]:
        """Turn a complete model response into the answer message (``.result`` set).

        Runs ``transform_output`` → ``postprocess_response`` → ``parse_result`` →
        ``postprocess_result``; raises ``MappingError``. Shared by ``call`` and
        ``query_stream`` so both end in the same value.
        """
        response = self.transform_output(response)
        text = self.postprocess_response(response)
        response.result = self.postprocess_result(self.parse_result(text))
        meta = response.metadata
        meta["protocol"] = "native" if self.native_structured_output else self.protocol.name
        meta["schema"] = self.schema.name
        meta["raw_response"] = text
        return response

    # -- prompt pieces ---------------------------------------------------------------------
    def frame(self) -> tuple[list[str | Part], str]:
        """(text and parts before the request, text after it); cached per schema+protocol
        when there are no custom examples."""
        if self._frame is not None:
            return self._frame
        if self.examples is None:
            key = ("frame", self.protocol)
            frame = self.schema.memo.get(key)
            if frame is None:
                frame = self.schema.memo[key] = self._build_frame()
        else:
            frame = self._build_frame()
        self._frame = frame
        return frame

    def _build_frame(self) -> tuple[list[str | Part], str]:
        from .protocols import default_example

        p = self.protocol
        prefix: list[str | Part] = [p.instruction(), "\n\n"]
        if self.examples is None:
            question, answer, ex_schema = default_example()
            prefix += [f"{p.request_header}\n{question}\n\n"]
            prefix += [p.type_section(ex_schema), "\n\n", p.answer_section(answer, ex_schema)]
            prefix += ["\n\n"]
        else:
            for ex in self.examples:
                ex_schema = self._example_schema(ex)
                if ex.context:
                    prefix += [f"{p.context_header}\n{ex.context}\n\n"]
                prefix += [f"{p.request_header}\n", *self._example_input(ex.input), "\n\n"]
                prefix += [p.type_section(ex_schema), "\n\n"]
                prefix += [p.answer_section(ex.output, ex_schema), "\n\n"]
        prefix.append(f"{p.request_header}\n")
        suffix = f"\n\n{p.type_section(self.schema)}\n\n{p.output_header()}\n"
        return _merge(prefix), suffix

    def _example_schema(self, ex: MappingExample) -> Schema:
        from ..schema import Schema

        if ex.schema is not None:
            return Schema.of(ex.schema)
        tp = type(ex.output)
        if Schema.of(tp).is_object:
            return Schema.of(tp)
        return self.schema

    def _example_input(self, value: Any) -> list[str | Part]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, Message):
            return list(value.parts)
        if isinstance(value, Mime):
            return [value]
        if isinstance(value, Template):
            return list(value.render().parts)
        from .protocols import to_python_expr

        return [to_python_expr(value)]


@functools.cache
def _loaders() -> tuple[Callable[[Any], Schema], Callable[[str | Protocol], Protocol]]:
    """``Schema.of`` and ``get_protocol``, imported when the first ``Mapping`` is made (they
    load pydantic, which ``import langfx_nb`` does not) and kept: an import statement in a
    function is resolved again each time it runs, for every query."""
    from ..schema import Schema
    from .protocols import get_protocol

    return Schema.of, get_protocol


def _merge(parts: list[str | Part]) -> list[str | Part]:
    out: list[str | Part] = []
    for p in parts:
        if isinstance(p, TextPart):
            p = p.text
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif not (isinstance(p, str) and not p):
            out.append(p)
    return out


def native_response_schema(schema: Schema) -> dict[str, Any]:
    """The JSON schema sent for native structured output. Providers want an object at the
    root, so other types are wrapped as ``{"result": <schema>}`` (and unwrapped on parse)."""
    key = "native_schema"
    cached = schema.memo.get(key)
    if cached is not None:
        return cast("dict[str, Any]", cached)
    js = dict(schema.json_schema())
    if not schema.is_object:
        defs = js.pop("$defs", None)
        js = {"type": "object", "properties": {"result": js}, "required": ["result"]}
        if defs:
            js["$defs"] = defs
    schema.memo[key] = js
    return js


def _parse_native(text: str, schema: Schema) -> Any:
    from .protocols import FAIL, check_size, extract_code_block, get_protocol, loads_or_fail

    check_size(text, text)
    code, _ = extract_code_block(text, ("json",))
    data = loads_or_fail(code)
    if data is FAIL:
        raise MappingError(
            f"native structured output is not valid JSON; expected a value of type {schema.name}",
            raw=text,
            detail="not valid JSON",
        )
    if not schema.is_object:
        if not isinstance(data, dict) or "result" not in data:
            raise MappingError(
                f'native structured output lacks the "result" wrapper around {schema.name}',
                raw=text,
                detail="missing result",
            )
        data = data["result"]
    return get_protocol("json")._validate(data, schema, text)
