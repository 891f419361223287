from __future__ import annotations

import json
import subprocess
import sys
import types

import langfx_nb as lf


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions/modules.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_complete() -> None:
    assert lf.__all__ == sorted(lf.__all__, key=_isort_key)
    for name in lf.__all__:  # also loads the lazily imported names
        assert getattr(lf, name) is not None, name
    public = {
        name
        for name, value in vars(lf).items()
        if not name.startswith("_")
        and name
        not in {
            "annotations",
            "Any",
            "TYPE_CHECKING",
            "load_ipython_extension",
            "unload_ipython_extension",
        }
        and not (isinstance(value, types.ModuleType) and name not in ("llms", "batch"))
    }
    assert public == set(lf.__all__)
    for name in lf.__all__:
        assert hasattr(lf, name), name


def test_import_is_light() -> None:
    code = (
        "import sys, time, json; t=time.perf_counter(); import langfx_nb; "
        "print(json.dumps([time.perf_counter()-t, sorted(sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, modules = json.loads(out.stdout)
    heavy = {"IPython", "ipywidgets", "anywidget", "ipykernel", "traitlets", "jupyter_client"}
    assert not heavy & {m.split(".")[0] for m in modules}
    providers = {"langfx_nb.llms.gemini", "langfx_nb.llms.anthropic", "langfx_nb.llms.openai"}
    assert not providers & set(modules)
    assert "langfx_nb.notebook" not in modules
    # Generous bound for a loaded CI machine; benchmarks/import_time.py reports the real figure.
    assert seconds < 2.0


def test_every_error_class_is_exported_and_drawn_in_the_tree() -> None:
    # In a child process: importing every module here would change what other tests see.
    code = """
import pkgutil, sys, langfx_nb as lf, langfx_nb.errors as errors
for info in pkgutil.walk_packages(lf.__path__, "langfx_nb."):
    if ".notebook" not in info.name:
        __import__(info.name)
def below(cls):
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= below(sub)
    return found
for cls in below(lf.LangFxError):
    if not cls.__module__.startswith("langfx_nb"):
        continue
    if getattr(lf, cls.__name__, None) is not cls:
        sys.exit(f"lf.{cls.__name__} is not exported")
    if f" {cls.__name__} " not in errors.__doc__:
        sys.exit(f"{cls.__name__} is missing from the tree drawn in errors.py")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
