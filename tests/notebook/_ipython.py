"""A real InteractiveShell with the extension loaded, and a cell run in it as in a notebook."""

from __future__ import annotations

from typing import Any

from IPython.core.interactiveshell import InteractiveShell

from langfx_nb.notebook.cells import transform_lf_cell


def lf_shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    if transform_lf_cell not in ip.input_transformers_cleanup:
        ip.run_line_magic("load_ext", "langfx_nb")
    return ip


def run(ip: InteractiveShell, cell: str) -> Any:
    result = ip.run_cell(cell, store_history=True)
    if result.error_before_exec is not None:
        raise result.error_before_exec
    if result.error_in_exec is not None:
        raise result.error_in_exec
    return result.result
