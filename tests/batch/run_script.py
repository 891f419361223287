"""A batch in its own process, for the crash tests and benchmarks/batch.py.

``python run_script.py URL MANIFEST N [CONCURRENCY] [RPM TPM]`` labels items 0..N-1
through the OpenAI-wire server at URL, keeping the run manifest MANIFEST, and prints one
JSON line: the typed results (class name and fields), how many were resumed, the requests
sent, and the seconds until the first progress snapshot (what is done and missing known).
With ``RUN_SCRIPT_RAY=<address>`` in the environment the batch runs on that Ray cluster
(``engine=lf.engines.Ray(address=..., num_workers=2)``).

``URL`` ``fake:PATH`` answers with a counting fake model instead: each request appends its
item's id to the file PATH (one unbuffered write, before the answer, so a process killed
with SIGKILL has recorded every request it sent) and is answered at once.
"""

from __future__ import annotations

import time

T0 = time.monotonic()  # before the imports: "known_s" counts the whole restart

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import httpx  # noqa: E402
import pydantic  # noqa: E402

import langfx_nb as lf  # noqa: E402
from langfx_nb.llms.base import LanguageModel, LMRequest  # noqa: E402
from langfx_nb.llms.fake import Fake  # noqa: E402
from langfx_nb.llms.openai import OpenAI  # noqa: E402

_ITEM = re.compile(r"item=(\w+)")


class Counting(Fake):
    """Answers like the limited server; appends each request's item id to a file."""

    def __init__(self, path: str) -> None:
        super().__init__("counting")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def respond(self, request: LMRequest) -> str:
        match = _ITEM.search(request.messages[-1].text)
        item = match.group(1) if match else "?"
        os.write(self._fd, f"{item}\n".encode())
        return json.dumps({"item": item, "label": f"label-{item}"})


class Label(pydantic.BaseModel):
    item: str
    label: str


async def label(row: dict[str, int], session: lf.Session) -> Label:
    prompt = "Label this: item={{id}}"
    return await session.query(prompt, Label, vars=row, protocol="json")  # type: ignore[no-any-return]


async def main() -> None:
    url, manifest, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    concurrency = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    limit = None
    if len(sys.argv) > 6:
        limit = lf.RateLimit(float(sys.argv[5]), float(sys.argv[6]))
    address = os.environ.get("RUN_SCRIPT_RAY")
    lm: LanguageModel
    if url.startswith("fake:"):
        lm = Counting(url.removeprefix("fake:"))
    else:
        lm = OpenAI(
            "gpt-test",
            api_key="sk-test",
            base_url=url,
            # a transport object does not travel to Ray workers: they make their own clients
            transport=None if address else httpx.AsyncHTTPTransport(),
            max_tokens=12,
            rate_limit=limit,
            max_attempts=5,
        )
    first: list[float] = []

    def progress(p: object) -> None:  # a callable reporter: the first snapshot
        if not first:
            first.append(time.monotonic() - T0)
            known = {"known_s": first[0], "known_cpu_s": time.process_time()}
            print(json.dumps({**known, "done": getattr(p, "done", None)}), flush=True)

    engine = lf.engines.Ray(address=address, num_workers=2) if address else None
    result = await lf.batch(
        label,
        [{"id": i} for i in range(n)],
        session=lf.Session(lm),
        run=manifest,
        max_concurrency=concurrency,
        progress=progress,
        engine=engine,
    )
    out = {
        "results": [[type(r).__name__, r.model_dump() if r is not None else None] for r in result],
        "statuses": result.statuses,
        "resumed": result.totals.resumed,
        "requests": result.totals.requests,
        "elapsed_s": result.totals.elapsed_s,
        "known_s": first[0] if first else None,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
