"""The reads behind ``qsite status``: the bookkeeping the ingests keep in the same transactions as the data."""

from __future__ import annotations

import json

import sqlite_utils

#: The ``site_totals`` columns ``qsite status`` shows.
TOTAL_COLUMNS = ("courses", "slides", "quizzes", "question_bank_size", "glossary_terms", "exported_at")


def data_versions(db: sqlite_utils.Database) -> dict[str, dict]:
    """Each dataset's ``{version, changed_at}``, by name."""
    return {
        row["dataset"]: {"version": row["version"], "changed_at": row["changed_at"]}
        for row in db.query("SELECT dataset, version, changed_at FROM data_versions ORDER BY dataset")
    }


def last_run(db: sqlite_utils.Database, kind: str, statuses: tuple[str, ...] | None = None) -> dict | None:
    """The newest ``ingest_runs`` row of ``kind`` (with one of ``statuses``, if given), or ``None``."""
    where, params = "kind = ?", [kind]
    if statuses:
        where += " AND status IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(statuses))
    return next(db["ingest_runs"].rows_where(where, params, order_by="id DESC", limit=1), None)


def export_fetched_at(db: sqlite_utils.Database) -> str | None:
    """When an export was last fetched and stored (or found unchanged after a change)."""
    return db.execute("SELECT max(fetched_at) FROM export_state").fetchone()[0]


def site_totals(db: sqlite_utils.Database) -> dict | None:
    """The :data:`TOTAL_COLUMNS` of the site export last stored, or ``None`` before the first.

    The select list is built from that fixed tuple of column names, never from input.
    """
    return next(db["site_totals"].rows_where("id = 1", select=", ".join(TOTAL_COLUMNS)), None)


def news_count(db: sqlite_utils.Database) -> int:
    return db.execute("SELECT count(*) FROM news").fetchone()[0]


def items_per_source(db: sqlite_utils.Database) -> dict[str, int]:
    """How many items each source holds (sources without items are absent)."""
    return dict(db.execute("SELECT source, count(*) FROM news GROUP BY source").fetchall())
