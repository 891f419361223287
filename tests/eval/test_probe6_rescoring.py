"""An evaluation resumed as a data scientist iterates: a stored trial is reused only for the
same case and the same scoring (docs/eval.md: "the evaluators (their code and plain
settings: a judge's rubric and model, a tolerance)"). Changing how a judge grades (its
verdict model, its query options, its model's sampling) or how ``fields`` compares is another
scoring; a case whose inputs have no JSON form is not paid for again on every run; a
re-scored trial keeps its own output (not another case's with the same inputs), as it was
(a NaN stays a float), and the duration of the task that made it."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pydantic

import langfx_nb as lf
from langfx_nb.llms.fake import StaticResponse

PASSED = "Verdict(reason='fine', passed=True)"


async def echo(text: str) -> str:
    return text


async def _run(path: Path, evaluator: Any, task: Any = echo, cases: Any = None) -> lf.eval.Report:
    evaluators = evaluator if isinstance(evaluator, dict) else [evaluator]
    return await lf.eval.run(task, cases or ["a"], evaluators, run=path, progress=False, live=False)


class Grade(pydantic.BaseModel):
    reason: str
    score: float


async def test_a_judge_given_another_verdict_model_re_scores(tmp_path: Path) -> None:
    path = tmp_path / "judge.sqlite"
    passfail = lf.eval.judge(StaticResponse(PASSED, model="judge-a"), "Is it right?")
    first = await _run(path, passfail)
    assert first[0].scores["judge"].score == lf.eval.Score(True, "pass", "fine")
    graded = lf.eval.judge(
        StaticResponse("Grade(reason='half', score=0.5)", model="judge-a"),
        "Is it right?",
        verdict=Grade,
    )
    again = await _run(path, graded)
    assert not again[0].resumed
    assert again[0].redo == "re-scored: the evaluators changed; output kept"
    score = again[0].scores["judge"].score
    assert score is not None and score.score == 0.5


async def test_a_judge_asked_with_other_options_re_scores(tmp_path: Path) -> None:
    path = tmp_path / "options.sqlite"
    await _run(path, lf.eval.judge(StaticResponse(PASSED, model="judge-a"), "Is it right?"))
    warmer = lf.eval.judge(StaticResponse(PASSED, model="judge-a"), "Is it right?", temperature=1)
    again = await _run(path, warmer)
    assert not again[0].resumed
    assert again[0].redo == "re-scored: the evaluators changed; output kept"


async def test_a_judge_model_with_other_sampling_re_scores(tmp_path: Path) -> None:
    path = tmp_path / "sampling.sqlite"
    cold = StaticResponse(PASSED, model="judge-a", temperature=0.0)
    await _run(path, lf.eval.judge(cold, "Is it right?"))
    hot = StaticResponse(PASSED, model="judge-a", temperature=1.0)
    again = await _run(path, lf.eval.judge(hot, "Is it right?"))
    assert not again[0].resumed
    assert again[0].redo == "re-scored: the evaluators changed; output kept"


class City(pydantic.BaseModel):
    city: str


async def answer_city(text: str) -> City:
    return City(city=text.lower())


async def test_fields_given_a_comparison_re_scores(tmp_path: Path) -> None:
    path = tmp_path / "fields.sqlite"
    cases = [lf.eval.Case("Paris", expected={"city": "Paris"}, id="paris")]
    strict = await _run(path, lf.eval.fields(), answer_city, cases)
    assert strict[0].scores["fields.city"].score == lf.eval.Score(False, "fail")

    def same_text(got: str, want: str) -> bool:
        return got.casefold() == want.casefold()

    lenient = lf.eval.fields(compare={"city": same_text})
    again = await _run(path, lenient, answer_city, cases)
    assert not again[0].resumed
    assert again[0].scores["fields.city"].score == lf.eval.Score(True, "pass")


class Document:
    """A case input with no JSON form (a loaded document, an image handle)."""

    def __init__(self, text: str) -> None:
        self.text = text


async def test_a_case_whose_inputs_have_no_json_form_is_not_paid_for_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "opaque.sqlite"
    calls: list[str] = []

    async def read(doc: Document) -> str:
        calls.append(doc.text)
        return doc.text.upper()

    def cases() -> list[lf.eval.Case]:
        return [lf.eval.Case(Document("a"), expected="A", id="a")]

    try:
        await _run(path, lf.eval.exact, read, cases())
    except TypeError:  # refused before anything runs, as lf.batch refuses such an item
        assert calls == []
        return
    assert calls == ["a"]
    again = await _run(path, lf.eval.exact, read, cases())
    assert again[0].resumed and again[0].redo is None
    assert calls == ["a"]  # the task was not called (and paid for) a second time


async def slow_echo(text: str) -> str:
    await asyncio.sleep(0.01)  # a task that takes time, as a model call does
    return text


def short(ctx: lf.eval.EvalContext) -> bool:
    return len(ctx.output) < 3


def shorter(ctx: lf.eval.EvalContext) -> bool:
    return len(ctx.output) < 2


async def test_a_re_scored_trial_keeps_the_duration_of_the_task_that_made_its_output(
    tmp_path: Path,
) -> None:
    path = tmp_path / "duration.sqlite"
    first = await _run(path, short, slow_echo)
    again = await _run(path, {"short": shorter}, slow_echo)
    assert again[0].redo == "re-scored: the evaluators changed; output kept"
    assert again[0].duration in (first[0].duration, None)


async def unparsed(text: str) -> dict[str, float]:
    return {"value": float("nan")}  # the task could not read a number from the answer


def is_missing(ctx: lf.eval.EvalContext) -> bool:
    return math.isnan(ctx.output["value"])


def is_missing_too(ctx: lf.eval.EvalContext) -> bool:
    return math.isnan(ctx.output["value"])


async def test_a_kept_output_holding_nan_reads_back_as_a_float(tmp_path: Path) -> None:
    path = tmp_path / "nan.sqlite"
    first = await _run(path, is_missing, unparsed)
    assert first[0].scores["is_missing"].score == lf.eval.Score(True, "pass")
    resumed = await _run(path, is_missing, unparsed)
    assert resumed[0].resumed
    assert isinstance(resumed[0].output["value"], float)
    rescored = await _run(path, {"is_missing": is_missing_too}, unparsed)
    assert rescored[0].redo == "re-scored: the evaluators changed; output kept"
    assert rescored[0].scores["is_missing"].score == lf.eval.Score(True, "pass")


async def test_a_re_scored_case_keeps_its_own_output_when_another_case_has_its_inputs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "twins.sqlite"
    answers = iter(["first answer", "second answer", "unexpected call"])

    async def sampled(question: str) -> str:  # a model at temperature > 0
        return next(answers)

    cases = [
        lf.eval.Case("2+2?", expected="4", id="a", metadata={"lang": "en"}),
        lf.eval.Case("2+2?", expected="four", id="b", metadata={"lang": "words"}),
    ]

    async def run(evaluators: dict[str, Any]) -> lf.eval.Report:
        return await lf.eval.run(
            sampled, cases, evaluators, run=path, max_concurrency=1, progress=False, live=False
        )

    first = await run({"short": short})
    assert [trial.output for trial in first] == ["first answer", "second answer"]
    again = await run({"short": shorter})
    assert [trial.redo for trial in again] == ["re-scored: the evaluators changed; output kept"] * 2
    assert [trial.output for trial in again] == ["first answer", "second answer"]
