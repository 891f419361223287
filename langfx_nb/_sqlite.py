"""Many rows into one SQLite table, several a statement: what the stored trace and the run
manifest write per commit (a statement a row costs about a third more to run)."""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["insert_flat"]


def insert_flat(
    conn: sqlite3.Connection, head: str, values: str, flat: list[Any], width: int, per: int
) -> None:
    """Run ``head`` (``"INSERT INTO t VALUES "``) for the rows laid end to end in ``flat``
    (``width`` values each, ``values`` the placeholders of one), in order: ``per`` rows a
    statement, the rest one a statement."""
    step = width * per
    full = len(flat) - len(flat) % step
    if full:
        many = [flat[at : at + step] for at in range(0, full, step)]
        conn.executemany(head + ",".join([values] * per), many)
    if full < len(flat):
        rest = [flat[at : at + width] for at in range(full, len(flat), width)]
        conn.executemany(head + values, rest)
