"""``Session.load_trace`` on a malformed file: one ``ValueError`` naming what is wrong."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import langfx_nb as lf
from langfx_nb.llms import Echo


async def _saved() -> dict[str, Any]:
    async with lf.Session(Echo()) as session:
        await session.query("hello")
        session.log("info", "done")
    data: dict[str, Any] = session.trace_json()
    return data


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "nodes not a list": (_set(("nodes",), {"a": 1}), "'nodes'"),
    "a node not an object": (_set(("nodes", 1), "oops"), "nodes[1]"),
    "a node without kind": (_drop(("nodes", 1, "kind")), "nodes[1]: 'kind' is missing"),
    "a node without id": (_drop(("nodes", 0, "id")), "nodes[0]: 'id' is missing"),
    "an unknown kind": (_set(("nodes", 1, "kind"), ["x"]), "nodes[1]"),
    "start not a number": (_set(("nodes", 1, "start"), "noon"), "nodes[1]"),
    "end not a number": (_set(("nodes", 1, "end"), {"t": 1}), "nodes[1]"),
    "usage not an object": (_set(("nodes", 1, "usage"), [1, 2]), "nodes[1]"),
    "metadata not an object": (_set(("nodes", 1, "metadata"), "m"), "nodes[1]"),
    "usage counts not numbers": (_set(("nodes", 1, "usage"), {"prompt_tokens": "x"}), "nodes[1]"),
    "evicted_children not a number": (_set(("nodes", 1, "evicted_children"), "x"), "nodes[1]"),
    "a node its own parent": (
        lambda d: d["nodes"][1].__setitem__("parent_id", d["nodes"][1]["id"]),
        "own parent",
    ),
    "a duplicate id": (lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][1])), "twice"),
    "session header not an object": (_set(("session",), ["x"]), "session"),
    "max_trace_nodes not a number": (_set(("session", "max_trace_nodes"), "many"), "session"),
    "summary not an object": (_set(("summary",), 3), "summary"),
    "by_model entry not an object": (_set(("summary", "by_model"), {"m": 1}), "summary"),
    "by_model requests not a number": (
        _set(("summary", "by_model"), {"m": {"requests": "x"}}),
        "summary",
    ),
    "counts not an object": (_set(("counts",), "c"), "counts"),
    "finished counts not numbers": (_set(("counts", "finished"), {"query": {"ok": "x"}}), "counts"),
    "finished counts not an object": (_set(("counts", "finished"), {"query": 5}), "counts"),
    "no session root": (_set(("nodes",), []), "session root"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_malformed_trace_is_one_clear_value_error(case: str) -> None:
    change, named = CASES[case]
    data = await _saved()
    change(data)
    with pytest.raises(ValueError, match="trace") as info:
        lf.Session.load_trace(data)
    assert named in str(info.value)
    with pytest.raises(ValueError):  # the same through the JSON text
        lf.Session.load_trace(json.dumps(data))


@pytest.mark.parametrize("text", ["", "{", "[1, 2]", "null", '"a string"', "42"])
def test_not_a_trace_at_all(text: str) -> None:
    with pytest.raises(ValueError, match="trace"):
        lf.Session.load_trace(text)


async def test_a_valid_trace_still_loads() -> None:
    data = await _saved()
    loaded = lf.Session.load_trace(json.dumps(data))
    assert [n.kind for n in loaded.root.walk()] == [n["kind"] for n in data["nodes"]]
