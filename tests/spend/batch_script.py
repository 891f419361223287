"""A provider batch in its own process, for the kill -9 resume test.

``python batch_script.py PROVIDER BASE_URL MANIFEST N`` labels items t0..t(N-1) through
PROVIDER's batch API at BASE_URL with the run manifest MANIFEST, printing one JSON line
per progress snapshot that has provider counts, then the results. With ``KILL_AT`` in the
environment (not an argument: ``fn``'s fingerprint would change) the process kills itself
(SIGKILL) in the replay, when ``fn`` starts its KILL_AT-th item there (the collect step
runs ``fn`` N times first).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import langfx_nb as lf
from tests.spend.test_provider_batch import Label, label_fn, make_model

CALLS = [0]


def _count_call(n: int) -> None:
    """Kill this process at the replay's ``KILL_AT``-th item (outside ``fn``, whose
    fingerprint is the same with or without it)."""
    CALLS[0] += 1
    kill_at = int(os.environ.get("KILL_AT") or 0)
    if kill_at and CALLS[0] == n + kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


async def main() -> None:
    provider, url, manifest, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    lm = make_model(provider, url)
    label = label_fn(lm)

    async def fn(row: dict[str, str], session: lf.Session) -> Any:
        _count_call(n)
        return await label(row, session)

    def progress(p: Any) -> None:
        if p.provider is not None:
            print(json.dumps({"provider": p.provider}), flush=True)

    result = await lf.batch(
        fn,
        [{"id": f"t{i}"} for i in range(n)],
        run=manifest,
        engine=lf.engines.ProviderBatch(poll_interval=0.02),
        progress=progress,
    )
    await lm.aclose()
    out = [r.label if isinstance(r, Label) else None for r in result.results]
    print(json.dumps({"results": out, "failed": result.totals.failed}), flush=True)


asyncio.run(main())
