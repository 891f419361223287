from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import langfx_nb as lf
from langfx_nb.agentic import strict_json
from langfx_nb.agentic.preview import preview
from langfx_nb.agentic.recording import RecordingModel
from langfx_nb.llms import Echo, LanguageModel

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included
    st.text(max_size=50),
    st.binary(max_size=10),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.tuples(inner, inner),
        st.frozensets(st.integers(), max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=5),
    ),
    max_leaves=30,
)


@given(values)
def test_preview_is_always_strict_json(value: Any) -> None:
    json.dumps(preview(value, 20), allow_nan=False)


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)


@given(json_values)
def test_strict_json_round_trips_plain_json(value: Any) -> None:
    assert json.loads(strict_json(value)) == value


def test_preview_bounds_and_redacts() -> None:
    shown = preview({"text": "x" * 50, "items": list(range(150)), "API_KEY": "k"}, 10)
    assert shown["text"] == "x" * 10 + "…"
    assert len(shown["items"]) == 101 and shown["items"][-1] == "… 50 more"
    assert shown["API_KEY"] == "<redacted>"
    assert preview(math.nan) == "nan"
    assert preview(Echo()) == {"model": "fake:echo"}


async def test_query_hands_lf_query_a_recording_model_around_the_session_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Any] = []
    lm = Echo()
    original = lf.query

    async def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw["lm"])
        return await original(*args, **kw)

    monkeypatch.setattr("langfx_nb.agentic.session.query_fn", spy)
    async with lf.Session(lm) as session:
        assert await session.query("hi") == "hi"
        (node,) = session.all_queries
    (recording,) = seen
    assert isinstance(recording, RecordingModel) and isinstance(recording, LanguageModel)
    assert recording.inner is lm and recording.model_id == lm.model_id
    assert [r.text for r in recording.responses] == ["hi"]
    assert node.metadata["attempts"] == 1 and node.outputs["text"] == "hi"


@pytest.mark.parametrize("fails", ["model", "record"])
async def test_a_query_node_always_ends(monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    """Session.query ends its node itself (no with block): failed with the error, whether
    the model call or the recording of its node raised."""
    from langfx_nb.agentic import session as session_module

    def broken_record(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("record broke")

    if fails == "record":
        monkeypatch.setattr(session_module, "record_calls", broken_record)
        lm: LanguageModel = Echo()
    else:
        lm = lf.llms.Scripted([RuntimeError("model broke")])
    async with lf.Session(lm) as session:
        with pytest.raises(RuntimeError, match=f"{fails} broke"):
            await session.query("hi")
        (node,) = session.all_queries
        assert node.status == "failed" and node.end is not None
        assert node.error == {"type": "RuntimeError", "message": f"{fails} broke"}


def test_recording_model_has_every_attribute_a_language_model_sets() -> None:
    """RecordingModel has every field LanguageModel.__init__ sets (a base-class method run on
    the wrapper would fail without one), with the wrapped model's name, sampling and cache."""

    class Bare(LanguageModel):
        pass

    lm = Echo()
    recording = RecordingModel(lm)
    assert set(vars(Bare())) <= set(vars(recording))
    assert recording.model == lm.model and recording.sampling is lm.sampling
    assert recording.cache is lm.cache and recording.num_requests == 0
