"""Per-call library overhead of ``lf.query(prompt, SmallModel, lm=<fake>)``.

The fake model returns a fixed python-protocol answer, so everything measured beyond its
``_sample`` is library work: prompt rendering, protocol framing, request building, parsing
and validation. Baselines measured in the same run:

  _sample     the fake model's hook awaited directly with a prebuilt request (the floor)
  lm.call     the LanguageModel public call (normalization, options, provenance, usage)
  query/str   lf.query without a schema
  query/T     lf.query with a small pydantic model (python protocol), and with protocol="json"

Run: .venv/bin/python benchmarks/query_overhead.py [--n 3000] [--repeat 5]
Target: query/T minus _sample ≤ 0.15 ms per call (issue 22; the first target was 0.5 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

import langfx_nb as lf
from langfx_nb.llms import LanguageModel, LMRequest


class SmallModel(BaseModel):
    name: str = Field(description="The person's name.")
    age: int
    tags: list[str] = []


PY_ANSWER = "```python\nSmallModel(name='Ada', age=36, tags=['math', 'poetry'])\n```"
JSON_ANSWER = '```json\n{"result": {"name": "Ada", "age": 36, "tags": ["math", "poetry"]}}\n```'
PROMPT = "Extract the person from: {{text}}"
VARS = {"text": "Ada, 36, likes math and poetry."}


class Fixed(LanguageModel):
    """Answers with a fixed text and no work of its own."""

    provider = "bench"

    def __init__(self, answer: str) -> None:
        super().__init__("fixed")
        self.answer = answer

    async def _sample(self, request: LMRequest) -> lf.AIMessage[Any]:
        return lf.AIMessage(self.answer)


async def per_call(fn: Callable[[], Awaitable[Any]], n: int, repeat: int) -> float:
    """Best-of-``repeat`` mean seconds per call over ``n`` sequential awaits."""
    for _ in range(min(n, 200)):  # warm caches (schema, templates, frames)
        await fn()
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


async def main(n: int, repeat: int) -> None:
    lm = Fixed(PY_ANSWER)
    lm_json = Fixed(JSON_ANSWER)
    request = lm.build_request(lf.Template(PROMPT).render(VARS))
    value = await lf.query(PROMPT, SmallModel, lm=lm, vars=VARS)
    assert value == SmallModel(name="Ada", age=36, tags=["math", "poetry"])
    assert await lf.query(PROMPT, SmallModel, lm=lm_json, vars=VARS, protocol="json") == value

    cases: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("_sample (baseline)", lambda: lm._sample(request)),
        ("lm.call", lambda: lm.call("Extract the person from: Ada, 36.")),
        ("query, no schema", lambda: lf.query(PROMPT, lm=lm, vars=VARS)),
        ("query, SmallModel, python", lambda: lf.query(PROMPT, SmallModel, lm=lm, vars=VARS)),
        (
            "query, SmallModel, json",
            lambda: lf.query(PROMPT, SmallModel, lm=lm_json, vars=VARS, protocol="json"),
        ),
    ]
    results = {name: await per_call(fn, n, repeat) for name, fn in cases}
    base = results["_sample (baseline)"]
    call = results["lm.call"]
    print(f"n={n} calls x best of {repeat} runs\n")
    print(f"{'case':30} {'ms/call':>9} {'x _sample':>10} {'overhead ms':>12}")
    for name, t in results.items():
        print(f"{name:30} {t * 1e3:9.4f} {t / base:10.1f} {(t - base) * 1e3:12.4f}")
    q = results["query, SmallModel, python"]
    print(
        f"\nlibrary overhead of query(SmallModel) over _sample: {(q - base) * 1e3:.3f} ms/call "
        f"(target <= 0.15 ms); over lm.call: {(q - call) * 1e3:.3f} ms/call "
        f"(ratio query/lm.call = {q / call:.2f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.repeat))
