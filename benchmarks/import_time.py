"""How long `import langfx_nb` takes, against `import pydantic` and `import httpx` (its two
runtime dependencies) measured in the same run, each in a fresh interpreter.

Both wall time and CPU time of the import are printed (medians of 7 runs). The target
(<= 300 ms) is judged on CPU time: on a shared machine the wall time mostly measures the
neighbours. The script also checks that `import langfx_nb` loads neither pydantic nor httpx
(they load on first use).

Run: .venv/bin/python benchmarks/import_time.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CODE = (
    "import sys, time; w = time.perf_counter(); c = time.process_time(); import {mod}; "
    "print(time.perf_counter() - w, time.process_time() - c, "
    "sorted({{'pydantic', 'httpx'}} & set(sys.modules)))"
)


def measure(module: str, runs: int = 7) -> tuple[float, float, str]:
    """Median wall and CPU seconds of ``import module``, and which heavy modules it loaded."""
    walls, cpus = [], []
    loaded = ""
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", CODE.format(mod=module)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        wall, cpu, loaded = out.split(maxsplit=2)
        walls.append(float(wall))
        cpus.append(float(cpu))
    return statistics.median(walls), statistics.median(cpus), loaded.strip()


def main() -> None:
    baseline = {m: measure(m) for m in ("pydantic", "httpx", "pydantic, httpx")}
    wall, cpu, loaded = measure("langfx_nb")
    for name, (w, c, _) in baseline.items():
        print(f"import {name:<18} {w * 1000:7.1f} ms wall {c * 1000:7.1f} ms CPU")
    print(
        f"import {'langfx_nb':<18} {wall * 1000:7.1f} ms wall {cpu * 1000:7.1f} ms CPU "
        f"({cpu / baseline['pydantic, httpx'][1]:.2f}x pydantic+httpx CPU; "
        "target <= 300 ms CPU)"
    )
    print(f"heavy modules loaded by import langfx_nb: {loaded}")


if __name__ == "__main__":
    main()
