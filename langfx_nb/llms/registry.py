"""``lf.llms.get("provider:model")``: a small explicit resolver for magics and quick starts.

Only the names listed here resolve; there is no plugin discovery and no default model. Extra
keyword arguments go to the model's constructor (``api_key=``, ``base_url=``, sampling...).

- ``gemini:MODEL`` (alias ``google:MODEL``), ``anthropic:MODEL``, ``openai:MODEL``,
  ``openai-responses:MODEL`` (OpenAI's Responses API)
- ``fake:echo``, ``fake:static?text=...`` (the text is URL-decoded)
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import parse_qs

from .base import LanguageModel

__all__ = ["get", "key_variables", "provider_class", "providers"]

_PROVIDERS = {
    "gemini": (".gemini", "Gemini"),
    "google": (".gemini", "Gemini"),
    "anthropic": (".anthropic", "Anthropic"),
    "openai": (".openai", "OpenAI"),
    "openai-responses": (".openai_responses", "OpenAIResponses"),
}


def providers() -> list[str]:
    """The provider prefixes ``get`` understands."""
    return sorted([*_PROVIDERS, "fake"])


def get(spec: str, **kwargs: Any) -> LanguageModel:
    """A model from ``"provider:model"``; raises ``ValueError`` for anything else."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"expected 'provider:model', got {spec!r}")
    provider, _, rest = spec.partition(":")
    provider = provider.strip().lower()
    if provider == "fake":
        return _fake(rest, kwargs)
    if provider not in _PROVIDERS:
        known = ", ".join(providers())
        raise ValueError(f"unknown model provider {provider!r} (known: {known})")
    model = rest.strip()
    if not model:
        raise ValueError(f"{spec!r} names no model")
    cls = provider_class(provider)
    assert cls is not None  # listed above
    return cls(model, **kwargs)


def provider_class(name: str) -> type[LanguageModel] | None:
    """The model class of provider ``name`` (the prefix of a ``provider:model`` id, as
    traces and manifests keep it), its module imported on first use; ``None`` for a name
    not listed. What a provider is called elsewhere (OpenTelemetry, price tables, its key's
    environment variables) is the class's to say, not the caller's."""
    found = _PROVIDERS.get(name.strip().lower())
    if found is None:
        return None
    module_name, cls_name = found
    cls: type[LanguageModel] = getattr(importlib.import_module(module_name, __package__), cls_name)
    return cls


def key_variables() -> dict[str, tuple[str, ...]]:
    """Each listed provider and the environment variables its key is read from."""
    out: dict[str, tuple[str, ...]] = {}
    for name in _PROVIDERS:
        cls = provider_class(name)
        if cls is not None and cls.provider not in out:
            out[cls.provider] = tuple(getattr(cls, "env_vars", ()))
    return out


def _fake(rest: str, kwargs: dict[str, Any]) -> LanguageModel:
    from .fake import Echo, StaticResponse

    name, _, query = rest.partition("?")
    name = name.strip().lower()
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    if name == "echo":
        return Echo(**kwargs)
    if name == "static":
        if "text" not in params:
            raise ValueError("fake:static needs ?text=...")
        return StaticResponse(params["text"], **kwargs)
    raise ValueError(f"unknown fake model {name!r} (fake:echo, fake:static?text=...)")
