"""Template ({{var}} substitution, not Jinja) and LangFunc (prompt → model → transform).

A template is parsed once, at construction, into literal pieces and variable paths; rendering
only walks that list, so a template reused across many calls costs a dict merge and a join.

Syntax: ``{{name}}``, ``{{a.b}}`` (attribute or dict key), ``{{items[0]}}``, ``{{d['k']}}``,
with optional whitespace inside the braces. Single braces are plain text. There are no
filters, loops or expressions on purpose: a prompt is data, not a program. Interpolated
``Template`` values are rendered with the same variables; ``Message`` and modality values keep
their parts (an image stays an image part instead of becoming text).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .errors import TemplateError
from .llms.default import default_lm
from .messages import Message, Part, TextPart, UserMessage
from .modalities import Mime

if TYPE_CHECKING:
    from .llms.base import LanguageModel
    from .llms.streaming import StreamChunk
    from .messages import AIMessage

__all__ = ["LangFunc", "Template"]

_TURN_ONLY = frozenset({"continuation", "reasoning"})  # parts a quoted message leaves behind
_MAX_DEPTH = 32  # nested template interpolation; a cycle would otherwise recurse forever

_EXPR = re.compile(
    r"[A-Za-z_]\w*"
    r"(?:\.[A-Za-z_]\w*|\[\s*-?\d+\s*\]|\[\s*'[^'\]]*'\s*\]|\[\s*\"[^\"\]]*\"\s*\])*"
)
_STEP = re.compile(
    r"\.([A-Za-z_]\w*)|\[\s*(-?\d+)\s*\]|\[\s*'([^'\]]*)'\s*\]|\[\s*\"([^\"\]]*)\"\s*\]"
)


class _Var:
    """One ``{{path}}`` occurrence: the root name plus attribute/key/index steps."""

    __slots__ = ("expr", "name", "steps")

    def __init__(self, expr: str, name: str, steps: tuple[str | int, ...]) -> None:
        self.expr = expr
        self.name = name
        self.steps = steps


def _position(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {col} (offset {offset})"


def _parse(text: str) -> tuple[str | _Var, ...]:
    pieces: list[str | _Var] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise TemplateError(f"unclosed '{{{{' at {_position(text, start)}")
        if start > pos:
            pieces.append(text[pos:start])
        expr = text[start + 2 : end].strip()
        if not expr or _EXPR.fullmatch(expr) is None:
            raise TemplateError(
                f"invalid template variable {expr!r} at {_position(text, start)}: expected "
                "a name, a.b, items[0] or d['key'] (no expressions or filters)"
            )
        head = re.match(r"[A-Za-z_]\w*", expr)
        assert head is not None
        steps: list[str | int] = []
        for m in _STEP.finditer(expr, head.end()):
            attr, index, key1, key2 = m.groups()
            if attr is not None:
                if attr.startswith("__"):
                    raise TemplateError(
                        f"template variable {expr!r} at {_position(text, start)} "
                        "uses a dunder attribute, which is not allowed"
                    )
                steps.append(attr)
            elif index is not None:
                steps.append(int(index))
            else:
                steps.append("\0" + (key1 if key1 is not None else key2))  # marks a dict key
        pieces.append(_Var(expr, head.group(), tuple(steps)))
        pos = end + 2
    if pos < len(text):
        pieces.append(text[pos:])
    return tuple(pieces)


def _resolve(var: _Var, values: Mapping[str, Any]) -> Any:
    try:
        value = values[var.name]
    except KeyError:
        raise TemplateError(f"missing template variable {var.name!r}") from None
    for step in var.steps:
        try:
            if isinstance(step, int):
                value = value[step]
            elif step.startswith("\0"):
                value = value[step[1:]]
            elif isinstance(value, Mapping) and step in value:
                value = value[step]
            else:
                value = getattr(value, step)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise TemplateError(
                f"missing template variable {var.expr!r}: {type(value).__name__} has no "
                f"{_step_text(step)} ({type(exc).__name__})"
            ) from None
    return value


def _step_text(step: str | int) -> str:
    if isinstance(step, int):
        return f"[{step}]"
    return f"[{step[1:]!r}]" if step.startswith("\0") else f".{step}"


class Template:
    """A prompt with ``{{variables}}``; ``render(**vars)`` returns a ``UserMessage``.

    Bound values given at construction are defaults; values passed to ``render`` override
    them for that call only (the template itself never changes).
    """

    __slots__ = ("_pieces", "bound", "text")

    def __init__(self, text: str, /, **bound: Any) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a template is built from a str, not {type(text).__name__}")
        self.text = text
        self.bound: dict[str, Any] = bound
        self._pieces = _parse(text)

    @classmethod
    def from_raw_str(cls, text: str, /) -> Template:
        """A template that renders ``text`` literally: braces are not interpreted."""
        t = cls.__new__(cls)
        t.text = text
        t.bound = {}
        t._pieces = (text,) if text else ()
        return t

    @property
    def variables(self) -> frozenset[str]:
        """Root names this template reads (nested templates' names not included)."""
        return frozenset(p.name for p in self._pieces if isinstance(p, _Var))

    def render(self, vars: Mapping[str, Any] | None = None, /, **kwargs: Any) -> UserMessage[Any]:
        """Substitute variables: bound defaults < ``vars`` < keyword arguments."""
        values = self._values(vars, kwargs)
        pieces = self._pieces
        if len(pieces) == 1 and isinstance(pieces[0], str):
            return UserMessage(pieces[0])
        return UserMessage(self._render_parts(values, 0))

    def _values(self, vars: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        values = dict(self.bound)
        if vars:
            values.update(vars)
        if kwargs:
            values.update(kwargs)
        return values

    def _render_parts(self, values: Mapping[str, Any], depth: int) -> list[str | Part]:
        if depth > _MAX_DEPTH:
            raise TemplateError(
                f"templates nested more than {_MAX_DEPTH} deep "
                "(is a template interpolating itself?)"
            )
        out: list[str | Part] = []
        for piece in self._pieces:
            if isinstance(piece, str):
                out.append(piece)
                continue
            value = _resolve(piece, values)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, Template):
                # The inner template's own bindings win for its names; the caller's variables
                # fill in the rest, so a bound sub-template is a closed unit.
                inner = {**values, **value.bound} if value.bound else values
                out.extend(value._render_parts(inner, depth + 1))
            elif isinstance(value, Message):
                # a quoted answer brings its content, not the reasoning or provider state
                # that belong to the turn that produced it (no user turn can carry them)
                out.extend(p for p in value.parts if p.kind not in _TURN_ONLY)
            elif isinstance(value, (Mime, TextPart)):
                out.append(value)
            else:
                out.append(str(value))
        return out

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"{type(self).__name__}({text!r})"

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and isinstance(other, Template)
            and self.text == other.text
            and self._pieces_key() == other._pieces_key()
            and self.bound == other.bound
        )

    def _pieces_key(self) -> tuple[Any, ...]:
        return tuple(p if isinstance(p, str) else ("var", p.expr) for p in self._pieces)

    __hash__ = None  # type: ignore[assignment]


class LangFunc(Template):
    """A template bound to a model: render → ``transform_input`` → model → ``transform_output``.

    Override the two hooks in a subclass. Nothing per call is stored on the instance, so one
    ``LangFunc`` may be awaited from many tasks at once.
    """

    __slots__ = ("lm",)

    def __init__(self, text: str, /, lm: LanguageModel | None = None, **bound: Any) -> None:
        super().__init__(text, **bound)
        self.lm = lm

    def transform_input(self, message: Message[Any]) -> Message[Any]:
        """Adjust the rendered prompt before it is sent (default: unchanged)."""
        return message

    def transform_output(self, message: AIMessage[Any]) -> AIMessage[Any]:
        """Adjust the model's response before it is returned (default: unchanged)."""
        return message

    def _model(self, lm: LanguageModel | None) -> LanguageModel:
        model = lm if lm is not None else self.lm if self.lm is not None else default_lm()
        if model is None:
            raise TypeError(
                f"{type(self).__name__} needs a model: pass lm= here or at construction, "
                "or set a default with lf.set_default_lm(lm)"
            )
        return model

    def prompt(self, vars: Mapping[str, Any] | None = None) -> Message[Any]:
        """The message that would be sent for these variables (rendered and transformed)."""
        return self.transform_input(self.render(vars))

    async def call(
        self,
        vars: Mapping[str, Any] | None = None,
        *,
        lm: LanguageModel | None = None,
        **options: Any,
    ) -> AIMessage[Any]:
        """Render with ``vars``, send to ``lm`` (or the bound model), return the response."""
        model = self._model(lm)
        response = await model.call(self.prompt(vars), **options)
        return self.transform_output(response)

    async def stream(
        self,
        vars: Mapping[str, Any] | None = None,
        *,
        lm: LanguageModel | None = None,
        **options: Any,
    ) -> AsyncIterator[StreamChunk]:
        """Render with ``vars`` and yield the model's stream chunks as they arrive."""
        model = self._model(lm)
        agen = model.stream(self.prompt(vars), **options)
        try:
            async for chunk in agen:
                yield chunk
        finally:
            await agen.aclose()  # type: ignore[attr-defined]


def render_prompt(
    prompt: str | Template | Message[Any] | Sequence[Message[Any]],
    vars: Mapping[str, Any] | None,
) -> Message[Any] | Sequence[Message[Any]]:
    """Turn a query prompt into what a model is sent: str/Template rendered, messages as is."""
    if isinstance(prompt, str):
        return cached_template(prompt).render(vars)
    if isinstance(prompt, Template):
        return prompt.render(vars)
    if isinstance(prompt, Message):
        return prompt
    if isinstance(prompt, Sequence) and all(isinstance(m, Message) for m in prompt):
        return list(cast("Sequence[Message[Any]]", prompt))
    raise TypeError(f"a prompt is a str, Template or Message, not {type(prompt).__name__}")


_TEMPLATE_CACHE: dict[str, Template] = {}
_TEMPLATE_CACHE_MAX = 512


def cached_template(text: str) -> Template:
    """Parsed templates for str prompts, so a query in a loop parses its prompt once."""
    t = _TEMPLATE_CACHE.get(text)
    if t is None:
        if len(_TEMPLATE_CACHE) >= _TEMPLATE_CACHE_MAX:
            _TEMPLATE_CACHE.pop(next(iter(_TEMPLATE_CACHE)))
        t = _TEMPLATE_CACHE[text] = Template(text)
    return t
