"""Text that can always be encoded: lone surrogates repaired.

A lone surrogate (``"\\ud800"``, from a ``\\ud800`` escape in a model's JSON or Python
answer, or pasted by a user) is a valid ``str`` that UTF-8 cannot encode, so it would break
every later request body, cache key, cache row or saved trace that contains it.
"""

from __future__ import annotations

import re

__all__ = ["has_surrogates", "repair_surrogates"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    return _SURROGATE.search(text) is not None


def repair_surrogates(text: str) -> str:
    """``text`` with surrogate pairs joined into their character and lone surrogates replaced
    by U+FFFD; text without surrogates is returned as is."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
