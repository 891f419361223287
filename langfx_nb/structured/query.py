"""``lf.query``: one prompt, one model call, a typed answer.

Without a schema the answer is the response text. With a schema the call goes through a
``Mapping`` (prompt protocol → model → parse → pydantic validation) and the answer is the
validated value; ``returns_message=True`` gives the response message with ``.result`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..llms.default import default_lm
from ..messages import AIMessage, Message
from ..template import Template, render_prompt
from .mapping import Mapping as _Mapping

if TYPE_CHECKING:
    from ..llms.base import LanguageModel
    from .mapping import AttemptHook, MappingExample
    from .protocols import Protocol

__all__ = ["query"]


async def query(
    prompt: str | Template | Message[Any] | Sequence[Message[Any]],
    schema: Any = None,
    *,
    lm: LanguageModel | None = None,
    vars: Mapping[str, Any] | None = None,
    returns_message: bool = False,
    protocol: str | Protocol = "python",
    native_structured_output: bool = False,
    examples: Sequence[MappingExample] | None = None,
    system_message: str | Message[Any] | None = None,
    repair: int = 0,
    on_attempt: AttemptHook | None = None,
    **options: Any,
) -> Any:
    """Ask ``lm`` and return ``str`` (no schema) or the validated value of ``schema``.

    A ``str`` prompt is a Template rendered with ``vars``; a ``Template`` is rendered with
    ``vars``; a ``Message`` is sent as is. ``options`` are model call options (sampling,
    ``cache_seed``, ...), kept apart from template variables so names never collide.

    ``repair=N`` (schema only): when the answer fails to parse or validate, ask again with
    the previous answer and the exact error, at most N more times (``Mapping.call``); the
    final ``MappingError`` carries every attempt in ``attempts``. ``on_attempt`` observes
    the attempts (see ``Mapping.call``).
    """
    if lm is None:
        lm = default_lm()
    if lm is None:
        raise TypeError("query() needs a model: pass lm=, or set lf.set_default_lm(lm)")
    if schema is None:
        check_schemaless(protocol, native_structured_output, examples, repair)
        message = render_prompt(prompt, vars)
        if system_message is not None:
            options["system_message"] = system_message
        response: AIMessage[Any] = await lm.call(message, **options)
        response.result = response.text
        return response if returns_message else response.text
    mapping: _Mapping = _Mapping(
        prompt,
        schema,
        protocol=protocol,
        native_structured_output=native_structured_output,
        examples=examples,
        system_message=system_message,
    )
    response = await mapping.call(vars, lm=lm, repair=repair, on_attempt=on_attempt, **options)
    return response if returns_message else response.result


def check_schemaless(
    protocol: Any, native_structured_output: bool, examples: Any, repair: Any
) -> None:
    """Without a schema the answer is text: refuse what only a schema can use, at once."""
    if repair:
        raise TypeError("repair= needs a schema (a text answer cannot fail to parse)")
    if native_structured_output:
        raise TypeError("native_structured_output=True needs a schema")
    if examples:
        raise TypeError("examples= need a schema")
    if isinstance(protocol, str) and protocol not in ("python", "json"):
        raise ValueError(f"unknown protocol {protocol!r}; use 'python' or 'json'")
