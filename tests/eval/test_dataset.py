"""Datasets: built from lists, JSONL, CSV and pandas frames, typed through pydantic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

import langfx_nb as lf


class Question(BaseModel):
    text: str
    level: int


class Answer(BaseModel):
    value: int


def test_a_list_of_cases_records_and_plain_values() -> None:
    ds = lf.eval.Dataset(
        [
            lf.eval.Case("2+2", expected="4", metadata={"topic": "add"}, id="q1"),
            {"inputs": "3+3", "expected": "6"},
            "no expected answer",
        ]
    )
    assert len(ds) == 3
    assert ds.ids == ["q1", "1", "2"]
    assert ds.case("1").expected == "6"
    assert ds[2].expected is None and ds[2].inputs == "no expected answer"
    assert ds[0].metadata == {"topic": "add"}
    assert len(ds[:2]) == 2


def test_duplicate_ids_and_unknown_keys_are_refused_with_the_row() -> None:
    with pytest.raises(ValueError, match=r"row 1: the case id 'a' is already used by row 0"):
        lf.eval.Dataset([lf.eval.Case(1, id="a"), lf.eval.Case(2, id="a")])
    with pytest.raises(ValueError, match=r"row 0: unknown case keys \['expectd'\]"):
        lf.eval.Dataset([{"inputs": 1, "expectd": 2}])


def test_typed_inputs_and_expected_answers_are_validated_when_built() -> None:
    ds = lf.eval.Dataset(
        [{"inputs": {"text": "a", "level": "2"}, "expected": {"value": 3}}],
        input_type=Question,
        output_type=Answer,
    )
    assert ds[0].inputs == Question(text="a", level=2)
    assert ds[0].expected == Answer(value=3)
    with pytest.raises(ValueError, match=r"row 1: invalid inputs: level: "):
        lf.eval.Dataset(
            [{"text": "a", "level": 1}, {"text": "b", "level": "high"}], input_type=Question
        )


def test_jsonl_round_trip_and_columns(tmp_path: Path) -> None:
    ds = lf.eval.Dataset(
        [lf.eval.Case({"q": "x"}, expected="y", metadata={"t": 1}), lf.eval.Case("z")]
    )
    path = tmp_path / "cases.jsonl"
    ds.to_jsonl(path)
    back = lf.eval.Dataset.from_jsonl(path)
    assert [c.to_json() for c in back] == [c.to_json() for c in ds]
    table = tmp_path / "table.jsonl"
    table.write_text(
        "\n".join(json.dumps(r) for r in [{"q": "a", "a": "1", "t": "x"}, {"q": "b", "a": "2"}])
        + "\n\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"row 1: no column 't'"):
        lf.eval.Dataset.from_jsonl(table, inputs="q", expected="a", metadata=["t"])
    cols = lf.eval.Dataset.from_jsonl(table, inputs="q", expected="a")
    assert [(c.inputs, c.expected) for c in cols] == [("a", "1"), ("b", "2")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"inputs": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        lf.eval.Dataset.from_jsonl(bad)


def test_csv_with_types_converts_text(tmp_path: Path) -> None:
    path = tmp_path / "cases.csv"
    path.write_text("id,text,level,value,topic\nk1,hi,1,10,greet\nk2,bye,2,20,leave\n")
    ds = lf.eval.Dataset.from_csv(
        path,
        inputs=["text", "level"],
        expected="value",
        metadata=["topic"],
        id="id",
        input_type=Question,
        output_type=int,
    )
    assert ds.ids == ["k1", "k2"]
    assert ds.case("k2").inputs == Question(text="bye", level=2)
    assert ds.case("k2").expected == 20
    assert ds.case("k1").metadata == {"topic": "greet"}


def test_pandas_frame() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"question": ["a", "b"], "answer": ["x", "y"], "split": ["t", "v"]})
    ds = lf.eval.Dataset.from_pandas(frame, expected="answer", metadata=["split"])
    assert [c.inputs for c in ds] == [{"question": "a"}, {"question": "b"}]
    assert [c.metadata["split"] for c in ds] == ["t", "v"]
    with pytest.raises(TypeError, match="takes a DataFrame"):
        lf.eval.Dataset.from_pandas([1, 2])


def test_lf_eval_loads_on_first_use_only() -> None:
    import subprocess
    import sys

    code = (
        "import sys, langfx_nb as lf; assert 'langfx_nb.eval' not in sys.modules; "
        "assert lf.eval.Case is not None; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
    assert "eval" not in lf.__all__  # a star import never shadows the builtin eval
