"""``lf.eval.compare`` on two recorded runs: saved as JSON, loaded back, compared."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from pydantic import BaseModel

import langfx_nb as lf
from langfx_nb.eval import report as report_module


class Answer(BaseModel):
    value: int


def _dataset() -> lf.eval.Dataset:
    return lf.eval.Dataset(
        [
            lf.eval.Case(i, expected=Answer(value=i * 2), id=f"c{i}", metadata={"big": i >= 20})
            for i in range(40)
        ],
        output_type=Answer,
    )


async def _recorded(path: Path, wrong: set[int], name: str) -> lf.eval.Report:
    async def task(x: int) -> Answer:
        return Answer(value=x * 2 + (1 if x in wrong else 0))

    def closeness(ctx: lf.eval.EvalContext) -> float:
        return 1.0 / (1 + abs(ctx.output.value - ctx.expected.value))

    report = await lf.eval.run(
        task, _dataset(), [lf.eval.exact, closeness], name=name, progress=False
    )
    report.save(path)
    return lf.eval.Report.load(path, output_type=Answer)


async def test_two_recorded_runs_regressions_first_and_noise(tmp_path: Path) -> None:
    base = await _recorded(tmp_path / "a.json", wrong={3}, name="baseline")
    # b fixes case 3 and breaks the twenty "big" cases
    worse = await _recorded(tmp_path / "b.json", wrong=set(range(20, 40)), name="candidate")
    assert isinstance(base[0].output, Answer)  # typed back from the saved JSON
    cmp = lf.eval.compare(base, worse)
    assert [c.change for c in cmp.cases[:20]] == ["regressed"] * 20
    assert cmp.cases[20].case_id == "c3" and cmp.cases[20].change == "improved"
    assert {c.change for c in cmp.cases[21:]} == {"same"}
    assert cmp.cases[0].deltas["exact"] == -1.0
    assert cmp.cases[0].output_b == Answer(value=41)
    exact = cmp.metrics["exact"]
    assert exact.difference.value == pytest.approx((1 - 20) / 40)
    assert exact.beyond_noise and exact.difference.high < 0
    assert "beyond noise" in str(exact)
    assert len(cmp.regressions) == 20 and [c.case_id for c in cmp.improvements] == ["c3"]
    assert "20 regressed, 1 improved, 19 same" in cmp.summary()

    # one case changing out of forty is within the noise
    slight = await _recorded(tmp_path / "c.json", wrong={3, 7}, name="slight")
    small = lf.eval.compare(base, slight).metrics["exact"]
    assert small.difference.value == pytest.approx(-1 / 40)
    assert not small.beyond_noise and small.difference.low < 0 < small.difference.high


async def test_added_and_removed_cases_and_identical_runs(tmp_path: Path) -> None:
    base = await _recorded(tmp_path / "a.json", wrong=set(), name="a")
    fewer = lf.eval.Report([r for r in base if r.case.id != "c0"], name="fewer")
    cmp = lf.eval.compare(base, fewer)
    assert cmp.cases[0].change == "removed" and cmp.cases[0].case_id == "c0"
    back = lf.eval.compare(fewer, base)
    assert back.cases[0].change == "added" and back.cases[-1].change == "same"
    same = lf.eval.compare(base, base).metrics["exact"]
    assert same.difference.value == 0 and not same.beyond_noise


def test_a_malformed_report_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a langfx_nb evaluation report"):
        lf.eval.Report.load(path)
    path.write_text('{"format": "langfx_nb.eval.report", "version": 1, "results": [{}]}')
    with pytest.raises(ValueError, match=r"malformed report: results\[0\]"):
        lf.eval.Report.load(path)
    path.write_text('{"format": "langfx_nb.eval.report", "version": 1, "repeats": [2]}')
    with pytest.raises(ValueError, match="malformed report"):
        lf.eval.Report.load(path)


def test_a_report_path_that_is_no_regular_file_or_too_big_is_refused_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo, zero = tmp_path / "fifo.json", tmp_path / "zero.json"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    zero.symlink_to("/dev/zero")  # reading it would never end
    for path in (fifo, zero, tmp_path):
        with pytest.raises(ValueError, match="not a regular file"):
            lf.eval.Report.load(path)
    big = tmp_path / "big.json"
    big.write_text('{"format": "langfx_nb.eval.report", "version": 1, "results": []}')
    monkeypatch.setattr(report_module, "MAX_REPORT_BYTES", 10)
    with pytest.raises(ValueError, match="larger than"):
        lf.eval.Report.load(big)


def test_wilson_and_standard_error_figures() -> None:
    # reference values: Wilson 95 % for 8/10 is [0.4902, 0.9433]
    iv = lf.eval.wilson(8, 10)
    assert (round(iv.low, 4), round(iv.high, 4)) == (0.4902, 0.9433)
    assert lf.eval.wilson(0, 5).low == 0.0 and lf.eval.wilson(0, 5).high > 0
    m = lf.eval.mean_interval([1.0, 2.0, 3.0, 4.0])
    assert m.value == 2.5 and m.se == pytest.approx(math.sqrt(5 / 3 / 4))
    assert math.isinf(lf.eval.mean_interval([1.0]).high)
