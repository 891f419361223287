"""CPU time and peak memory of reading one large structured answer, per protocol.

Each case runs in a fresh subprocess (peak RSS is per process) on a dense answer, a list of
small integers, which is the worst case for ``ast.parse`` (one node per two characters):

  json@1M         JsonProtocol.parse of a ~1,000,000-character answer (the baseline)
  python@limit    PythonProtocol.parse of an answer of MAX_PYTHON_CHARS characters
  ast@1M          what a 1,000,000-character python answer cost before the limit (ast.parse)

Run: .venv/bin/python benchmarks/protocol_cost.py
Prints CPU seconds, RSS growth in MB, and each case's ratio to json@1M.
"""

from __future__ import annotations

import json
import subprocess
import sys

CASE = r"""
import ast, json, resource, sys, time
from langfx_nb.schema import Schema
from langfx_nb.structured.protocols import MAX_PYTHON_CHARS, JsonProtocol, PythonProtocol
case = sys.argv[1]
size = MAX_PYTHON_CHARS if case == "python@limit" else 1_000_000
body = "1," * ((size - 20) // 2) + "1"
schema = Schema.of(list[int])
if case == "json@1M":
    text = '{"result": [' + body + "]}"
    run = lambda: JsonProtocol().parse(text, schema)
elif case == "python@limit":
    text = "[" + body + "]"
    run = lambda: PythonProtocol().parse(text, schema)
else:
    text = "[" + body + "]"
    run = lambda: ast.parse(text, mode="eval")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
run()
cpu = time.process_time() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"chars": len(text), "cpu": cpu, "mb": grown}))
"""


def measure(case: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CASE, case], check=False, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{case} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    base = measure("json@1M")
    for case in ("json@1M", "python@limit", "ast@1M"):
        r = base if case == "json@1M" else measure(case)
        print(
            f"{case:14} {int(r['chars']):>9} chars  cpu {r['cpu']:.3f} s "
            f"({r['cpu'] / base['cpu']:.1f}x json@1M)  rss +{r['mb']:.0f} MB "
            f"({r['mb'] / max(base['mb'], 1):.1f}x)"
        )


if __name__ == "__main__":
    main()
