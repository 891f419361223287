"""Run identity: a manifest belongs to fn's name and source (or a version=), the models and
the templates it uses; a refusal names what changed; another Python's byte code does not
count; a manifest of the older format is refused with a message saying so."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import types
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Echo
from langfx_nb.llms.openai import OpenAI

CALLS: list[Any] = []


async def ask(row: dict[str, Any], session: lf.Session) -> str:
    CALLS.append(row)
    return await session.query("say {{word}}", vars=row)  # type: ignore[no-any-return]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


ROWS = [{"word": "a"}, {"word": "b"}]


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()


async def test_another_model_is_named_in_the_refusal(tmp_path: Path) -> None:
    run = tmp_path / "m.sqlite"
    await lf.batch(ask, ROWS, session=lf.Session(Echo()), run=run, progress=False)
    before = digest(run)
    CALLS.clear()
    with pytest.raises(lf.RunManifestError) as info:
        await lf.batch(ask, ROWS, session=lf.Session(Echo("other")), run=run, progress=False)
    assert "the session's model changed from fake:echo to fake:other" in str(info.value)
    assert CALLS == [] and digest(run) == before


async def test_an_option_that_changes_answers_is_named(tmp_path: Path) -> None:
    run = tmp_path / "t.sqlite"
    session = lf.Session(Echo(temperature=0.0))
    await lf.batch(ask, ROWS, session=session, run=run, progress=False)
    again = await lf.batch(ask, ROWS, session=session, run=run, progress=False)
    assert again.totals.resumed == 2  # the same run resumes
    with pytest.raises(lf.RunManifestError) as info:
        await lf.batch(ask, ROWS, session=lf.Session(Echo(), temperature=0.7), run=run)
    assert "from fake:echo temperature=0.0 to fake:echo temperature=0.7" in str(info.value)


async def test_a_changed_template_text_is_named(tmp_path: Path) -> None:
    run = tmp_path / "tpl.sqlite"
    prompt = lf.Template("say {{word}}")

    async def fn(row: dict[str, Any], session: lf.Session) -> str:
        return await session.query(prompt, vars=row)  # type: ignore[no-any-return]

    await lf.batch(fn, ROWS, session=lf.Session(Echo()), run=run, progress=False)
    prompt = lf.Template("shout {{word}}")
    with pytest.raises(lf.RunManifestError, match=r"the template prompt changed \(its text"):
        await lf.batch(fn, ROWS, session=lf.Session(Echo()), run=run, progress=False)


async def test_a_model_fn_names_is_part_of_the_identity_but_never_its_key(
    tmp_path: Path,
) -> None:
    run = tmp_path / "named.sqlite"
    lm = OpenAI("gpt-4o", api_key="sk-secret-key-0123456789", base_url="http://127.0.0.1:9")

    async def fn(x: int) -> int:
        assert lm is not None
        return x

    first = await lf.batch(fn, [1], run=run, progress=False)
    assert first.identity is not None and first.identity.models == {"lm": "openai:gpt-4o"}
    assert b"sk-secret" not in run.read_bytes()
    lm = OpenAI("gpt-4o-mini", api_key="sk-secret-key-0123456789", max_tokens=5)
    with pytest.raises(lf.RunManifestError) as info:
        await lf.batch(fn, [1], run=run, progress=False)
    assert "the model lm changed from openai:gpt-4o to openai:gpt-4o-mini max_tokens=5" in str(
        info.value
    )
    assert "sk-secret" not in str(info.value)


async def test_another_source_is_named_and_a_version_keeps_the_manifest(tmp_path: Path) -> None:
    async def first(x: int) -> int:
        return x

    async def second(x: int) -> int:
        return x + 0  # the same meaning, another text

    second.__qualname__ = first.__qualname__
    run = tmp_path / "v.sqlite"
    await lf.batch(first, [1, 2], run=run, progress=False)
    with pytest.raises(lf.RunManifestError, match="fn's source text changed"):
        await lf.batch(second, [1, 2], run=run, progress=False)

    pinned = tmp_path / "pinned.sqlite"
    await lf.batch(first, [1, 2], run=pinned, progress=False, version="1")
    again = await lf.batch(second, [1, 2], run=pinned, progress=False, version="1")
    assert again.totals.resumed == 2 and again.identity is not None
    assert again.identity.version == "1"
    with pytest.raises(lf.RunManifestError, match="version changed from '1' to '2'"):
        await lf.batch(second, [1, 2], run=pinned, progress=False, version="2")


async def double(x: int) -> int:
    return 2 * x


async def test_other_byte_code_of_the_same_source_is_the_same_run(tmp_path: Path) -> None:
    """What another Python version does to a function: the same source, other byte code."""
    run = tmp_path / "py.sqlite"
    await lf.batch(double, [1, 2], run=run, progress=False)
    code = double.__code__
    other = types.FunctionType(
        code.replace(co_code=bytes(reversed(code.co_code))), double.__globals__, "double"
    )
    other.__qualname__, other.__module__ = double.__qualname__, double.__module__
    resumed = await lf.batch(other, [1, 2], run=run, progress=False)  # (never called)
    assert resumed.results == [2, 4] and resumed.totals.resumed == 2


async def test_a_manifest_of_the_older_format_is_refused_with_a_clear_message(
    tmp_path: Path,
) -> None:
    run = tmp_path / "old.sqlite"
    conn = sqlite3.connect(run)
    conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE types (tag TEXT PRIMARY KEY, schema_hash TEXT NOT NULL)")
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("format", "langfx_nb.batch_run"), ("version", "1"), ("fn", "m.f"), ("fn_hash", "0")],
    )
    conn.commit()
    conn.close()
    before = digest(run)
    with pytest.raises(lf.RunManifestError, match="written by an older langfx_nb"):
        await lf.batch(double, [1], run=run, progress=False)
    with pytest.raises(lf.RunManifestError, match="written by an older langfx_nb"):
        lf.BatchResult.load(run)  # reading it says the same
    assert digest(run) == before


def test_the_identity_is_stored_readable_in_the_manifest(tmp_path: Path) -> None:
    from langfx_nb.batch.identity import run_identity

    identity = run_identity(ask, session=lf.Session(Echo(), temperature=0.2))
    assert identity.fn == f"{__name__}.ask" and identity.version is None
    assert identity.models == {"session": "fake:echo temperature=0.2"}
    assert "fake:echo temperature=0.2" in str(identity)
    assert json.loads(json.dumps(identity.to_json())) == identity.to_json()


def test_a_long_option_changed_past_what_is_shown_is_still_a_change() -> None:
    from langfx_nb.batch.identity import run_identity

    long = "be brief. " * 30
    a = run_identity(ask, session=lf.Session(Echo(), system_message=long + "a"))
    b = run_identity(ask, session=lf.Session(Echo(), system_message=long + "b"))
    assert a.models != b.models and a.changes(b) == [
        f"the session's model changed from {a.models['session']} to {b.models['session']}"
    ]


async def test_an_oversized_stored_identity_is_refused_unread(tmp_path: Path) -> None:
    from langfx_nb.batch.manifest import MAX_META_CHARS

    run = tmp_path / "run.sqlite"
    await lf.batch(ask, ROWS, session=lf.Session(Echo()), run=run, progress=False)
    conn = sqlite3.connect(run)  # a damaged or hostile file: its identity grown huge
    conn.execute(
        "UPDATE meta SET value = ? WHERE name = 'identity'",
        (json.dumps({"fn": f"{__name__}.ask", "code": "x" * MAX_META_CHARS}),),
    )
    conn.commit()
    conn.close()
    before, CALLS[:] = digest(run), []
    with pytest.raises(lf.RunManifestError, match="run identity is damaged"):
        await lf.batch(ask, ROWS, session=lf.Session(Echo()), run=run, progress=False)
    assert CALLS == [] and digest(run) == before


async def test_a_version_without_a_run_is_refused_before_anything_runs() -> None:
    """``version=`` identifies a manifest: without ``run=`` nothing would read it, and a
    caller would believe the results are kept under it."""
    with pytest.raises(ValueError, match="pass run='name' as well") as info:
        await lf.batch(double, [1, 2], version="1", progress=False)
    assert "version='1'" in str(info.value)


def test_a_default_that_is_not_a_plain_value_is_known_by_what_it_holds() -> None:
    """``system_message=SystemMessage(...)``, ``examples=[...]``: the same content is the
    same run (another instance, another process), other content another, named."""
    from langfx_nb.batch.identity import RunIdentity, run_identity
    from langfx_nb.messages import SystemMessage

    def identity(system: str, *examples: Any) -> RunIdentity:
        session = lf.Session(Echo(), system_message=SystemMessage(system), examples=examples)
        return run_identity(ask, session=session)

    terse = identity("Answer in one word.", {"input": "hi", "output": "hello"})
    assert terse == identity("Answer in one word.", {"input": "hi", "output": "hello"})
    assert 'system_message=SystemMessage(["Answer in one word."])' in terse.models["session"]
    assert terse.changes(identity("Answer at length.", {"input": "hi", "output": "hello"}))
    assert terse.changes(identity("Answer in one word.", {"input": "hi", "output": "hey"}))


def lambdas() -> tuple[Any, Any]:
    return (lambda x: x + 1), (lambda x: x + 2)


class Indented:
    @staticmethod
    def lambdas() -> tuple[Any, Any]:
        return (lambda x: x + 1), (lambda x: x + 2)


def test_a_lambda_is_known_by_its_own_body_not_by_the_line_it_shares() -> None:
    """Two lambdas on one line share their source line (``inspect.getsource``): each is
    known by where its body is in it, counted in the dedented text (so indenting the line
    keeps it)."""
    from langfx_nb.batch.identity import run_identity

    one, two = (run_identity(fn) for fn in lambdas())
    assert one.fn == two.fn and one.code != two.code
    assert [run_identity(fn).code for fn in Indented.lambdas()] == [one.code, two.code]
    assert run_identity(lambdas()[0]) == one


async def test_a_parameter_default_bound_when_fn_was_made_is_part_of_the_run(
    tmp_path: Path,
) -> None:
    """``lambda x, *, k=k: ...`` made in a loop: one source and name, each its own ``k``."""
    run = tmp_path / "defaults.sqlite"

    async def times(x: int, k: int) -> int:
        return x * k

    scaled = [lambda x, *, k=k: times(x, k) for k in (2, 3)]
    assert (await lf.batch(scaled[0], [1], run=run, progress=False)).results == [2]
    with pytest.raises(lf.RunManifestError, match="the value of default k that fn reads"):
        await lf.batch(scaled[1], [1], run=run, progress=False)
