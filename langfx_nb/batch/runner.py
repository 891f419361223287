"""The batch runner (being built)."""

from __future__ import annotations

from typing import Any


async def run_batch(fn: Any, items: Any, **options: Any) -> Any:
    raise NotImplementedError("lf.batch is being built")
