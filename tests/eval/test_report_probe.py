"""``lf.eval.Report.load`` of a report file from elsewhere: a malformed report is one
``ValueError`` naming the report, never another error out of the reader, and a report that
loads shows and saves again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from langfx_nb.eval.report import Report

_OK = {"case": {"inputs": {"q": 1}}, "status": "ok", "output": "x", "scores": []}


def _report(results: Any, **more: Any) -> str:
    head = {"format": "langfx_nb.eval.report", "version": 1, "name": "r", "repeats": 1}
    return json.dumps({**head, "results": results, **more})


_HOSTILE = {
    # RecursionError from json.loads
    "nested too deeply": _report([]).replace("[]", "[" * 100_000 + "]" * 100_000),
    # OverflowError: cannot convert float infinity to integer (1e999 parses as inf)
    "a repeat of 1e999": _report([{**_OK, "repeat": 0}]).replace('"repeat": 0', '"repeat": 1e999'),
    "repeats of 1e999": _report([]).replace('"repeats": 1', '"repeats": 1e999'),
    "unpriced of 1e999": _report([{**_OK, "unpriced": 0}]).replace(
        '"unpriced": 0', '"unpriced": 1e999'
    ),
    # AttributeError: 'int' object has no attribute 'get' (ScoreRecord.from_json)
    "scores that are numbers": _report([{**_OK, "scores": [1, 2]}]),
    # AttributeError: 'list' object has no attribute 'get' (Usage.from_json)
    "usage that is a list": _report([{**_OK, "usage": [1]}]),
    # loads, then report.to_json() (save) raises TypeError: cannot convert dictionary update
    # sequence element #0 to a sequence
    "case metadata that is a list": _report([{**_OK, "case": {"inputs": 1, "metadata": [1, 2]}}]),
    "an error that is a list": _report([{**_OK, "status": "failed", "error": [1, 2]}]),
    # TypeError: 'int' object is not iterable
    "results that are a number": _report(5),
}


@pytest.mark.parametrize("hostile", list(_HOSTILE))
def test_a_malformed_report_is_one_value_error(tmp_path: Path, hostile: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(_HOSTILE[hostile])
    with pytest.raises(ValueError, match="report"):
        report = Report.load(path)
        report.summary()  # a report that loads must show and save again:
        report.to_json()  # some errors wait until here


SECRET = "sk-proj-abcdefghijklmnop1234567890"


async def leaky_task(x: int) -> int:
    if x == 1:
        raise RuntimeError(f"auth failed: api_key={SECRET}")
    return x


def leaky_evaluator(ctx: Any) -> bool:
    raise ValueError(f"judge call failed: Authorization: Bearer {SECRET}")


def test_a_saved_report_and_its_manifest_never_hold_a_credential(tmp_path: Path) -> None:
    # neither the tracebacks nor the short error messages beside them, in report.to_json(),
    # the saved report file or the run manifest
    import langfx_nb as lf

    run = tmp_path / "eval.sqlite"
    report = asyncio.run(
        lf.eval.run(leaky_task, [0, 1, 2], {"ev": leaky_evaluator}, run=run, progress=False)
    )
    report.save(tmp_path / "report.json")
    assert SECRET not in (tmp_path / "report.json").read_text()
    assert SECRET.encode() not in run.read_bytes()
