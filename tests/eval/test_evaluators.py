"""Evaluators on real answers: typed answers parsed from a model's text by ``lf.query``,
an agent's tool calls in its trace, and an LLM judge answering through ``lf.query``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.llms.base import LMRequest
from langfx_nb.llms.fake import Scripted, StaticMapping, StaticResponse


class City(BaseModel):
    name: str
    country: str
    population: int


PROMPT = "Facts about {{city}}"
ANSWERS = {
    "Facts about Paris": "City(name='Paris', country='France', population=2100000)",
    "Facts about Lyon": "City(name='Lyon', country='Italy', population=520000)",
    "Facts about Nice": "City(name='nice', country='France', population=340000)",
}
EXPECTED = {
    "Paris": City(name="Paris", country="France", population=2100000),
    "Lyon": City(name="Lyon", country="France", population=520000),
    "Nice": City(name="Nice", country="France", population=340000),
}


def _mapping_model() -> StaticMapping:
    # the python protocol wraps the prompt; answer by the line the template rendered
    class ByCity(StaticMapping):
        def respond(self, request: LMRequest) -> Any:
            text = request.messages[-1].text
            for prompt, answer in self.mapping.items():
                if prompt in text:
                    return answer
            raise AssertionError(text)

    return ByCity(ANSWERS)


def _dataset() -> lf.eval.Dataset:
    return lf.eval.Dataset(
        [lf.eval.Case(city, expected=EXPECTED[city], id=city) for city in EXPECTED],
        output_type=City,
    )


async def test_exact_and_fields_on_typed_answers_from_a_model() -> None:
    lm = _mapping_model()

    async def task(city: str, session: lf.Session) -> City:
        return await session.query(PROMPT, City, lm=lm, vars={"city": city})

    report = await lf.eval.run(
        task,
        _dataset(),
        [lf.eval.exact, lf.eval.fields()],
        progress=False,
    )
    by_id = {r.case.id: r for r in report}
    assert isinstance(by_id["Paris"].output, City)
    assert by_id["Paris"].scores["exact"].score.score is True
    assert by_id["Lyon"].scores["exact"].score.score is False
    assert by_id["Lyon"].scores["fields.country"].score.score is False
    assert by_id["Lyon"].scores["fields.population"].score.score is True
    assert by_id["Nice"].scores["fields.name"].score.score is False
    assert report.metrics["exact"].value == pytest.approx(1 / 3)
    assert report.metrics["fields.population"].value == 1.0
    assert report.metrics["exact"].kind == "pass_rate"
    ci = lf.eval.fields(only=["name"], compare={"name": lambda a, b: a.lower() == b.lower()})
    nice = by_id["Nice"]
    assert ci(lf.eval.EvalContext(nice.case, nice.output)) == {"name": True}


async def test_numeric_and_contains_on_text_answers() -> None:
    lm = StaticResponse("The answer is 41.9")
    case = lf.eval.Case("q", expected=42)
    answer = await lf.query("q", lm=lm)
    number = lf.eval.EvalContext(case, answer.rsplit(" ", 1)[1])
    assert lf.eval.numeric(tol=0.5)(number).score is True
    strict = lf.eval.numeric(tol=0.01)(number)
    assert strict.score is False and "0.1 from 42" in (strict.reason or "")
    not_a_number = lf.eval.numeric(tol=1)(lf.eval.EvalContext(case, answer))
    assert not_a_number.score is False and "not a number" in (not_a_number.reason or "")
    text = lf.eval.EvalContext(lf.eval.Case("q", expected="41.9"), answer)
    assert lf.eval.contains(text) is True
    words = lf.eval.EvalContext(lf.eval.Case("q", expected=["answer", "43"]), answer)
    assert lf.eval.contains(words) is False


def _agent_model() -> Scripted:
    def step(request: LMRequest) -> Any:
        if any(isinstance(m, lf.ToolMessage) for m in request.messages) or any(
            "tool" in getattr(m, "role", "") for m in request.messages
        ):
            return "The sum is 3."
        if "skip" in request.messages[-1].text:
            return "I know it: 3."
        return lf.ToolCall("c1", "add", {"a": 1, "b": 2})

    return Scripted([step], loop=True)


@lf.tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_trace_checks_read_the_agent_run_of_each_case() -> None:
    lm = _agent_model()

    async def task(prompt: str, session: lf.Session) -> str:
        return await lf.Agent(prompt, tools=[add]).invoke(session, lm=lm)

    prices = {"scripted": lf.Price(prompt=1_000_000, completion=0)}
    ds = lf.eval.Dataset(
        [lf.eval.Case("add 1 and 2", id="tool"), lf.eval.Case("skip the tool", id="direct")]
    )
    report = await lf.eval.run(
        task,
        ds,
        [
            lf.eval.tool_called("add"),
            lf.eval.tool_not_called("add"),
            lf.eval.max_steps(1),
            lf.eval.max_cost(1000),
        ],
        progress=False,
    )
    tool, direct = report.results
    assert tool.scores["tool_called:add"].score.score is True
    assert direct.scores["tool_called:add"].score.score is False
    assert tool.scores["tool_not_called:add"].score.score is False
    assert direct.scores["tool_not_called:add"].score.score is True
    assert tool.scores["max_steps:1"].score.score is False  # two model requests
    assert "2 model request(s)" in (tool.scores["max_steps:1"].score.reason or "")
    assert direct.scores["max_steps:1"].score.score is True
    # priced: the two-request tool run costs more than the one-request answer
    tool_trace = report.session.find(tool.node_id)
    direct_trace = report.session.find(direct.node_id)
    tool_cost = lf.eval.trace_cost(tool_trace, prices)
    direct_cost = lf.eval.trace_cost(direct_trace, prices)
    assert tool_cost > direct_cost > 0
    bound = lf.eval.max_cost((tool_cost + direct_cost) / 2, prices=prices)
    assert bound(lf.eval.EvalContext(tool.case, tool.output, tool_trace)).score is False
    assert bound(lf.eval.EvalContext(direct.case, direct.output, direct_trace)).score is True
    # without prices the cost is unknown: an error for the case, never a pass
    unpriced = [r.scores["max_cost:1000"] for r in report]
    assert all(s.error is not None and s.error["type"] == "LookupError" for s in unpriced)


async def test_an_evaluator_that_raises_is_an_error_not_a_zero() -> None:
    def flaky(ctx: lf.eval.EvalContext) -> bool:
        if ctx.case.id == "1":
            raise ZeroDivisionError("division by zero in my evaluator")
        return True

    def wrong_type(ctx: lf.eval.EvalContext) -> Any:
        return "yes"

    report = await lf.eval.run(_echo_task, ["a", "b", "c"], [flaky, wrong_type], progress=False)
    flaky_metric = report.metrics["flaky"]
    # the error is not a pass: 2 of 3 trials passed (never 100% of the 2 that scored)
    assert flaky_metric.value == pytest.approx(2 / 3) and flaky_metric.n == 3
    assert flaky_metric.errors == 1 and flaky_metric.scored == 2
    assert report[1].scores["flaky"].error == {
        "type": "ZeroDivisionError",
        "message": "division by zero in my evaluator",
    }
    assert report[0].scores["wrong_type"].error["type"] == "TypeError"
    assert report.metrics["wrong_type"].scored == 0 and report.metrics["wrong_type"].value == 0
    assert "(n=3, 1 error)" in str(flaky_metric)


async def _echo_task(inputs: Any) -> Any:
    return inputs


async def test_judge_answers_with_a_typed_verdict_traced_under_the_case() -> None:
    judge_lm = Scripted(
        [
            "Verdict(reason='It names the capital.', passed=True)",
            "Verdict(reason='Paris is not in Italy.', passed=False)",
            "not a verdict at all",
        ]
    )
    judge = lf.eval.judge(judge_lm, "The answer names the right capital.")
    answers = {"France": "Paris", "Italy": "Paris", "Spain": "Madrid"}

    async def task(country: str) -> str:
        return answers[country]

    report = await lf.eval.run(task, list(answers), [judge], max_concurrency=1, progress=False)
    france, italy, spain = report.results
    assert france.scores["judge"].score == lf.eval.Score(True, "pass", "It names the capital.")
    assert italy.scores["judge"].score.score is False
    assert italy.scores["judge"].score.reason == "Paris is not in Italy."
    assert spain.scores["judge"].error is not None
    assert spain.scores["judge"].error["type"] == "MappingError"
    # the judge's query is a node of the case's trace, under the trial's evaluate node
    item = report.session.find(france.node_id)
    kinds = [(n.kind, n.name) for n in item.walk()]
    assert ("action", "evaluate") in kinds and ("query", "query:Verdict") in kinds
    prompt = judge_lm.requests[0].messages[-1].text
    assert "The answer names the right capital." in prompt and "Paris" in prompt


def test_a_class_or_an_unnamed_evaluator_is_refused() -> None:
    from langfx_nb.eval.score import evaluator_names

    with pytest.raises(TypeError, match="is a class"):
        evaluator_names([lf.eval.fields])
    with pytest.raises(ValueError, match="without a name"):
        evaluator_names([lambda ctx: True])
    with pytest.raises(ValueError, match="two evaluators are named 'exact'"):
        evaluator_names([lf.eval.exact, lf.eval.exact])
    assert list(evaluator_names({"ok": lambda ctx: True})) == ["ok"]


async def test_an_evaluator_error_keeps_where_it_was_raised(tmp_path: Path) -> None:
    """A bug in an evaluator shows its traceback, not only its class and message; it is
    stored with the trial (a resumed run and a loaded report show it too)."""

    def first_word(ctx: lf.eval.EvalContext) -> bool:
        return bool(ctx.output.split()[0])  # the bug: an empty answer has no first word

    path = tmp_path / "e.sqlite"
    report = await lf.eval.run(_echo_task, ["a b", ""], [first_word], run=path, live=False)
    record = report[1].scores["first_word"]
    assert record.error == {"type": "IndexError", "message": "list index out of range"}
    assert record.traceback is not None and "in first_word" in record.traceback
    assert "ctx.output.split()[0]" in record.traceback
    assert report[0].scores["first_word"].traceback is None
    again = await lf.eval.run(_echo_task, ["a b", ""], [first_word], run=path, live=False)
    assert again[1].resumed and again[1].scores["first_word"].traceback == record.traceback
    report.save(tmp_path / "r.json")
    loaded = lf.eval.Report.load(tmp_path / "r.json")
    assert loaded[1].scores["first_word"].traceback == record.traceback
