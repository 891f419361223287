"""How long `import langfx_nb` takes, against `import pydantic` and `import httpx` (its two
runtime dependencies) measured in the same run, each in a fresh interpreter.

Run: .venv/bin/python benchmarks/import_time.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CODE = "import time; t = time.perf_counter(); import {mod}; print(time.perf_counter() - t)"


def measure(module: str, runs: int = 7) -> float:
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", CODE.format(mod=module)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def main() -> None:
    baseline = {m: measure(m) for m in ("pydantic", "httpx", "pydantic, httpx")}
    ours = measure("langfx_nb")
    for name, seconds in baseline.items():
        print(f"import {name:<18} {seconds * 1000:7.1f} ms")
    print(
        f"import {'langfx_nb':<18} {ours * 1000:7.1f} ms "
        f"({ours / baseline['pydantic, httpx']:.2f}x pydantic+httpx; target <= 300 ms)"
    )


if __name__ == "__main__":
    main()
