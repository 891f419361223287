"""``lf.eval.Case`` and ``lf.eval.Dataset``: the cases an evaluation runs over.

A case is ``inputs`` (what the task is given), ``expected`` (what a good answer looks like,
optional) and ``metadata`` (tags to break results down by, e.g. ``{"topic": "dates"}``). Each
case has an ``id``: given, or the case's position in the dataset (``"0"``, ``"1"``, ...). A
resumed evaluation matches finished work to cases by id, so give stable ids (``id=`` or an id
column) when the dataset may be reordered between runs.

Typed datasets: ``Dataset(..., input_type=Question, output_type=Answer)`` validates every
case's ``inputs`` (and ``expected``) through pydantic when the dataset is built, so a bad row
fails at once with its row number, not halfway through a paid run. ``output_type`` also types
the task's answers when a saved report or a resumed run reads them back.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..batch.codec import is_dataframe
from ..jsonable import walk

__all__ = ["Case", "Dataset"]


@dataclass(frozen=True, slots=True)
class Case:
    """One example: ``inputs`` for the task, the ``expected`` answer, ``metadata`` tags.

    ``id`` names the case in reports, comparisons and resumed runs (a ``Dataset`` gives
    id-less cases their position)."""

    inputs: Any
    expected: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The case as plain JSON data (pydantic values dumped), as ``to_jsonl`` writes it."""
        out: dict[str, Any] = {"id": self.id, "inputs": walk(self.inputs)}
        if self.expected is not None:
            out["expected"] = walk(self.expected)
        if self.metadata:
            out["metadata"] = walk(dict(self.metadata))
        return out


_RECORD_KEYS = frozenset({"id", "inputs", "expected", "metadata"})


class Dataset(Sequence[Case]):
    """An ordered collection of cases with unique ids.

    ``Dataset([Case(...), ...])``, or from plain data: a mapping with an ``inputs`` key is a
    case record (``{"inputs": ..., "expected": ..., "metadata": ..., "id": ...}``), anything
    else is the inputs of a case with no expected answer. Tables (rows as mappings) go
    through ``from_records`` / ``from_csv`` / ``from_jsonl`` / ``from_pandas``, which say
    which columns are the inputs, the expected answer, the metadata and the id.

    A malformed case raises ``ValueError`` (``TypeError`` for a wrong kind of value) naming
    its row; duplicate ids raise ``ValueError``. A pandas ``DataFrame`` (which iterates over
    its column names) raises ``TypeError`` naming ``from_pandas``.
    """

    __slots__ = ("_by_id", "_cases", "input_type", "name", "output_type")

    def __init__(
        self,
        cases: Iterable[Case | Mapping[str, Any] | Any],
        *,
        name: str = "",
        input_type: Any = None,
        output_type: Any = None,
    ) -> None:
        if is_dataframe(cases):
            raise TypeError(
                "a pandas DataFrame iterates over its column names, not its rows: pass "
                "lf.eval.Dataset.from_pandas(df, expected=..., id=...), which names the "
                "columns holding each case's expected answer and id (the rest are its inputs)"
            )
        self.name = name
        self.input_type = input_type
        self.output_type = output_type
        inputs_adapter = _adapter(input_type)
        expected_adapter = _adapter(output_type)
        built: list[Case] = []
        by_id: dict[str, int] = {}
        for row, raw in enumerate(cases):
            case = _as_case(raw, row)
            inputs, expected = case.inputs, case.expected
            if inputs_adapter is not None:
                inputs = _validate(inputs_adapter, inputs, row, "inputs")
            if expected_adapter is not None and expected is not None:
                expected = _validate(expected_adapter, expected, row, "expected")
            case_id = str(row) if case.id is None else str(case.id)
            if case_id in by_id:
                raise ValueError(
                    f"row {row}: the case id {case_id!r} is already used by row {by_id[case_id]}"
                )
            by_id[case_id] = row
            built.append(Case(inputs, expected, dict(case.metadata), case_id))
        self._cases = built
        self._by_id = by_id

    # -- Sequence ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._cases)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return Dataset(
                self._cases[index],
                name=self.name,
                input_type=self.input_type,
                output_type=self.output_type,
            )
        return self._cases[index]

    def __iter__(self) -> Iterator[Case]:
        return iter(self._cases)

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"Dataset{name}({len(self)} cases)"

    def case(self, case_id: str) -> Case:
        """The case with this id (``KeyError`` when there is none)."""
        return self._cases[self._by_id[str(case_id)]]

    @property
    def ids(self) -> list[str]:
        return [c.id or "" for c in self._cases]

    # -- builders ------------------------------------------------------------------------
    @classmethod
    def from_records(
        cls,
        rows: Iterable[Mapping[str, Any]],
        *,
        inputs: str | Sequence[str] | None = None,
        expected: str | None = None,
        metadata: Sequence[str] = (),
        id: str | None = None,
        name: str = "",
        input_type: Any = None,
        output_type: Any = None,
    ) -> Dataset:
        """Cases from table rows (mappings of column → value).

        ``inputs`` is one column (the inputs are its value), several (a dict of them), or
        ``None``: every column not named as ``expected``, ``metadata`` or ``id``. A row
        missing a named column raises ``ValueError`` naming the row and the column.
        """
        if isinstance(metadata, str):
            metadata = (metadata,)
        taken = {c for c in (expected, id) if c is not None} | set(metadata)

        def build() -> Iterator[Case]:
            for row, record in enumerate(rows):
                if not isinstance(record, Mapping):
                    raise TypeError(f"row {row}: a row is a mapping, not {type(record).__name__}")

                def column(name: str, row: int = row, record: Mapping[str, Any] = record) -> Any:
                    if name not in record:
                        raise ValueError(f"row {row}: no column {name!r}")
                    return record[name]

                if isinstance(inputs, str):
                    value: Any = column(inputs)
                elif inputs is None:
                    value = {k: v for k, v in record.items() if k not in taken}
                else:
                    value = {c: column(c) for c in inputs}
                case_id = column(id) if id is not None else None
                yield Case(
                    value,
                    column(expected) if expected is not None else None,
                    {c: column(c) for c in metadata},
                    None if case_id is None else str(case_id),
                )

        return cls(build(), name=name, input_type=input_type, output_type=output_type)

    @classmethod
    def from_jsonl(cls, path: str | Path, **options: Any) -> Dataset:
        """Cases from a JSON Lines file: one object per line (blank lines skipped).

        With no column options, lines that have an ``inputs`` key are case records (what
        ``to_jsonl`` writes); otherwise the options are those of ``from_records``. A line that
        is not a JSON object raises ``ValueError`` naming the line."""
        rows: list[Mapping[str, Any]] = []
        with Path(path).open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{path}: line {number} is not JSON ({exc})") from exc
                if not isinstance(data, dict):
                    raise ValueError(f"{path}: line {number} is not a JSON object")
                rows.append(data)
        column_options = {"inputs", "expected", "metadata", "id"} & set(options)
        if not column_options and rows and all("inputs" in r for r in rows):
            kept = {k: v for k, v in options.items() if k not in column_options}
            return cls(rows, **kept)
        return cls.from_records(rows, **options)

    @classmethod
    def from_csv(cls, path: str | Path, **options: Any) -> Dataset:
        """Cases from a CSV file with a header row (``from_records`` options). CSV values
        are text: give ``input_type`` / ``output_type`` to have pydantic convert them."""
        with Path(path).open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        return cls.from_records(rows, **options)

    @classmethod
    def from_pandas(cls, frame: Any, **options: Any) -> Dataset:
        """Cases from a pandas ``DataFrame`` (``from_records`` options); pandas is not a
        dependency of langfx_nb, the frame only needs ``to_dict("records")``."""
        to_dict = getattr(frame, "to_dict", None)
        if to_dict is None:
            raise TypeError(f"from_pandas takes a DataFrame, not {type(frame).__name__}")
        return cls.from_records(to_dict("records"), **options)

    def to_jsonl(self, path: str | Path) -> None:
        """Write the cases as JSON Lines case records (``from_jsonl`` reads them back)."""
        with Path(path).open("w", encoding="utf-8") as f:
            for case in self._cases:
                f.write(json.dumps(case.to_json(), ensure_ascii=False) + "\n")


def _as_case(raw: Any, row: int) -> Case:
    if isinstance(raw, Case):
        return raw
    if isinstance(raw, Mapping) and "inputs" in raw:
        unknown = set(raw) - _RECORD_KEYS
        if unknown:
            raise ValueError(f"row {row}: unknown case keys {sorted(map(str, unknown))}")
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise TypeError(f"row {row}: metadata is a mapping, not {type(metadata).__name__}")
        case_id = raw.get("id")
        return Case(
            raw["inputs"], raw.get("expected"), metadata, None if case_id is None else str(case_id)
        )
    return Case(raw)


def _adapter(tp: Any) -> Any:
    if tp is None:
        return None
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


def _validate(adapter: Any, value: Any, row: int, what: str) -> Any:
    from pydantic import ValidationError

    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or what
        raise ValueError(
            f"row {row}: invalid {what}: {where}: {first.get('msg', 'invalid')}"
            f" ({exc.error_count()} error(s))"
        ) from exc
