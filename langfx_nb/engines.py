"""Where ``lf.batch`` runs its items: ``engine=None`` is asyncio in this process;
``ProviderBatch()`` sends each item's model call through the provider's batch API
(``langfx_nb/batch/provider.py``, docs/batch.md)."""

from __future__ import annotations

from .batch.provider import ProviderBatch

__all__ = ["ProviderBatch"]
