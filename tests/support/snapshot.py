"""The rows a database holds, read as plain tuples, so a test can assert that nothing changed exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterable

#: Every table that holds the site's data (``ingest_runs`` records each run, so it changes by design).
DATA_TABLES = ("courses", "sections", "glossary", "site_totals", "news", "sources", "data_versions", "export_state")


def _rows(conn: sqlite3.Connection, table: str, columns: str) -> list[tuple]:
    width = len(conn.execute(f"SELECT {columns} FROM [{table}] LIMIT 0").description)
    order = ", ".join(str(n) for n in range(1, width + 1))
    return [tuple(row) for row in conn.execute(f"SELECT {columns} FROM [{table}] ORDER BY {order}")]


def snapshot(database, tables: Iterable[str] = DATA_TABLES, columns: str = "*") -> dict[str, list[tuple]]:
    """``{table: rows}`` for each of ``tables``, the rows sorted on every column (so rewriting
    the same rows in another order is no change).

    ``database`` is a path, opened read-only (so a snapshot never creates or writes the
    file) and read in one transaction (so a writer in another process cannot tear it),
    or an open ``sqlite_utils.Database`` or ``sqlite3.Connection``, read as it stands.
    ``columns`` narrows what is read (``"id"``).
    """
    if isinstance(database, (str, Path)):
        conn = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True, timeout=10, isolation_level=None)
        try:
            conn.execute("BEGIN")
            found = {table: _rows(conn, table, columns) for table in tables}
            conn.execute("COMMIT")
            return found
        finally:
            conn.close()
    conn = getattr(database, "conn", database)
    return {table: _rows(conn, table, columns) for table in tables}
