"""The tables the site export fills (``courses``, ``sections``, ``glossary``, ``site_totals``) and ``export_state``.

The rows come from :func:`qsite.pipeline.site.catalog_rows.build_rows` as dicts of
column values. The statements are sqlite-utils' own, parameterised, with
the table names fixed here and the column names those of the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlite_utils

from qsite.db.model import CATALOG, GLOSSARY, TOTALS


@dataclass(frozen=True)
class ExportState:
    """The validators and body hash of the export last stored from one source."""

    etag: str | None
    last_modified: str | None
    content_hash: str | None


def export_state(db: sqlite_utils.Database, source: str) -> ExportState | None:
    """What was stored from ``source`` last time, or ``None`` if nothing was."""
    for row in db["export_state"].rows_where("source = ?", [source]):
        return ExportState(row["etag"], row["last_modified"], row["content_hash"])
    return None


def save_export_state(db: sqlite_utils.Database, source: str, state: ExportState, fetched_at: str) -> None:
    """Remember ``source``'s validators and body hash, so an unchanged export writes nothing next time."""
    db["export_state"].upsert(
        {
            "source": source,
            "etag": state.etag,
            "last_modified": state.last_modified,
            "content_hash": state.content_hash,
            "fetched_at": fetched_at,
        },
        pk="source",
    )


def _stored(db: sqlite_utils.Database, table: str, order_by: str) -> list[dict]:
    return list(db[table].rows_where(order_by=order_by))


def replace_catalog(
    db: sqlite_utils.Database, *, courses: list[dict], sections: list[dict], glossary: list[dict], totals: dict
) -> list[str]:
    """Replace the tables whose rows differ from these; return the datasets that changed.

    Call inside a transaction (:func:`qsite.pipeline.store.transaction`): readers must
    see the old catalog or the new one. ``glossary`` must be in id order.
    """
    catalog_changed = _stored(db, "courses", "position") != courses or _stored(
        db, "sections", "course_id, position"
    ) != sorted(sections, key=lambda row: (row["course_id"], row["position"]))
    glossary_changed = _stored(db, "glossary", "id") != glossary
    totals_changed = _stored(db, "site_totals", "id") != [totals]
    if catalog_changed or glossary_changed:
        # Glossary rows point at sections; they go first and come back last.
        db["glossary"].delete_where()
    if catalog_changed:
        db["sections"].delete_where()
        db["courses"].delete_where()
        db["courses"].insert_all(courses)
        db["sections"].insert_all(sections)
    if catalog_changed or glossary_changed:
        db["glossary"].insert_all(glossary)
    if totals_changed:
        db["site_totals"].delete_where()
        db["site_totals"].insert(totals)
    return [dataset for dataset, changed in ((CATALOG, catalog_changed), (GLOSSARY, glossary_changed), (TOTALS, totals_changed)) if changed]
