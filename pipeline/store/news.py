"""News items in ``news``: read what a feed's items already are, insert, update, prune.

Which items to insert or update is decided by
:func:`pipeline.news_policy.merge_items`; a feed's items are read in one
query and written with one ``executemany`` per kind of change, because a
big feed's thousands of single statements would dominate an ingest.
"""

from __future__ import annotations

import json
from typing import Iterable

import sqlite_utils

from ..normalise import Item


def existing_items(db: sqlite_utils.Database, ids: Iterable[str]) -> dict[str, tuple]:
    """For each of ``ids`` already stored: ``(source, title, summary, tag)``."""
    return {
        row[0]: tuple(row[1:])
        for row in db.execute(
            "SELECT id, source, title, summary, tag FROM news WHERE id IN (SELECT value FROM json_each(?))",
            [json.dumps(list(ids))],
        )
    }


def insert_items(db: sqlite_utils.Database, source: str, items: list[Item], seen_at: str) -> None:
    """Store new items of ``source``, first seen (and last updated) at ``seen_at``."""
    db.conn.executemany(
        """INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [(i.id, i.url, i.title, i.summary, source, i.tag, i.published_at, seen_at, seen_at) for i in items],
    )


def update_items(db: sqlite_utils.Database, items: list[Item], updated_at: str) -> None:
    """Change the title, summary and tag of stored items; their dates stay."""
    db.conn.executemany(
        "UPDATE news SET title = ?, summary = ?, tag = ?, updated_at = ? WHERE id = ?",
        [(i.title, i.summary, i.tag, updated_at, i.id) for i in items],
    )


def delete_published_before(db: sqlite_utils.Database, cutoff: str) -> int:
    """Delete the items published before ``cutoff``; return how many went."""
    return db.execute("DELETE FROM news WHERE published_at < ?", [cutoff]).rowcount
