"""Where ``lf.batch`` runs its items (``engine=``).

- ``Asyncio()`` (``engine=None``): in this process, on asyncio.
- ``ProviderBatch()``: each item's model call through the provider's batch API, at half
  price (``langfx_nb/batch/provider.py``, docs/batch.md).
- ``Ray()``: on a Ray cluster (``langfx_nb/batch/ray_engine.py``; Ray is imported only when
  a batch uses it).

An engine is any object with the small ``Engine`` interface: a ``name``, an ``in_process``
flag and ``async run(job: BatchJob)``, which settles the job's pending items through the
job (``langfx_nb/batch/engine.py`` says what the job offers and guarantees).
"""

from __future__ import annotations

from .batch.engine import Asyncio, BatchJob, Engine
from .batch.provider import ProviderBatch
from .batch.ray_engine import Ray

__all__ = ["Asyncio", "BatchJob", "Engine", "ProviderBatch", "Ray"]
