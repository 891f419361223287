"""Hostile model output: every entry of the corpus is a MappingError with no side effect.

Side effects are watched with a ``sys.audit`` hook (``exec``, ``open``, ``os.system``,
``subprocess``, imports of new modules ...) and a patched ``print``, so a parser that
evaluated anything would be caught even if the payload itself looked harmless.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms import StaticResponse
from langfx_nb.schema import Schema
from langfx_nb.structured.protocols import MAX_DEPTH, MAX_RESPONSE_CHARS, PythonProtocol

CORPUS = Path(__file__).with_name("hostile_python_responses.txt")
PWNED = Path("/tmp/langfx_pwned")


class Item(BaseModel):
    name: str


class Answer(BaseModel):
    name: str
    n: int = 0
    items: list[Item] = []


def _corpus() -> list[str]:
    text = CORPUS.read_text()
    entries = [e.strip("\n") for e in text.split("\n=====\n")[1:]]
    return [e for e in entries if e.strip()]


def _generated() -> dict[str, str]:
    return {
        "nested lists beyond the depth limit": "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),
        "nested calls beyond the depth limit": "Answer(name=" * 150 + "'x'" + ")" * 150,
        "nesting beyond the parser's limit": "[" * 5000 + "]" * 5000,
        "a 2 MB string literal": "Answer(name='" + "a" * 2_000_000 + "')",
        "a 2 MB list literal": "[" + "1," * 1_000_000 + "]",
        "a 5000-digit integer": "Answer(name='x', n=" + "9" * 5000 + ")",
        "100k unary minus signs": "Answer(name='x', n=" + "-" * 100_000 + "1)",
        "null bytes": "Answer(name='x')\x00__import__('os')",
        "deeply nested dicts": "{'a': " * 120 + "1" + "}" * 120,
        "300k fences on one line": "```" * 300_000,
        "200k one-line fences": "```x\n" * 200_000,
        "an unclosed fence before 900k backticks": "```python\n" + "`" * 900_000,
    }


_AUDITED = (
    "exec",
    "open",
    "import",
    "os.system",
    "os.exec",
    "os.spawn",
    "os.posix_spawn",
    "os.fork",
    "os.remove",
    "os.rename",
    "os.mkdir",
    "os.kill",
    "subprocess",
    "shutil",
    "socket",
    "ctypes",
    "builtins.input",
    "builtins.breakpoint",
)  # not os.putenv: pytest sets PYTEST_CURRENT_TEST between phases
_events: list[str] = []
_watching = False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event.startswith(_AUDITED):
        _events.append(event)


sys.addaudithook(_hook)  # audit hooks cannot be removed; it records only while watching


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    global _watching
    printed: list[Any] = []
    monkeypatch.setattr(builtins, "print", lambda *a, **k: printed.append(a))
    PWNED.unlink(missing_ok=True)
    Schema.of(Answer)  # build the schema (pydantic may import lazily) before watching
    _events.clear()
    _watching = True
    try:
        yield _events
    finally:
        _watching = False
    assert not printed
    assert not PWNED.exists()


def test_corpus_is_big_enough() -> None:
    assert len(_corpus()) >= 30


@pytest.mark.parametrize("response", _corpus())
def test_corpus_entry_is_rejected_without_side_effect(response: str, watch: list[str]) -> None:
    with pytest.raises(lf.MappingError) as info:
        PythonProtocol().parse(response, Schema.of(Answer))
    assert watch == []
    assert info.value.raw == response[: lf.MappingError.MAX_RAW_CHARS] + (
        "…" if len(response) > lf.MappingError.MAX_RAW_CHARS else ""
    )
    assert "expected" in str(info.value) or "not allowed" in str(info.value)


@pytest.mark.parametrize("name", list(_generated()))
def test_generated_hostile_input_is_rejected(name: str, watch: list[str]) -> None:
    response = _generated()[name]
    with pytest.raises(lf.MappingError) as info:
        PythonProtocol().parse(response, Schema.of(Answer))
    assert watch == []
    assert len(info.value.raw) <= lf.MappingError.MAX_RAW_CHARS + 1


@pytest.mark.parametrize("protocol", ["python", "json"])
@pytest.mark.parametrize("name", ["300k fences on one line", "200k one-line fences"])
def test_many_fences_are_handled_in_linear_time(protocol: str, name: str) -> None:
    """Fence extraction is one pass; a backtracking regex took minutes on these inputs.
    (No timing assert: the per-test timeout is the guard.)"""
    from langfx_nb.structured.protocols import get_protocol

    with pytest.raises(lf.MappingError):
        get_protocol(protocol).parse(_generated()[name], Schema.of(Answer))


def test_size_limit_applies_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("ast.parse must not see oversized input")

    monkeypatch.setattr(ast, "parse", boom)
    with pytest.raises(lf.MappingError, match="too large"):
        PythonProtocol().parse("1" * (MAX_RESPONSE_CHARS + 1), Schema.of(int))


async def test_hostile_answer_through_query_is_mapping_error(watch: list[str]) -> None:
    lm = StaticResponse("```python\n__import__('os').system('touch /tmp/langfx_pwned')\n```")
    with pytest.raises(lf.MappingError, match="not allowed"):
        await lf.query("q", Answer, lm=lm)


def test_allowed_answer_still_parses(watch: list[str]) -> None:
    value = PythonProtocol().parse(
        "Answer(name='ok', n=-3, items=[Item(name='a')])", Schema.of(Answer)
    )
    assert value == Answer(name="ok", n=-3, items=[Item(name="a")])
    assert watch == []
