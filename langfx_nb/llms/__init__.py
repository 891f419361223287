"""Language models: the shared base, fake models, and (imported lazily) the providers."""

from __future__ import annotations

from typing import Any

from .base import (
    Capabilities,
    LanguageModel,
    LMRequest,
    RetryPolicy,
    Sample,
    SamplingOptions,
    SamplingResult,
    ToolSpec,
    allow_model_requests,
    model_requests_allowed,
)
from .cache import Cache, InMemoryCache, SQLiteCache
from .default import default_lm, set_default_lm
from .fake import Echo, Fake, Scripted, StaticMapping, StaticResponse, StaticSequence
from .registry import get
from .streaming import StreamAccumulator, StreamChunk, ToolCallDelta, ToolCallEnd, ToolCallStart

__all__ = [
    "Cache",
    "Capabilities",
    "Echo",
    "Fake",
    "InMemoryCache",
    "LMRequest",
    "LanguageModel",
    "RetryPolicy",
    "SQLiteCache",
    "Sample",
    "SamplingOptions",
    "SamplingResult",
    "Scripted",
    "StaticMapping",
    "StaticResponse",
    "StaticSequence",
    "StreamAccumulator",
    "StreamChunk",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "allow_model_requests",
    "default_lm",
    "get",
    "model_requests_allowed",
    "set_default_lm",
]

# Providers load on first access so `import langfx_nb` never imports provider code.
_PROVIDERS = {
    "Gemini": ".gemini",
    "GoogleGenAI": ".gemini",
    "Anthropic": ".anthropic",
    "OpenAI": ".openai",
    "OpenAIResponses": ".openai_responses",
}


def __getattr__(name: str) -> Any:
    if name in _PROVIDERS:
        import importlib

        module = importlib.import_module(_PROVIDERS[name], __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
