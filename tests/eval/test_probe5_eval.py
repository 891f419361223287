"""An evaluation read as a data scientist and a new maintainer: evaluators of both forms
(the typed context, the deprecated three arguments, as functions, callable objects and
partials) score side by side; a task that raises keeps its traceback in the report, the
trial's trace node and the manifest; an evaluator that raises keeps its own, across a resume;
the manifest says which case each stored trial was."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf


def _lookup(row: dict[str, Any]) -> Any:
    return row["name"]


async def task(text: str) -> str:
    if text == "bad":
        return str(_lookup({}))  # the task's bug, at one case
    return text.upper()


def with_context(ctx: lf.eval.EvalContext) -> bool:
    return bool(ctx.output == ctx.expected)


def three(case: Any, output: Any, trace: Any) -> bool:
    return bool(output == case.expected)


async def three_async(case: Any, output: Any, trace: Any) -> bool:
    return trace is not None


class Shorter:
    def __call__(self, ctx: lf.eval.EvalContext) -> bool:
        return len(ctx.output) <= 3


class OldObject:
    def __call__(self, case: Any, output: Any, trace: Any) -> float:
        return 0.5


def under(ctx: lf.eval.EvalContext, limit: int) -> bool:
    return len(ctx.output) < limit


def broken_judge(ctx: lf.eval.EvalContext) -> bool:
    raise RuntimeError("judge failed: token=tok_AAAAAAAAAAAAAAAAAAAA")


EVALUATORS: dict[str, Any] = {
    "ctx": with_context,
    "three": three,
    "three_async": three_async,
    "object": Shorter(),
    "old_object": OldObject(),
    "partial": functools.partial(under, limit=5),
    "broken": broken_judge,
}
CASES = [
    lf.eval.Case("a", expected="A", id="a"),
    lf.eval.Case("bad", expected="BAD", id="bad"),
    lf.eval.Case("c", expected="X", id="c"),
]


async def _run(run: Path) -> tuple[lf.eval.Report, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        report = await lf.eval.run(task, CASES, EVALUATORS, run=run, progress=False, live=False)
    return report, got


async def test_both_forms_score_side_by_side_and_failures_keep_their_tracebacks(
    tmp_path: Path,
) -> None:
    run = tmp_path / "eval.sqlite"
    report, got = await _run(run)
    warned = sorted(str(w.message).split("'")[1] for w in got)
    assert warned == ["old_object", "three", "three_async"]  # once each, not per trial
    a, bad, c = report
    scores = {name: record.score.score for name, record in a.scores.items() if record.score}
    assert scores == {
        "ctx": True,
        "three": True,
        "three_async": True,
        "object": True,
        "old_object": 0.5,
        "partial": True,
    }
    assert c.scores["ctx"].score is not None and c.scores["ctx"].score.score is False
    # the evaluator that raised: an error with its traceback, its secret masked
    broken = a.scores["broken"]
    assert broken.error is not None and broken.error["type"] == "RuntimeError"
    assert "in broken_judge" in (broken.traceback or "")
    assert "AAAAAAAAAAAAAAAAAAAA" not in (broken.traceback or "") + broken.error["message"]
    # the task that raised: in the report, the trial's node, the manifest
    assert bad.status == "failed" and bad.error == {"type": "KeyError", "message": "'name'"}
    tb = bad.traceback or ""
    assert "in task" in tb and "in _lookup" in tb and tb.rstrip().endswith("KeyError: 'name'")
    assert report.session is not None and bad.node_id is not None
    node = report.session.find(bad.node_id)
    assert node is not None and node.error is not None and node.error["traceback"] == tb
    stored = lf.BatchResult.load(run)
    [failed] = [e for e in stored.errors if e is not None]
    assert failed.traceback == tb
    # a resume reuses the finished trials with their evaluators' errors and tracebacks
    again, _ = await _run(run)
    assert [r.resumed for r in again] == [True, False, True]
    assert again[0].scores["broken"].traceback == broken.traceback
    assert again[1].traceback is not None and again[1].traceback.endswith("KeyError: 'name'\n")


async def test_an_eval_manifest_stores_each_trials_case_inputs(tmp_path: Path) -> None:
    run = tmp_path / "inputs.sqlite"
    await _run(run)
    stored = lf.BatchResult.load(run)
    by_case = {
        key.split("#")[0]: value for key, value in zip(stored.keys, stored.inputs, strict=True)
    }
    assert by_case == {"a": "a", "bad": "bad", "c": "c"}


output = "a scratch value another notebook cell left behind"  # never read by any evaluator


def short_answer(ctx: lf.eval.EvalContext) -> bool:
    return len(ctx.output) < 10  # the attribute .output, not the global


async def test_an_unrelated_global_named_like_a_context_field_rescores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "attr.sqlite"

    async def shout(text: str) -> str:
        return text.upper()

    await lf.eval.run(shout, ["a", "b"], [short_answer], run=run, progress=False, live=False)
    monkeypatch.setitem(globals(), "output", "another scratch value")
    again = await lf.eval.run(
        shout, ["a", "b"], [short_answer], run=run, progress=False, live=False
    )
    assert [(r.resumed, r.redo) for r in again] == [(True, None), (True, None)]


def strict_and_short(case: Any, output: Any, trace: Any) -> bool:
    """An evaluator of the old form built from built-ins, as the docs before issue 40 wrote
    them: every evaluator was a callable of (case, output, trace)."""
    return bool(lf.eval.exact(case, output, trace)) and len(output) < 10


async def test_an_old_form_evaluator_calling_a_builtin_the_old_way_still_scores() -> None:
    async def shout(text: str) -> str:
        return text.upper()

    cases = [lf.eval.Case("a", expected="A")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        report = await lf.eval.run(shout, cases, [strict_and_short], progress=False, live=False)
    record = report[0].scores["strict_and_short"]
    assert record.error is None, record.error
    assert record.score is not None and record.score.score is True
