"""Where ``lf.batch`` runs its items: ``engine=None`` is asyncio in this process;
``ProviderBatch()`` sends each item's model call through the provider's batch API
(``langfx_nb/batch/provider.py``, docs/batch.md); ``Ray()`` runs the items on a Ray
cluster (``langfx_nb/batch/ray_engine.py``; Ray is imported only when a batch uses it)."""

from __future__ import annotations

from .batch.provider import ProviderBatch
from .batch.ray_engine import Ray

__all__ = ["ProviderBatch", "Ray"]
