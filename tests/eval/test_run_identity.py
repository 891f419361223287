"""An evaluation's manifest belongs to its task's run identity: a refusal names what changed
(the task's model, its version=), and the same identity resumes without a task call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Echo

CALLS: list[Any] = []


async def task(x: str, session: lf.Session) -> str:
    CALLS.append(x)
    return await session.query("{{x}}", vars={"x": x})  # type: ignore[no-any-return]


CASES = [lf.eval.Case("a", "a"), lf.eval.Case("b", "b")]


async def _run(path: Path, lm: Any, version: str | None = None) -> Any:
    return await lf.eval.run(
        task,
        CASES,
        lf.eval.exact,
        run=path,
        session=lf.Session(lm),
        version=version,
        progress=False,
        live=False,
    )


async def test_an_eval_manifest_names_the_changed_model_and_version(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    await _run(path, Echo(), version="1")
    CALLS.clear()
    again = await _run(path, Echo(), version="1")
    assert CALLS == [] and all(r.resumed for r in again)
    with pytest.raises(lf.RunManifestError, match="changed from fake:echo to fake:other"):
        await _run(path, Echo("other"), version="1")
    with pytest.raises(lf.RunManifestError, match="version changed from '1' to '2'"):
        await _run(path, Echo(), version="2")
    assert CALLS == []


async def test_a_version_without_a_run_is_refused_before_the_task_runs() -> None:
    CALLS.clear()
    with pytest.raises(ValueError, match="no run= was given"):
        await lf.eval.run(
            task, CASES, lf.eval.exact, session=lf.Session(Echo()), version="1", live=False
        )
    assert CALLS == []
