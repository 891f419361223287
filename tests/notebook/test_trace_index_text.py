"""A stored trace's row and search texts with characters of every width (issue #26).

Each test compares what the store finds and shows with the plain answer over every node:
wide characters, line breaks, case folding that changes lengths, lone surrogates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from langfx_nb.agentic.trace_db import StoredTrace, convert, open_store, save_trace

from .test_trace_index import stored

# 2, 3 and 4 bytes in UTF-8; a Kelvin sign and a dotted I whose lowercase is shorter in bytes
# or longer in characters; a final sigma (lowercased by context); a lone surrogate
WIDE = ["é", "—", "東京", "…", "🙂", "\U0001f600", "\u212a", "İ", "ΑΣ", "\ud800", "ß"]
KINDS = ["query", "tool_call", "log", "action"]


def trace(names: list[str], hints: list[str], errors: list[str | None] | None = None) -> list[Any]:
    """Nodes as the views keep them (with ``hint``): a session, then the given nodes, each a
    child of the session or of the node before it."""
    nodes: list[dict[str, Any]] = [
        {"id": "s", "parent_id": None, "kind": "session", "name": "session", "status": "ok"}
    ]
    for i, (name, hint) in enumerate(zip(names, hints, strict=True)):
        node: dict[str, Any] = {
            "id": f"n{i}",
            "parent_id": "s" if i % 3 == 0 else f"n{i - 1}",
            "kind": KINDS[i % len(KINDS)],
            "name": name,
            "status": "failed" if errors and errors[i] is not None else "ok",
            "start": float(i),
            "end": i + 0.5,
            "hint": hint,
        }
        if errors and errors[i] is not None:
            node["error"] = errors[i]
        nodes.append(node)
    return nodes


def search_text(node: dict[str, Any]) -> str:
    """A node's search text, the plain way: as the page's ``searchText`` (line breaks read as
    spaces, as the index keeps one line per node)."""
    err = node.get("error")
    err_text = "" if err is None else err if isinstance(err, str) else json.dumps(err)
    text = f"{node['name']} {node['kind']} {node['status']} {node.get('hint', '')} {err_text}"
    return text.replace("\n", " ").lower()


def expected(nodes: list[dict[str, Any]], query: str) -> list[str]:
    q = query.strip().lower()
    return [n["id"] for n in nodes if q in search_text(n)]


def found(index: StoredTrace, query: str) -> tuple[int, list[str]]:
    """The match count and the matching nodes (in tree order) the index gives for ``query``."""
    window = index.window(query=query, count=2000)
    assert window["total"] <= 2000
    return window["matches"], [r["node"]["id"] for r in window["rows"] if r.get("match")]


def check(index: StoredTrace, nodes: list[dict[str, Any]], queries: list[str]) -> None:
    """Each query finds exactly the nodes whose text holds it (``trace``'s order is its tree
    order), and each row shows its node's name and hint."""
    for query in queries:
        want = expected(nodes, query)
        assert found(index, query) == (len(want), want), query
    for node in nodes:
        row = index.summary(node["id"])
        assert row is not None
        assert row["name"] == node["name"].replace("\n", " ")
        assert row.get("hint", "") == node.get("hint", "").replace("\n", " ")


def test_wide_characters_anywhere_find_the_same_nodes_as_narrow_text() -> None:
    n = 400
    names = [f"step {i}" for i in range(n)]
    narrow = [f"question {i}" for i in range(n)]
    # the same hints with a wide character before or after the ASCII text in some nodes
    wide = list(narrow)
    for i in range(0, n, 5):
        wide[i] = f"{WIDE[i % len(WIDE)]} {wide[i]}"
    for i in range(0, n, 7):
        wide[i] = f"{wide[i]} {WIDE[i % len(WIDE)]}"
    queries = ["question 1", "question 39", "step 20", "failed", "ok", "query", "n", "zzz"]
    a = stored(trace(names, narrow))
    b = stored(trace(names, wide))
    for query in queries:
        assert found(a, query) == found(b, query), query
    check(b, trace(names, wide), queries + [w.lower() for w in WIDE] + ["🙂 question 5"])


def test_rows_stay_right_after_a_batch_of_wide_text() -> None:
    # nodes are written 1,000 a batch: later batches start after wide ones
    n = 10_050
    names = [f"step {i}" for i in range(n)]
    hints = [f"東京 🙂 {i} —" if i < 10_000 else f"plain {i}" for i in range(n)]
    nodes = trace(names, hints)
    check(stored(nodes), nodes, ["plain 10040", "step 10049", "🙂 9999 —"])


def test_a_match_never_spans_two_nodes_lines() -> None:
    nodes = trace(["first", "second"], ["ends here", "x"])
    index = stored(nodes)
    assert found(index, "ends here ")[0] == 1
    # the end of node 0's line, the line break, the start of node 1's line
    assert found(index, "ends here \nsecond")[0] == 0
    assert found(index, "ends here second")[0] == 0
    check(index, nodes, ["ends here \nsecond", "here \n", "\nsecond"])


def test_names_and_errors_with_line_breaks_and_wide_text_are_one_line_each() -> None:
    names = ["a\nb 🙂", "c", "東京\n\nd", "e"]
    hints = ["h\n1", "h 2 …", "", "İ\nx"]
    errors: list[str | None] = [None, "boom\n🙂", None, "ΑΣ\nz"]
    nodes = trace(names, hints, errors)
    check(
        stored(nodes),
        nodes,
        ["a b", "boom 🙂", "東京  d", "i̇ x", "ας z", "ας", "\u212a", "h 2 …"],
    )


# characters drawn half the time from the ones above (as a list: st.text would merge them into
# all of Unicode and seldom pick them), else any code point but \x1f (a row's name and hint
# are split at the first \x1f)
_CHAR = st.sampled_from([*"".join(WIDE), "a", "b", " ", "\n"]) | st.characters(
    exclude_categories=(), exclude_characters="\x1f"
)
_TEXT = st.lists(_CHAR, max_size=12).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_TEXT, _TEXT, st.none() | _TEXT), min_size=1, max_size=25),
    st.data(),
)
def test_search_over_random_unicode_is_the_plain_substring_test(
    rows: list[tuple[str, str, str | None]], data: st.DataObject
) -> None:
    names, hints, errors = (list(col) for col in zip(*rows, strict=True))
    nodes = trace(names, hints, errors)
    texts = [search_text(n) for n in nodes]
    # queries that are pieces of some node's text (matches), and any text at all
    queries = data.draw(st.lists(_TEXT, max_size=3)) + names + hints
    for _ in range(4):
        text = data.draw(st.sampled_from(texts))
        a = data.draw(st.integers(0, len(text)))
        queries.append(text[a : data.draw(st.integers(a, len(text)))])
    check(stored(nodes), nodes, [q for q in queries if q.strip()])


def prompts(n: int) -> dict[str, Any]:
    """A saved trace whose query prompts are wide: emoji, CJK, hints cut at their cap."""
    nodes: list[dict[str, Any]] = [
        {"id": "s", "parent_id": None, "kind": "session", "name": "session", "status": "ok"}
    ]
    for i in range(n):
        prompt = [f"café — 東京の天気は？ {i}", f"question {i}" + " 🙂" * (i % 50 == 1)][i % 2]
        if i % 3 == 0:
            prompt += " and a long tail to cut" * 10
        nodes.append(
            {
                "id": f"q{i}",
                "parent_id": "s",
                "kind": "query",
                "name": f"ask \u212a{i}",
                "status": "ok",
                "start": float(i),
                "end": i + 0.5,
                "inputs": {"prompt": prompt},
            }
        )
    return {"format": "langfx_nb.trace", "version": 1, "session": {"id": "t"}, "nodes": nodes}


QUERIES = ["東京", "🙂", "…", "question 1", "k7", "café — 東京の天気は？ 12", "tail to cut"]


def answers(index: StoredTrace) -> list[Any]:
    out: list[Any] = [index.window(query=q, count=2000) for q in QUERIES]
    return out + [r for r in index.first_rows(len(index))]


def test_wide_text_round_trips_through_a_stored_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(prompts(600), ensure_ascii=False), encoding="utf-8")
    converted = convert(path)  # the JSON file, streamed
    saved = open_store(save_trace(prompts(600), tmp_path / "saved.lfxtrace"))  # from memory
    assert answers(converted) == answers(saved)
    assert found(saved, "🙂")[0] == 12 and found(saved, "東京")[0] == 300
    for record in saved.records():  # each row as its record
        row, full = saved.summary(record["id"]), saved.record(record["id"])
        assert row is not None and full is not None
        assert (row["name"], row.get("hint", "")) == (full["name"], full.get("hint", ""))
    hints = [r["node"].get("hint", "") for r in saved.window(count=300)["rows"]]
    assert any(h.endswith("…") and "東京" in h for h in hints)  # a hint cut at its cap
    for index in (converted, saved):
        index.close()
