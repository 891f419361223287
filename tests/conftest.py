"""Suite-wide settings: no real model requests, ever; fixed Hypothesis examples under CI."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from langfx_nb.llms import allow_model_requests

# CI runs the same examples every time (a red CI must mean a change broke something); local
# runs keep exploring new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def _block_model_requests() -> Iterator[None]:
    allow_model_requests(False)
    yield
    allow_model_requests(True)
