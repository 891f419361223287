"""Suite-wide guards: no real model requests, ever, from the tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langfx_nb.llms import allow_model_requests


@pytest.fixture(autouse=True, scope="session")
def _block_model_requests() -> Iterator[None]:
    allow_model_requests(False)
    yield
    allow_model_requests(True)
