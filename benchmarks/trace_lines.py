"""Lines of the trace-view wing (issue #39's target: at most half of its lines at filing), per
file at two revisions, counted as ``wc -l`` counts them (blank and comment lines included).

The wing is every file whose purpose is reading, storing for reading, or showing a trace: the
stored trace's reader, writer and JSON conversion (``agentic/trace_reader.py``,
``trace_db.py``, ``trace_json.py``; at filing, the index, file and sidecar modules they
replaced), the explorer's Python modules (``notebook/trace_*.py``), the trace functions of
``notebook/render.py`` (the static copies), and the explorer's TypeScript
(``trace_explorer.ts``, ``tree.ts``, ``timeline.ts``). Not counted: the core trace itself
(``agentic/trace.py``, what a session records), shared widget code (``dom.ts``, ``bridge.py``)
and tests.

Run: ``python benchmarks/trace_lines.py [--before 87359b8] [--after HEAD]`` (87359b8: main
just before the stored trace was merged, the code the issue describes).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WING = (
    "langfx_nb/agentic/trace_reader.py",
    "langfx_nb/agentic/trace_db.py",
    "langfx_nb/agentic/trace_json.py",
    "langfx_nb/notebook/trace_*.py",
    "langfx_nb/notebook/render.py",
    "js/src/trace_explorer.ts",
    "js/src/tree.ts",
    "js/src/timeline.ts",
)
# render.py holds the static copies of every widget: only its trace functions are counted
RENDER = "langfx_nb/notebook/render.py"
RENDER_TRACE = frozenset(
    {
        "_duration_html", "_error_text", "_short", "_status_html", "_statuses", "_tree_html",
        "arg_changes", "decision_shown", "local_time", "node_detail_rows", "node_timing",
        "session_html", "trace_html", "trace_index_html", "trace_index_text",
        "trace_static_html", "trace_text",
    }
)  # fmt: skip


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


def wing_lines(rev: str) -> dict[str, int]:
    """Lines per wing file at ``rev`` (``render.py``: its trace functions only)."""
    files = [
        p
        for p in _git("ls-tree", "-r", "--name-only", rev).split()
        if any(fnmatch.fnmatch(p, pattern) for pattern in WING)
    ]
    out: dict[str, int] = {}
    for path in files:
        text = _git("show", f"{rev}:{path}")
        if path == RENDER:
            tree = ast.parse(text)
            out[f"{path} (trace functions)"] = sum(
                (node.end_lineno or node.lineno) - node.lineno + 1
                for node in tree.body
                if isinstance(node, ast.FunctionDef) and node.name in RENDER_TRACE
            )
        else:
            out[path] = text.count("\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="87359b8")
    parser.add_argument("--after", default="HEAD")
    args = parser.parse_args()
    before, after = wing_lines(args.before), wing_lines(args.after)
    width = max(map(len, before | after))
    print(f"{'file':<{width}}  {args.before:>8}  {args.after:>8}")
    for path in sorted(before | after):
        b, a = before.get(path), after.get(path)
        print(f"{path:<{width}}  {'-' if b is None else b:>8}  {'-' if a is None else a:>8}")
    total_b, total_a = sum(before.values()), sum(after.values())
    python = sum(n for p, n in after.items() if ".py" in p)
    print(f"{'total':<{width}}  {total_b:>8}  {total_a:>8}")
    print(
        f"after / before: {total_a / total_b:.2f} (target: at most 0.50); after: "
        f"{python} Python, {total_a - python} TypeScript"
    )


if __name__ == "__main__":
    main()
