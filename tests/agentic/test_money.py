"""What a cost shows as: one rule for the kernel's text and the widgets
(``js/test/money.test.ts`` checks the same table against ``js/src/dom.ts``)."""

from __future__ import annotations

import json
from pathlib import Path

import langfx_nb as lf
from langfx_nb.agentic.usage import cost_label, fmt_money

TABLE = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures" / "money.json"


def test_each_cost_shows_as_the_table_says() -> None:
    for cost, text in json.loads(TABLE.read_text())["cases"]:
        assert fmt_money(cost) == text, cost


def test_a_small_known_cost_keeps_its_significant_digits() -> None:
    cost = lf.Price(1.07, 0.0).cost(lf.Usage(prompt_tokens=10))  # $0.0000107
    assert cost_label(cost) == "$0.000011"
    assert cost_label(cost, 2) == "≥ $0.000011 (2 calls unpriced)"
