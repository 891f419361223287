"""``engine=lf.engines.ProviderBatch()`` with ``on_error="raise"`` ("stops the batch and
raises the first error"), on a real local server speaking OpenAI's batch wire: an item whose
``fn`` raises before its model call is known while the requests are collected, so the batch
stops there, before a batch of paid requests is submitted and waited for (hours, at a
provider)."""

from __future__ import annotations

import pytest

import langfx_nb as lf

from ..spend.provider_server import ProviderServer, openai_model


async def test_on_error_raise_stops_before_submitting_when_an_item_fails_first() -> None:
    with ProviderServer(steps_to_finish=1) as server:
        lm = openai_model(server)

        async def label(row: dict[str, str], session: lf.Session) -> str:
            if row["id"] == "t0":
                raise KeyError("name")  # fn's bug, before its model call
            return str(await session.query("Label this ticket: {{id}}", vars=row, lm=lm))

        rows = [{"id": f"t{i}"} for i in range(5)]
        engine = lf.engines.ProviderBatch(poll_interval=0.0)
        try:
            with pytest.raises(KeyError):
                await lf.batch(label, rows, engine=engine, on_error="raise", progress=False)
        finally:
            await lm.aclose()
        assert server.create_requests("openai") == 0  # nothing paid for
