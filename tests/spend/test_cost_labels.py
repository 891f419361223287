"""A total that leaves unpriced calls out says so: ``≥ $1.23 (3 calls unpriced)``, in the
batch totals and progress, the session summary, the explorer's roll-ups and the evaluation
report; a total with nothing priced is ``cost unknown``, never ``$0``."""

from __future__ import annotations

from typing import Any

import langfx_nb as lf
from langfx_nb.agentic.usage import cost_label
from langfx_nb.llms.fake import Echo, StaticResponse
from langfx_nb.notebook.eval_report import case_row, report_summary
from langfx_nb.notebook.render import batch_html
from tests.notebook.trace_oracle import trace_rows

# $0.10 per token: Echo's few tokens cost cents
PRICES = {"fake:echo": lf.Price(prompt=100_000.0, completion=100_000.0)}


def test_the_label_of_a_total() -> None:
    assert cost_label(1.234) == "$1.23"
    assert cost_label(0.0042) == "$0.0042"
    assert cost_label(0.125) == "$0.13"  # half up, as the widgets' toFixed rounds
    assert cost_label(1.234, 3) == "≥ $1.23 (3 calls unpriced)"
    assert cost_label(1.234, 1, ["fake:b"]) == "≥ $1.23 (1 call unpriced: fake:b)"
    assert cost_label(None, 2) == "cost unknown (2 calls unpriced)"
    assert cost_label(None) == "cost unknown"
    assert cost_label(0.0) == "$0.0000"  # a priced free call is a real zero


def mixed_fn() -> Any:
    priced, unpriced = Echo(), StaticResponse("plain")

    async def fn(i: int, session: lf.Session) -> str:
        out: str = await session.query(f"item {i}", lm=priced if i % 2 else unpriced)
        return out

    return fn


async def test_a_batch_total_that_leaves_calls_out_is_labelled_partial() -> None:
    seen: list[lf.BatchProgress] = []
    async with lf.Session(prices=PRICES) as session:
        result = await lf.batch(mixed_fn(), range(6), session=session, progress=seen.append)
        summary = session.usage_summary
        nodes = session.trace_json()["nodes"]
    totals = result.totals
    assert totals.requests == 6 and totals.unpriced_requests == 3
    assert totals.cost is not None and totals.cost > 0
    partial = f"≥ ${totals.cost:.2f} (3 calls unpriced: fake:staticresponse)"
    assert totals.cost_text == partial
    final = seen[-1]
    assert final.finished and final.unpriced_requests == 3
    assert partial in final.line()
    assert partial in batch_html({**final.to_json(), "status": "done"})
    # the session's own summary, and the explorer's roll-up over the batch node
    assert summary.unpriced_requests == 3 and summary.cost_text == partial
    rows = {r["name"]: r for r in trace_rows(nodes)}
    batch_row = next(r for r in rows.values() if r["kind"] == "batch")
    assert batch_row["cost"] == f"≥ ${totals.cost:.2f} (3 calls unpriced)"
    # an item whose one call was unpriced is unknown, not $0; a priced one is its cost
    items = [r for r in trace_rows(nodes) if r["kind"] == "item"]
    assert {r["cost"] for r in items[0::2]} == {"—"}
    assert all(r["cost"].startswith("$") for r in items[1::2])


async def test_a_batch_with_nothing_priced_is_cost_unknown() -> None:
    result = await lf.batch(mixed_fn(), [0, 2], progress=False)
    assert result.totals.cost is None and result.totals.unpriced_requests == 2
    assert result.totals.cost_text == "cost unknown (2 calls unpriced: fake:staticresponse)"


async def test_an_eval_report_labels_a_partial_cost() -> None:
    priced, unpriced = Echo(), StaticResponse("plain")

    async def task(text: str, session: lf.Session) -> str:
        out: str = await session.query(text, lm=priced if text.startswith("p") else unpriced)
        return out

    cases = [lf.eval.Case("p one"), lf.eval.Case("u two"), lf.eval.Case("u three")]
    async with lf.Session(prices=PRICES) as session:
        report = await lf.eval.run(
            task, lf.eval.Dataset(cases), [lf.eval.exact], session=session, progress=False
        )
    assert report.unpriced == 2
    assert report.cost is not None
    label = f"≥ ${report.cost:.2f} (2 calls unpriced)"
    assert report.cost_text == label
    assert f"cost: {label}" in report.summary()
    shown = report_summary(report)
    assert shown["unpriced"] == 2 and shown["cost"] == report.cost
    rows = {r.case.inputs: case_row(r) for r in report.results}
    assert rows["u two"].get("unpriced") == 1 and "cost" not in rows["u two"]
    assert "unpriced" not in rows["p one"] and rows["p one"]["cost"] > 0
    # kept through the report's JSON (a saved report shows the same label)
    again = type(report.results[0]).from_json(report.results[1].to_json())
    assert again.unpriced == 1
