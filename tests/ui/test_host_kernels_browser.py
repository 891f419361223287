"""JupyterLab (this venv's) with a kernel from another host's venv, in Debian's chromium:
Google Colab's pinned kernel packages (ipykernel 6.17.1, IPython 7.34, ipywidgets 7.7.1,
anywidget 0.9.21) and ipykernel 6.29.5 (``scripts/host_env colab|ipk629``).

Neither kernel hands a click to a waiting cell, so the probe picks background approvals: the
``%%lf agent`` cell returns, the prompt shows in its output, the click arrives between cells
and the answer lands in the ``-o`` variable. The query's answer and both trace explorers draw,
and no output is blank. (Lab's page runs ipywidgets 8; the kernel speaks ipywidgets 7's
protocol on Colab's pins.)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.hosts._kernel import host_python, kernel_specs

from .conftest import NOTEBOOKS, Lab, LabServer, notebook_json

pytestmark = [pytest.mark.browser, pytest.mark.hosts]

HOSTS = ("colab", "ipk629")

CELLS = [
    """%load_ext langfx_nb
import langfx_nb as lf
from langfx_nb.notebook import hosts

print("MODE:", hosts.approval_mode())


@lf.tool
async def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


talk = lf.llms.Scripted(["Paris is the capital of France."])
calc = lf.llms.Scripted([lf.ToolCall("c1", "add", {"a": 2, "b": 3}), "The sum is 5."])""",
    "%%lf query --lm talk -o capital\nWhat is the capital of France?",
    "%lf trace",
    "%%lf agent --lm calc --tools add -o ans\nWhat is 2 + 3?",
    'print("ANSWER:", ans)',
]


@pytest.fixture(scope="module")
def host_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """One JupyterLab whose kernel specs are the host kernels (``host-colab``, ...)."""
    if not NOTEBOOKS.is_dir():
        pytest.skip("no notebooks/ directory")
    data = tmp_path_factory.mktemp("host-kernels")
    for name in HOSTS:
        specs = kernel_specs(host_python(name), data / name)
        shutil.copytree(Path(specs.kernel_dirs[0]) / "host", data / "kernels" / f"host-{name}")
    home = tmp_path_factory.mktemp("jupyter-home")
    root = tmp_path_factory.mktemp("lab-root")
    with mock.patch.dict(os.environ, {"JUPYTER_PATH": str(data)}):
        server = LabServer(root, home, nodelay=True)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def lab_on_host(browser: Any, host_lab: LabServer, request: pytest.FixtureRequest) -> Iterator[Lab]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(30_000)
    harness = Lab(page, host_lab, request.node.name)
    try:
        yield harness
    finally:
        try:
            harness.screenshot("final")
        finally:
            context.close()
            for kernel in host_lab.api("/api/kernels"):
                host_lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")


def write(lab: Lab, name: str, kernel: str) -> str:
    (lab.server.root / name).write_text(notebook_json(CELLS, kernel))
    return name


@pytest.mark.parametrize("host", HOSTS)
def test_a_host_kernel_in_jupyterlab_draws_the_views_and_approves_in_the_background(
    lab_on_host: Lab, host: str
) -> None:
    lab = lab_on_host
    lab.open(write(lab, f"host_{host}.ipynb", f"host-{host}"))
    for index in range(4):
        lab.run_cell(index)
        lab.wait_cells_done()
    assert "MODE: background" in lab.output_text(0)
    assert "Paris is the capital of France." in lab.output_text(1)
    assert "runs in the background" in lab.output_text(3)
    approve = lab.page.locator(".lfx-ap .lfx-approve")
    approve.wait_for(state="visible", timeout=60_000)
    assert lab.page.locator(".lfx-te").count() == 2  # the %lf trace and the run's explorer
    assert lab.wait_all_rendered(), lab.dump_state("blank")  # 0 blank outputs
    statics = lab.page.locator(".lfx-static")
    assert not any(statics.nth(i).is_visible() for i in range(statics.count()))
    lab.screenshot(f"{host}-prompt")
    approve.click()
    lab.page.locator(".lfx-ap-hist", has_text="approved").wait_for(timeout=30_000)
    lab.run_cell(4)
    lab.wait_cells_done()
    assert "ANSWER: The sum is 5." in lab.output_text(4)
    assert lab.errors() == []
