"""Fixtures of the provider tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langfx_nb.llms import allow_model_requests


@pytest.fixture
def local_network() -> Iterator[None]:
    """Let a model use its own httpx client for a test talking to a server on 127.0.0.1
    (the suite blocks real model requests everywhere else)."""
    allow_model_requests(True)
    try:
        yield
    finally:
        allow_model_requests(False)
