"""The stored trace's window steps with two readers in one process, call by call: another
tree's ``agentic/trace_reader.py`` (e.g. ``git archive`` of main), loaded beside this tree's,
against this tree's, on the same store. Both answer every request first (their windows must be
equal), then each step of ``trace_store.py``'s ``open`` (expand, scroll, searches from scratch,
select) runs alternately, CPU milliseconds each: on a loaded machine a ratio between two
processes run one after the other is mostly noise, one between calls interleaved is not.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/trace_reader_ab.py STORE BASE_TREE [RUNS]
[BASE_STORE]`` (``STORE``: a 1,000,000-node store written by ``trace_store.py --steps convert``;
``BASE_STORE``: the same trace written by the other tree, when its format differs).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

import langfx_nb.agentic.trace_reader as this


def main() -> None:
    store, base_tree = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    base_store = sys.argv[4] if len(sys.argv) > 4 else store
    name = "langfx_nb.agentic._base_trace_reader"  # a sibling: its relative imports resolve
    spec = importlib.util.spec_from_file_location(
        name, f"{base_tree}/langfx_nb/agentic/trace_reader.py"
    )
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    sys.modules[name] = base
    spec.loader.exec_module(base)
    readers: dict[str, Any] = {"base": base.open_store(base_store), "this": this.open_store(store)}
    deep = [f"d{k}" for k in range(60)]
    total = readers["this"].window()["total"]
    steps: dict[str, list[dict[str, Any]]] = {
        "expand": [dict(expanded={d: True for d in deep[:k]}, count=200) for k in range(1, 6)],
        "scroll": [dict(start=s, count=200) for s in (1_000, total // 2, total - 200)],
        "search selective": [
            dict(query=q) for q in ("boom 97", "question number 4241 ", "no such")
        ],
        "search broad": [dict(query="question")],
        "select": [dict(selected="d3", expanded={"d0": True, "d1": True, "d2": True})],
    }
    for request in [r for requests in steps.values() for r in requests]:
        answers = []
        for reader in readers.values():
            reader._search = None
            answers.append(reader.window(**request))
        assert answers[0] == answers[1], request
    for step, requests in steps.items():
        ms: dict[str, list[float]] = {"base": [], "this": []}
        for k in range(runs):
            for request in requests:
                for key in ("base", "this") if k % 2 else ("this", "base"):
                    readers[key]._search = None  # each search from scratch
                    t = time.process_time()
                    readers[key].window(**request)
                    ms[key].append((time.process_time() - t) * 1000)
        b, t = sorted(ms["base"]), sorted(ms["this"])
        p50, p95 = len(b) // 2, min(len(b) - 1, int(0.95 * len(b)))
        print(
            f"{step:<17} CPU ms p50 base {b[p50]:6.1f} this {t[p50]:6.1f} "
            f"(x{t[p50] / b[p50]:.2f}), p95 base {b[p95]:6.1f} this {t[p95]:6.1f}"
        )


if __name__ == "__main__":
    main()
