"""Installing never fights the host: what the ``notebook`` extra asks for, and what scripts/lab
installs for the tour notebooks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]

# Google Colab's runtime pins these; the oldest versions the host tests run (scripts/host_env)
COLAB = {"ipykernel": "6.17.1", "ipython": "7.34.0", "ipywidgets": "7.7.1", "anywidget": "0.9.21"}


def requirements(extra: str) -> dict[str, Requirement]:
    """Every requirement ``extra`` brings, following ``langfx_nb[...]`` references."""
    found: dict[str, Requirement] = {}
    for text in EXTRAS[extra]:
        req = Requirement(text)
        if req.name == "langfx_nb":
            for inner in req.extras:
                found.update(requirements(inner))
        else:
            found[req.name.lower()] = req
    return found


def test_the_notebook_extra_asks_only_for_what_the_widgets_need() -> None:
    notebook = requirements("notebook")
    assert "jupyterlab" not in notebook and "notebook" not in notebook
    assert "ipykernel" not in notebook  # the host's kernel is the host's
    for name, oldest in COLAB.items():  # Colab's pins satisfy every floor: nothing upgrades
        if name in notebook:
            assert notebook[name].specifier.contains(Version(oldest)), (name, notebook[name])


def test_scripts_lab_installs_every_extra_the_tour_notebooks_use() -> None:
    script = (ROOT / "scripts" / "lab").read_text()
    extras = re.search(r"^extra=(\S+)$", script, re.MULTILINE)
    assert extras is not None
    brought: dict[str, Requirement] = {}
    for extra in extras.group(1).split(","):
        brought.update(requirements(extra))
    assert {"jupyterlab", "ipykernel", "anywidget"} <= set(brought)
    tours = "".join(p.read_text() for p in (ROOT / "notebooks").glob("*.ipynb"))
    if "lf.mcp." in tours:  # 05_agents_for_real_work starts an MCP server
        assert "mcp" in brought
    if "lf.otel." in tours:
        assert "opentelemetry-sdk" in brought
