"""Where a session's prices come from: its own table first, then the ``genai-prices`` table.

``Session(prices=...)`` takes a mapping of model ids to ``Price`` (or a ``Prices``); every
model request is priced when it is recorded, so each ``query`` node carries its cost. A model
the table does not name is looked up in ``genai-prices`` (the price table maintained with
pydantic-ai: online, batch and prompt-cache rates of the hosted providers' models), when
that package is installed (the ``prices`` extra) and the model id's provider names its id
there (``LanguageModel.genai_prices_provider``). A model found nowhere is *unpriced*: its
cost is unknown (``None``), never 0.

``genai-prices`` is imported on the first lookup it must answer (it takes a second or two to
import), never at ``import langfx_nb``; each model id is resolved once per table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ..llms.registry import provider_class
from ..messages import AIMessage, Usage
from .usage import Price

__all__ = ["Prices", "genai_price"]

_GENAI_LOCK = threading.Lock()
_GENAI_CACHE: dict[str, Price | None] = {}


class Prices(Mapping[str, Price]):
    """A price table: ``table`` (exact ``provider:model`` id, then the bare model name)
    overrides the default source (``genai-prices`` when ``defaults`` is true and it is
    installed). ``prices[model_id]`` raises ``KeyError`` for an unpriced model; iterating
    lists the table's own entries and the defaults resolved so far."""

    __slots__ = ("_defaults", "_resolved", "_table")

    def __init__(self, table: Mapping[str, Price] | None = None, *, defaults: bool = True):
        self._table: dict[str, Price] = dict(table or {})
        for model_id, price in self._table.items():
            if not isinstance(price, Price):
                raise TypeError(
                    f"prices[{model_id!r}] must be an lf.Price, not {type(price).__name__}"
                )
        self._defaults = defaults
        self._resolved: dict[str, Price | None] = {}

    @classmethod
    def of(cls, prices: Mapping[str, Price] | None) -> Prices:
        """``prices`` itself when it is a ``Prices``; otherwise a table over the defaults."""
        return prices if isinstance(prices, Prices) else cls(prices)

    @property
    def defaults(self) -> bool:
        return self._defaults

    def find(self, model_id: str) -> Price | None:
        """The price of ``model_id`` or ``None`` (unpriced). Resolved once per id."""
        try:
            return self._resolved[model_id]
        except KeyError:
            pass
        price = self._table.get(model_id)
        if price is None and ":" in model_id:
            price = self._table.get(model_id.split(":", 1)[1])
        if price is None and self._defaults:
            price = genai_price(model_id)
        self._resolved[model_id] = price
        return price

    def request_cost(self, model_id: str, response: AIMessage[Any]) -> float | None:
        """What one response cost: ``None`` when the model is unpriced or the response
        reported no usage; 0 for an answer replayed from the LLM cache (nothing was paid);
        batch prices for a response of a provider batch (``metadata["processing"]``)."""
        if response.metadata.get("cache_hit"):
            return 0.0
        usage = response.usage
        if usage is None:
            return None
        price = self.find(model_id)
        return None if price is None else price.cost(usage, batch=is_batch(response))

    def usage_cost(
        self, model_id: str, usage: Usage | None, *, batch: bool = False
    ) -> float | None:
        if usage is None:
            return None
        price = self.find(model_id)
        return None if price is None else price.cost(usage, batch=batch)

    def __getitem__(self, model_id: str) -> Price:
        price = self.find(model_id)
        if price is None:
            raise KeyError(model_id)
        return price

    def __iter__(self) -> Iterator[str]:
        seen = dict.fromkeys(self._table)
        seen.update((k, None) for k, v in self._resolved.items() if v is not None)
        return iter(seen)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, model_id: object) -> bool:
        return isinstance(model_id, str) and self.find(model_id) is not None

    def __repr__(self) -> str:
        return f"Prices({len(self._table)} entries, defaults={self._defaults})"


def is_batch(response: AIMessage[Any]) -> bool:
    """Whether ``response`` came from a provider's batch API (billed at batch prices)."""
    return response.metadata.get("processing") == "batch"


def genai_price(model_id: str) -> Price | None:
    """The ``genai-prices`` price of ``provider:model`` now (online, with its batch price),
    or ``None`` when the package is missing, the provider names no ``genai-prices`` id
    (fakes, custom models: ``LanguageModel.genai_prices_provider``) or the model is not in
    its table."""
    provider, _, model = model_id.partition(":")
    cls = provider_class(provider)
    provider_id = cls.genai_prices_provider if cls is not None else None
    if provider_id is None or not model:
        return None
    with _GENAI_LOCK:
        if model_id in _GENAI_CACHE:
            return _GENAI_CACHE[model_id]
        price = _lookup(provider_id, model)
        _GENAI_CACHE[model_id] = price
        return price


def _lookup(provider_id: str, model: str) -> Price | None:
    try:
        from datetime import UTC, datetime

        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        _, found = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
        now = datetime.now(tz=UTC)
        online = _price(found.get_prices(now))
        batch = _price(found.get_prices(now, {"processing": "batch"}))
    except (LookupError, ValueError, TypeError, AttributeError):
        return None
    if online is None:
        return None
    if batch is not None and batch != online:
        return _with_batch(online, batch)
    return online


def _with_batch(online: Price, batch: Price) -> Price:
    return Price(
        online.prompt,
        online.completion,
        online.cached_prompt,
        online.cache_write,
        batch,
        online.tiers,
    )


def _price(model_price: Any) -> Price | None:
    """A ``genai_prices`` ``ModelPrice`` as a ``Price`` (tiered rates as ``tiers``)."""
    rates = {
        name: getattr(model_price, key, None)
        for name, key in (
            ("prompt", "input_mtok"),
            ("completion", "output_mtok"),
            ("cached_prompt", "cache_read_mtok"),
            ("cache_write", "cache_write_mtok"),
        )
    }
    if rates["prompt"] is None or rates["completion"] is None:
        return None
    thresholds = sorted(
        {tier.start for rate in rates.values() for tier in getattr(rate, "tiers", None) or ()}
    )

    def at(rate: Any, tokens: int) -> float | None:
        if rate is None:
            return None
        tiers = getattr(rate, "tiers", None)
        if tiers is None:
            return float(rate)
        value = rate.base
        for tier in tiers:
            if tokens > tier.start:
                value = tier.price
        return float(value)

    def build(tokens: int) -> Price:
        values = {name: at(rate, tokens) for name, rate in rates.items()}
        return Price(
            values["prompt"] or 0.0,
            values["completion"] or 0.0,
            values["cached_prompt"],
            values["cache_write"],
        )

    base = build(0)
    tiers = tuple((t, build(t + 1)) for t in thresholds)
    return Price(base.prompt, base.completion, base.cached_prompt, base.cache_write, None, tiers)
