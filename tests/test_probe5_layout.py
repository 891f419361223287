"""Issue #40's layout, checked as a new maintainer would: ``langfx_nb.batch.progress``
imports every way Python offers while ``lf.batch(...)`` stays the call, and no provider's
name or rate-limit header appears in code outside its provider module (docstrings aside)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_IMPORTS = """
import importlib, inspect
from langfx_nb.batch.progress import BatchProgress  # before langfx_nb itself
import langfx_nb.batch.progress as progress
import langfx_nb as lf
from langfx_nb.batch import progress as again
assert progress is again is lf.batch.progress is importlib.import_module("langfx_nb.batch.progress")
assert progress.BatchProgress is BatchProgress is lf.batch.BatchProgress
assert callable(lf.batch) and "fn" in inspect.signature(lf.batch).parameters
import asyncio
async def double(x):
    return 2 * x
assert asyncio.run(lf.batch(double, [1, 2], progress=False)).results == [2, 4]
"""


def test_the_progress_module_imports_every_way_and_lf_batch_is_the_call() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr


_PROVIDER = re.compile(r"openai|anthropic|gemini|claude|gpt-|x-ratelimit|x-goog", re.I)
#: the provider modules, and the registry that maps provider names to them
_OWN = {"openai.py", "openai_responses.py", "anthropic.py", "gemini.py", "registry.py"}


def _docstrings(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_no_provider_name_or_header_outside_its_provider_module() -> None:
    found: list[str] = []
    for path in sorted((ROOT / "langfx_nb").rglob("*.py")):
        if path.name in _OWN or path == ROOT / "langfx_nb/llms/__init__.py":  # lazy exports
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = None if id(node) in docs else node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, ast.ImportFrom):
                text = node.module
            if text and _PROVIDER.search(text):
                found.append(
                    f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}: {text[:60]!r}"
                )
    assert found == []
