"""What a run keeps per item beside its result: the input that gave it (a bounded, masked
preview in the manifest) and, for a failed item, where it failed (its traceback, in the
result, the item's trace node and the manifest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import langfx_nb as lf
from langfx_nb.batch.codec import MAX_INPUT_CHARS


def _name_of(row: dict[str, Any]) -> str:
    return str(row["name"])  # the line a traceback must show


async def greet(row: dict[str, Any]) -> str:
    return "hello " + _name_of(row)


ROWS: list[dict[str, Any]] = [{"name": "ada"}, {"nom": "bob"}, {"name": "cy"}]


async def test_a_failed_item_keeps_its_traceback(tmp_path: Path) -> None:
    run = tmp_path / "tb.sqlite"
    result = await lf.batch(greet, ROWS, run=run, progress=False)
    assert result.statuses == ["ok", "failed", "ok"]
    error = result.errors[1]
    assert error is not None and (error.type, error.message) == ("KeyError", "'name'")
    tb = error.traceback or ""
    assert tb.startswith("Traceback (most recent call last):")
    assert "in greet" in tb and "in _name_of" in tb and 'return str(row["name"])' in tb
    assert tb.rstrip().endswith("KeyError: 'name'")
    # the item's trace node (the one contract the views read) holds the same text
    node = result.session.find(result.node_ids[1] or "") if result.session else None
    assert node is not None and node.error is not None and node.error["traceback"] == tb
    # and the manifest: read back without running anything
    stored = lf.BatchResult.load(run)
    by_key = dict(zip(stored.keys, stored.errors, strict=True))
    assert by_key[result.keys[1]] is not None and by_key[result.keys[1]].traceback == tb  # type: ignore[union-attr]
    assert result.to_records()[1]["error_traceback"] == tb


async def test_a_traceback_masks_secrets_and_keeps_the_cause() -> None:
    async def fn(x: int) -> int:
        try:
            {}["missing"]
        except KeyError as exc:
            raise RuntimeError("lookup failed") from exc
        return x

    async def leaky(x: int) -> int:
        api_key = "sk-live-0123456789abcdef"  # a literal key on the failing line's frame
        raise ValueError(f"bad api_key={api_key}")

    result = await lf.batch(fn, [1], progress=False)
    tb = result.errors[0].traceback if result.errors[0] else ""
    assert tb is not None
    assert "KeyError: 'missing'" in tb and "direct cause" in tb
    assert tb.index("KeyError") < tb.index("RuntimeError: lookup failed")
    result = await lf.batch(leaky, [1], progress=False)
    tb = result.errors[0].traceback if result.errors[0] else ""
    assert tb is not None and "ValueError" in tb and "0123456789abcdef" not in tb


async def test_each_stored_result_keeps_its_input(tmp_path: Path) -> None:
    run = tmp_path / "in.sqlite"
    rows: list[Any] = [
        *ROWS,
        {"name": "key", "api_key": "sk-live-0123456789abcdef"},
        "x" * (MAX_INPUT_CHARS + 100),
    ]
    result = await lf.batch(greet, rows, run=run, progress=False)
    assert result.inputs == rows  # this run: the items themselves
    assert result.to_records()[0]["input"] == {"name": "ada"}
    stored = lf.BatchResult.load(run)
    by_key = dict(zip(stored.keys, stored.inputs, strict=True))
    assert [by_key[k] for k in result.keys[:3]] == ROWS  # failed or ok, each with its input
    assert by_key[result.keys[3]] == {"name": "key", "api_key": "<redacted>"}
    cut = by_key[result.keys[4]]
    assert isinstance(cut, str) and len(cut) == MAX_INPUT_CHARS and cut.endswith("…")
    assert b"0123456789abcdef" not in run.read_bytes()
    values = dict(zip(stored.keys, stored.results, strict=True))
    assert values[result.keys[0]] == "hello ada" and values[result.keys[1]] is None
    assert stored.identity == result.identity and stored.statuses.count("failed") == 2


async def test_every_kind_of_item_keeps_the_same_input(tmp_path: Path) -> None:
    # short and long items, strings and objects, keyed by their JSON or by key=
    rows: list[Any] = [{"name": "ada"}, {"name": "y" * 300}, "plain", {"name": "z" * 5000}]
    expected = [*rows[:3], None]
    for key in (None, lambda row: str(row)[:40] + str(len(str(row)))):
        run = tmp_path / f"{key is None}.sqlite"
        result = await lf.batch(greet, rows, run=run, key=key, progress=False)
        stored = lf.BatchResult.load(run)
        by_key = dict(zip(stored.keys, stored.inputs, strict=True))
        inputs = [by_key[k] for k in result.keys]
        cut = inputs[3]
        assert isinstance(cut, str) and cut.startswith('{"name":"zzz') and cut.endswith("…")
        assert [*inputs[:3], None] == expected
