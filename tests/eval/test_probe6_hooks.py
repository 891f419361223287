"""``lf.eval.run(on_trial=...)``, the hook a user writes to watch trials finish: a bug in it
is the user's to see, but it never makes a task that answered (and was paid for) a failed
trial, nor makes a resume call the task again."""

from __future__ import annotations

from pathlib import Path

import langfx_nb as lf


async def test_a_broken_on_trial_hook_costs_no_second_task_call(tmp_path: Path) -> None:
    run = tmp_path / "hook.sqlite"
    calls: list[str] = []

    async def task(text: str) -> str:
        calls.append(text)  # each call is a paid model request
        return text

    def hook(index: int, result: lf.eval.CaseResult) -> None:
        raise RuntimeError("a bug in the user's hook")

    try:
        first = await lf.eval.run(
            task, ["a", "b"], [lf.eval.exact], run=run, on_trial=hook, progress=False, live=False
        )
    except RuntimeError:  # the hook's bug shown to its author: acceptable
        pass
    else:
        assert [trial.status for trial in first] == ["ok", "ok"]
    assert calls == ["a", "b"]
    again = await lf.eval.run(
        task, ["a", "b"], [lf.eval.exact], run=run, progress=False, live=False
    )
    assert [trial.resumed for trial in again] == [True, True]
    assert calls == ["a", "b"]  # no task was called (and paid for) twice
