"""Shared fixtures of the structured-output tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langfx_nb.structured import stream_parser


@pytest.fixture(scope="module", params=["compiled", "python"])
def json_grammar(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a module's tests on both JSON grammars: compiled (``_cjson.c``) and Python."""
    if request.param == "compiled" and not stream_parser.ACCELERATED:
        pytest.skip("built without a C compiler")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "python":
            mp.setattr(stream_parser, "_compiled", None)
        yield request.param
