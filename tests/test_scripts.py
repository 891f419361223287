"""The project's own commands document themselves."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lab_help_documents_its_options_and_starts_nothing() -> None:
    done = subprocess.run(
        [str(ROOT / "scripts" / "lab"), "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/lab")
    for expected in ("01_quickstart.ipynb", "--help", "LANGFX_NB_LM", "jupyter lab", "--port"):
        assert expected in done.stdout
