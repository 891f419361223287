import pytest

from ._approval import CALLS


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()
