"""Live smoke suite: real provider APIs, run only by hand with keys (see docs/providers.md).

Each provider's tests are skipped unless its key variable is set. Model ids come from
``LANGFX_LIVE_<PROVIDER>_MODEL`` with small current models as fallbacks; ``OPENAI_BASE_URL``
points the OpenAI tests at a compatible server instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

import langfx_nb as lf
from langfx_nb.llms import LanguageModel

PROVIDERS = {
    # provider: (key variables, model variable, fallback model id)
    "gemini": (
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "LANGFX_LIVE_GEMINI_MODEL",
        "gemini-2.5-flash",
    ),
    "anthropic": (("ANTHROPIC_API_KEY",), "LANGFX_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"),
    "openai": (("OPENAI_API_KEY",), "LANGFX_LIVE_OPENAI_MODEL", "gpt-4o-mini"),
    "openai-responses": (("OPENAI_API_KEY",), "LANGFX_LIVE_OPENAI_MODEL", "gpt-4o-mini"),
}


@pytest.fixture(params=sorted(PROVIDERS))
async def lm(request: pytest.FixtureRequest) -> AsyncIterator[LanguageModel]:
    name = request.param
    keys, model_var, fallback = PROVIDERS[name]
    base_url = os.environ.get("OPENAI_BASE_URL") if name.startswith("openai") else None
    if not any(os.environ.get(k) for k in keys) and not base_url:
        pytest.skip(f"set {' or '.join(keys)} to run the live {name} tests")
    kwargs: dict[str, object] = {"max_attempts": 3}
    if base_url:
        kwargs["base_url"] = base_url
        if key := os.environ.get("OPENAI_API_KEY"):
            kwargs["api_key"] = key  # a custom base_url never reads the env var by itself
    model = lf.llms.get(f"{name}:{os.environ.get(model_var, fallback)}", **kwargs)
    lf.llms.allow_model_requests(True)  # the suite-wide guard blocks real requests
    try:
        yield model
    finally:
        lf.llms.allow_model_requests(False)
        await model.aclose()  # type: ignore[attr-defined]
