"""``rfc3987_syntax`` imported lazily, for the Ray processes of a cluster that
``lf.engines.Ray()`` starts (``batch/ray_engine.py``, docs/decisions.md).

Every Ray process imports ``jsonschema``, which imports ``rfc3987_syntax`` when it is
installed, and that package builds its Earley grammar at import: about 1.5 s of CPU per
process. This stand-in is the installed package (its ``__path__`` is the real package's
directory) whose ``is_valid_syntax`` and other names load the real ``syntax_helpers`` on
first use: ``jsonschema`` registers its ``iri`` format checks as before, and they check
exactly as before when used. Without the real package it is not importable either.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_NAME = "rfc3987_syntax"
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_REAL = importlib.machinery.PathFinder.find_spec(
    _NAME, [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
)
if _REAL is None or not _REAL.submodule_search_locations or not importlib.util.find_spec("lark"):
    raise ImportError(f"{_NAME} is not installed")
__path__ = list(_REAL.submodule_search_locations)


def is_valid_syntax(term: str, value: str) -> bool:
    helpers = importlib.import_module(f"{_NAME}.syntax_helpers")
    return bool(helpers.is_valid_syntax(term, value))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    helpers = importlib.import_module(f"{_NAME}.syntax_helpers")
    return getattr(helpers, name)
