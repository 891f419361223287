"""The package installs anywhere Python runs: one pure-Python wheel with everything it needs."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_build_is_one_pure_python_wheel_with_the_widget_bundles(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    wheels = list(tmp_path.iterdir())
    assert [w.name for w in wheels] == ["langfx_nb-0.1.0-py3-none-any.whl"]
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    bundles = {f"langfx_nb/notebook/static/{n}.js" for n in ("approval", "stream_view")}
    assert bundles | {"langfx_nb/py.typed", "langfx_nb/structured/stream_parser.py"} <= names
    assert not [n for n in names if n.endswith((".c", ".so", ".pyd"))]
    assert not (ROOT / "setup.py").exists()
