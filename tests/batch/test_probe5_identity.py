"""Run identity as a notebook user meets it: ``fn`` lives in a module they edit and reload.
A refusal names what changed and writes nothing; what identity leaves out (a comment above
``fn``; with ``version=``, any edit of its body) keeps the manifest, as docs/batch.md says."""

from __future__ import annotations

import hashlib
import importlib
import sqlite3
import sys
import types
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langfx_nb as lf
from langfx_nb.llms import Echo
from langfx_nb.messages import SystemMessage

SOURCE = """
import langfx_nb as lf

CALLS = []
PROMPT = lf.Template("say {{word}} in a {{tone}} way", tone="calm")
STYLE = "short"


async def ask(row, session):
    CALLS.append(row)
    return await session.query(PROMPT, vars={**row, "style": STYLE})
"""

ROWS = [{"word": "a"}, {"word": "b"}]


class Module:
    """A module file under ``folder``, imported, edited and reloaded as in a notebook."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name
        sys.path.insert(0, str(folder))

    def load(self, source: str) -> types.ModuleType:
        (self.folder / f"{self.name}.py").write_text(source)
        module = sys.modules.get(self.name)
        return importlib.reload(module) if module else importlib.import_module(self.name)

    def close(self) -> None:
        sys.path.remove(str(self.folder))
        sys.modules.pop(self.name, None)


@pytest.fixture
def module(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    made = Module(tmp_path, f"probe5_ident_{request.node.name[5:40]}")
    yield made
    made.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def first_run(mod: types.ModuleType, run: Path, **kw: Any) -> None:
    result = await lf.batch(
        mod.ask, ROWS, session=lf.Session(Echo()), run=run, progress=False, **kw
    )
    assert result.ok
    mod.CALLS.clear()


async def refused(mod: types.ModuleType, run: Path, session: Any = None, **kw: Any) -> str:
    """The refusal of a run of ``mod.ask`` on ``run``, after checking nothing ran or was
    written."""
    before = digest(run)
    with pytest.raises(lf.RunManifestError) as info:
        await lf.batch(
            mod.ask, ROWS, session=session or lf.Session(Echo()), run=run, progress=False, **kw
        )
    assert mod.CALLS == [] and digest(run) == before
    with sqlite3.connect(run) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (2,)
    return str(info.value)


async def kept(mod: types.ModuleType, run: Path, session: Any = None, **kw: Any) -> None:
    result = await lf.batch(
        mod.ask, ROWS, session=session or lf.Session(Echo()), run=run, progress=False, **kw
    )
    assert result.totals.resumed == 2 and mod.CALLS == []


async def test_each_change_is_named_and_nothing_is_written(module: Module, tmp_path: Path) -> None:
    run = tmp_path / "named.sqlite"
    mod = module.load(SOURCE)
    await first_run(mod, run)
    await kept(mod, run)
    message = await refused(mod, run, lf.Session(Echo("gpt-other")))
    assert "the session's model changed from fake:echo to fake:gpt-other" in message
    message = await refused(mod, run, lf.Session(Echo(), max_tokens=5))
    assert "to fake:echo max_tokens=5" in message
    mod = module.load(SOURCE.replace('tone="calm"', 'tone="angry"'))
    assert "the template PROMPT changed" in await refused(mod, run)
    mod = module.load(SOURCE.replace('STYLE = "short"', 'STYLE = "long"'))
    assert "the value of STYLE that fn reads changed" in await refused(mod, run)
    mod = module.load(SOURCE.replace("def ask(", "def ask_other(") + "\nask = ask_other\n")
    assert f"fn changed from {module.name}.ask to {module.name}.ask_other" in await refused(
        mod, run
    )
    mod = module.load(SOURCE)
    assert "version changed from none (fn's source) to '2'" in await refused(mod, run, version="2")
    await kept(mod, run)  # after every refusal, the manifest is as it was


async def test_what_identity_leaves_out_keeps_the_manifest(module: Module, tmp_path: Path) -> None:
    run = tmp_path / "kept.sqlite"
    mod = module.load(SOURCE)
    await first_run(mod, run)
    # a comment above fn, a blank line between definitions: not fn's source
    mod = module.load(SOURCE.replace("async def ask", "# labels a row\nasync def ask"))
    await kept(mod, run)
    # a comment inside fn is its source text: refused, and said so (docs/batch.md)
    commented = SOURCE.replace("    CALLS.append", "    # remember it\n    CALLS.append")
    mod = module.load(commented)
    assert "fn's source text changed" in await refused(mod, run)
    # with version=, the caller says when the code changed: a comment or a reformat keeps it
    versioned = tmp_path / "versioned.sqlite"
    mod = module.load(SOURCE)
    await first_run(mod, versioned, version="1")
    mod = module.load(commented.replace("vars={**row, ", "vars={\n        **row,\n        "))
    await kept(mod, versioned, version="1")
    # the model and templates stay part of a versioned identity
    assert "the session's model changed" in await refused(
        mod, versioned, lf.Session(Echo("x")), version="1"
    )


async def test_a_changed_system_message_default_is_another_run(
    module: Module, tmp_path: Path
) -> None:
    run = tmp_path / "system.sqlite"
    mod = module.load(SOURCE)
    terse = lf.Session(Echo(), system_message=SystemMessage("Answer in one word."))
    result = await lf.batch(mod.ask, ROWS, session=terse, run=run, progress=False)
    assert result.ok
    mod.CALLS.clear()
    chatty = lf.Session(Echo(), system_message=SystemMessage("Answer at length, in French."))
    assert "the session's model changed" in await refused(mod, run, chatty)


async def test_two_lambdas_on_one_line_are_two_runs(tmp_path: Path) -> None:
    run = tmp_path / "lambdas.sqlite"
    negate, keep = (lambda x: _value(-x)), (lambda x: _value(x))
    assert (await lf.batch(negate, [1], run=run, progress=False)).results == [-1]
    with pytest.raises(lf.RunManifestError, match="fn's source text changed"):
        await lf.batch(keep, [1], run=run, progress=False)  # not negate's stored -1


async def _value(x: int) -> int:
    return x


BUGGY = """
CALLS = []


async def ask(row, session):
    CALLS.append(row)
    return row["name"].upper()
"""


async def test_a_bug_fixed_under_one_version_reruns_only_the_failed_items(
    module: Module, tmp_path: Path
) -> None:
    # the data scientist's loop: item 1 fails, fn is fixed, the same version is kept
    run = tmp_path / "fixed.sqlite"
    rows = [{"name": "ada"}, {"nom": "bob"}, {"name": "cy"}]
    mod = module.load(BUGGY)
    first = await lf.batch(
        mod.ask, rows, session=lf.Session(Echo()), run=run, version="1", progress=False
    )
    assert first.failed == [1] and "KeyError" in str(first.errors[1])
    mod = module.load(BUGGY.replace('row["name"]', 'row.get("name", row.get("nom", ""))'))
    again = await lf.batch(
        mod.ask, rows, session=lf.Session(Echo()), run=run, version="1", progress=False
    )
    assert again.results == ["ADA", "BOB", "CY"] and mod.CALLS == [{"nom": "bob"}]
    # without version= the fix is another run: refused, naming the source
    plain = tmp_path / "plain.sqlite"
    mod = module.load(BUGGY)
    await lf.batch(mod.ask, rows, session=lf.Session(Echo()), run=plain, progress=False)
    mod = module.load(BUGGY.replace('row["name"]', 'row.get("name", "")'))
    with pytest.raises(lf.RunManifestError, match="fn's source text changed"):
        await lf.batch(mod.ask, rows, session=lf.Session(Echo()), run=plain, progress=False)


CALLS_SO_FAR = 0


async def counted(row: int) -> int:
    global CALLS_SO_FAR  # state fn keeps for itself (a counter, a last-seen value)
    CALLS_SO_FAR += 1
    return row * 2


async def test_state_fn_writes_to_a_global_does_not_refuse_the_resume(tmp_path: Path) -> None:
    run = tmp_path / "counted.sqlite"
    await lf.batch(counted, [1, 2, 3], run=run, progress=False)
    result = await lf.batch(counted, [1, 2, 3, 4], run=run, progress=False)
    assert result.resumed == [True, True, True, False]


class Ticket(pydantic.BaseModel):
    text: str


text = "a scratch value another cell left behind"  # a notebook global that fn never reads


async def shout(row: Ticket) -> str:
    return row.text.upper()  # reads the attribute .text, not the global


async def test_an_unrelated_global_named_like_an_attribute_is_not_part_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "attr.sqlite"
    rows = [Ticket(text="a"), Ticket(text="b")]
    await lf.batch(shout, rows, run=run, progress=False)
    monkeypatch.setitem(globals(), "text", "another scratch value")
    result = await lf.batch(shout, rows, run=run, progress=False)
    assert result.resumed == [True, True]


DEFAULTS_SOURCE = """
from langfx_nb.llms import Echo

CALLS = []
MODEL = Echo("{model}")


async def ask(row, session, lm=MODEL):  # the model bound as a default argument
    CALLS.append(row)
    return await session.query("say {{{{word}}}}", vars=row, lm=lm)
"""


async def test_a_model_given_as_a_default_argument_is_part_of_the_run(
    module: Module, tmp_path: Path
) -> None:
    run = tmp_path / "defaults.sqlite"
    mod = module.load(DEFAULTS_SOURCE.format(model="small"))
    await first_run(mod, run)
    mod = module.load(DEFAULTS_SOURCE.format(model="large"))
    assert "small" in await refused(mod, run)
