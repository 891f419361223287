"""``lf.set_default_lm``: one process-wide default model for every call given none."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import langfx_nb as lf


@pytest.fixture
def restore() -> Iterator[None]:
    previous = lf.set_default_lm(None)
    yield
    lf.set_default_lm(previous)


async def test_calls_without_a_model_use_the_default_and_an_explicit_one_wins(
    restore: None,
) -> None:
    with pytest.raises(TypeError, match="set_default_lm"):
        await lf.query("hi")
    default = lf.llms.StaticResponse("from the default")
    assert lf.set_default_lm(default) is None and lf.default_lm() is default
    assert await lf.query("hi") == "from the default"
    assert await lf.query("hi", lm=lf.llms.StaticResponse("mine")) == "mine"
    async with lf.Session() as session:
        assert await session.query("hi") == "from the default"
    async with lf.Session(lf.llms.StaticResponse("the session's")) as session:
        assert await session.query("hi") == "the session's"

    async def task(x: str, session: lf.Session) -> str:
        return await session.query(x)

    result = await lf.batch(task, ["a", "b"], progress=False)
    assert result.results == ["from the default"] * 2
    with pytest.raises(TypeError, match="LanguageModel"):
        lf.set_default_lm("fake:echo")  # type: ignore[arg-type]
