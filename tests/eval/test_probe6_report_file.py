"""A saved evaluation report read back as data from elsewhere (``Report.load``'s docstring:
"``ValueError`` when it ... is malformed"): a field of the wrong type is refused when the
file is read, not left to break the report's summary (its ``repr``) later."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf


async def echo(text: str) -> str:
    return text


@pytest.mark.parametrize(("field", "value"), [("cost", "0.12"), ("redo", 5), ("status", "odd")])
async def test_a_report_file_with_a_field_of_the_wrong_type_is_refused_on_load(
    tmp_path: Path, field: str, value: Any
) -> None:
    report = await lf.eval.run(echo, ["a"], [lf.eval.exact], progress=False, live=False)
    path = tmp_path / "report.json"
    report.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["results"][0][field] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"malformed report: results\[0\]"):
        loaded = lf.eval.Report.load(path)
        repr(loaded)  # the summary a notebook shows: a TypeError here is the bug
