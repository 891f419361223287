"""The committed JS bundles match js/src, mirror the Python message kinds, and stay offline."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from langfx_nb.agentic.trace import STATUSES
from langfx_nb.notebook.bridge import MESSAGE_KINDS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "js" / "src"
STATIC = ROOT / "langfx_nb" / "notebook" / "static"
BUNDLES = ["trace_explorer", "approval", "stream_view", "batch_view", "eval_report"]


def source_hash() -> str:
    """Same digest as js/build.mjs: (relative path, NUL, bytes, NUL) per file, sorted."""
    digest = hashlib.sha256()
    for path in sorted(SRC.rglob("*"), key=lambda p: p.relative_to(SRC).as_posix()):
        if path.is_file():
            digest.update(path.relative_to(SRC).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()


@pytest.mark.parametrize("name", BUNDLES)
def test_bundle_is_built_from_the_current_sources(name: str) -> None:
    bundle = (STATIC / f"{name}.js").read_text(encoding="utf-8")
    first = bundle.splitlines()[0]
    assert first == f"// langfx-src-sha256: {source_hash()}", (
        f"langfx_nb/notebook/static/{name}.js is stale: run `npm run build` in js/ and commit it"
    )


@pytest.mark.parametrize("name", BUNDLES)
def test_bundle_needs_no_network(name: str) -> None:
    bundle = (STATIC / f"{name}.js").read_text(encoding="utf-8")
    assert not re.search(r"""(from|import)\s*\(?\s*["']https?:""", bundle)
    assert "export" in bundle  # an ES module anywidget can import


def test_message_kinds_are_mirrored_in_js() -> None:
    text = (SRC / "kinds.ts").read_text(encoding="utf-8")
    literal = re.search(r"KINDS = (\{.*?\}) as const", text, re.S)
    assert literal is not None
    assert json.loads(literal.group(1)) == MESSAGE_KINDS


def test_every_node_status_has_its_own_colour_in_the_widgets() -> None:
    # A status without a rule is drawn grey, like an unknown one: the reader cannot tell a
    # suspended run from a node with no status at all.
    css = (SRC / "dom.ts").read_text(encoding="utf-8")
    colour = {
        status: re.search(rf"\.lfx \.lfx-st-{status}\b[^{{]*\{{([^}}]*)\}}", css)
        for status in STATUSES
    }
    assert [s for s, rule in colour.items() if rule is None] == []
    rules = {s: rule.group(1) for s, rule in colour.items() if rule is not None}
    assert "--lfx-paused" in rules["suspended"]
    assert "--lfx-paused:var(--jp-info-color1" in css  # the theme's colour: light and dark


def test_js_never_writes_html_from_data() -> None:
    for path in SRC.rglob("*.ts"):
        code = path.read_text(encoding="utf-8")
        for sink in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ):
            assert sink not in code, f"{path.name} uses {sink}"


@pytest.mark.skipif(
    shutil.which("node") is None or not (ROOT / "js" / "node_modules" / "esbuild").exists(),
    reason="node or js/node_modules missing (npm ci in js/)",
)
def test_rebuilding_reproduces_the_committed_bundles(tmp_path: Path) -> None:
    subprocess.run(
        ["node", "build.mjs", "--out", str(tmp_path)],
        cwd=ROOT / "js",
        check=True,
        capture_output=True,
        timeout=100,
    )
    for name in BUNDLES:
        assert (tmp_path / f"{name}.js").read_bytes() == (STATIC / f"{name}.js").read_bytes(), name
