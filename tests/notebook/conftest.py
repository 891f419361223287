import pytest

from langfx_nb.notebook.options import APPROVE_ENV

from ._approval import CALLS


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.clear()


@pytest.fixture(autouse=True)
def _ask_means_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    # notebooks/conftest.py sets an unattended allow-list for the whole pytest process when
    # the tours run under nbval in the same session; these tests click (or say otherwise).
    monkeypatch.delenv(APPROVE_ENV, raising=False)
