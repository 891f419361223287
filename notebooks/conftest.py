"""nbval runs these notebooks headless: nobody can click Approve, so `ask` approvals in
``%%lf agent`` cells answer from this unattended allow-list instead (see docs/notebook.md).
A live JupyterLab (scripts/lab, the browser tests) does not set it, so there `ask` asks."""

from __future__ import annotations

import os


def pytest_configure() -> None:
    os.environ.setdefault("LANGFX_NB_APPROVE", "allow:add,search")
