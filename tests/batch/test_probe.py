"""Batch runs read as a new maintainer would (issue #40's check). Each test is a bug found by
probing, marked ``xfail(strict=True)`` until the fix lands (then drop the mark)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import langfx_nb as lf

SECRET = "sk-proj-abcdefghijklmnop1234567890"


async def leaky(item: int, session: Any) -> int:
    if item == 1:
        raise ValueError(f"request failed: Authorization: Bearer {SECRET}")
    return item


@pytest.mark.xfail(strict=True, reason="a failed item's message keeps a credential unmasked")
def test_a_failed_items_message_never_stores_a_credential(tmp_path: Path) -> None:
    # the item's traceback is masked (redact_secrets in format_traceback), but the short
    # message beside it (error_info) is stored as raised: in the BatchResult, the manifest
    # file, the item's trace node and BatchResult.load's errors
    path = tmp_path / "run.sqlite"
    session = lf.Session()
    result = asyncio.run(lf.batch(leaky, range(3), run=path, session=session, progress=False))
    error = result.errors[1]
    assert error is not None and error.traceback is not None
    assert SECRET not in error.traceback  # masked already
    assert SECRET not in error.message
    assert SECRET not in session.trace_json_str()
    assert SECRET.encode() not in path.read_bytes()
