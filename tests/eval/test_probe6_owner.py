"""Two processes evaluating into one run manifest, as two notebooks of one user do: the
second is refused naming the owner, and the advice its ``RunManifestError`` gives ("Wait
for it to finish (or pass if_owned='wait')") is one ``lf.eval.run`` takes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import asyncio, os, sys
import langfx_nb as lf

async def double(x: int) -> int:
    if os.environ.get("PROBE6_BLOCK") and x >= 3:
        await asyncio.Event().wait()  # until killed
    return x * 2

async def main() -> None:
    options = {"if_owned": "wait"} if sys.argv[2] == "wait" else {}
    try:
        await lf.eval.run(double, list(range(6)), [lf.eval.exact], run=sys.argv[1],
                          max_concurrency=2, progress=False, live=False, **options)
    except lf.RunManifestError as exc:
        print(exc)
        sys.exit(3)
    print("done")

asyncio.run(main())
"""


def _start(script: Path, manifest: Path, mode: str, block: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROBE6_BLOCK", None)
    if block:
        env["PROBE6_BLOCK"] = "1"
    return subprocess.Popen(
        [sys.executable, str(script), str(manifest), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ok_rows(manifest: Path) -> int:
    try:
        with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM items WHERE status='ok'").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_an_evaluation_told_to_wait_for_the_owner_finishes_after_it(tmp_path: Path) -> None:
    script, manifest = tmp_path / "child.py", tmp_path / "eval.sqlite"
    script.write_text(CHILD, encoding="utf-8")
    owner = _start(script, manifest, "plain", block=True)
    waiter: subprocess.Popen[str] | None = None
    try:
        for _ in range(600):  # bounded: at most 60 s
            if _ok_rows(manifest) >= 3 or owner.poll() is not None:
                break
            time.sleep(0.1)
        assert owner.poll() is None and _ok_rows(manifest) == 3
        refused = _start(script, manifest, "plain", block=False)
        out, _ = refused.communicate(timeout=120)
        assert refused.returncode == 3 and f"pid {owner.pid}" in out
        assert "if_owned='wait'" in out  # the advice this test follows
        waiter = _start(script, manifest, "wait", block=False)
        owner.send_signal(signal.SIGKILL)
        owner.communicate(timeout=30)
        out, err = waiter.communicate(timeout=120)
        assert waiter.returncode == 0, err[-2000:]
        assert out.strip() == "done"
        assert _ok_rows(manifest) == 6
    finally:
        for proc in (owner, waiter):
            if proc is not None:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate(timeout=30)  # its pipes closed
