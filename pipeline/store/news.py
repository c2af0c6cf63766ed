"""News items in ``news``: read what a feed's items may already be, insert, update, prune.

Which items to insert or update is decided by
:func:`pipeline.news_policy.merge_items`; a feed's items are looked up in
three queries and written with one ``executemany`` per kind of change,
because a big feed's thousands of single statements would dominate an ingest.
"""

from __future__ import annotations

import json
from typing import Sequence

import sqlite_utils

from ..news_policy import Known, StoredItem
from ..normalise import Item, item_id

_STORED = "id, source, entry_key, title, summary, tag, published_at, first_seen_at"


def known_items(db: sqlite_utils.Database, source: str, items: Sequence[Item]) -> Known:
    """What ``news`` holds that ``source``'s ``items`` may be (see :class:`pipeline.news_policy.Known`)."""
    keys = json.dumps([item.key for item in items])
    ids = json.dumps([item.legacy_id for item in items if item.legacy_id] + [item_id(item.url) for item in items])
    urls = json.dumps([item.url for item in items])
    by_key = {
        row[2]: StoredItem(*row)
        for row in db.execute(
            f"SELECT {_STORED} FROM news WHERE source = ? AND entry_key IN (SELECT value FROM json_each(?))",
            [source, keys],
        )
    }
    by_id = {
        row[0]: StoredItem(*row)
        for row in db.execute(f"SELECT {_STORED} FROM news WHERE id IN (SELECT value FROM json_each(?))", [ids])
    }
    url_sources: dict[str, str] = {}
    at_url: dict[str, list[StoredItem]] = {}
    for row in db.execute(f"SELECT url, {_STORED} FROM news WHERE url IN (SELECT value FROM json_each(?))", [urls]):
        stored = StoredItem(*row[1:])
        if stored.source == source:
            at_url.setdefault(row[0], []).append(stored)
        else:
            url_sources[row[0]] = stored.source
    return Known(by_key, by_id, url_sources, at_url)


def sources_with_unclaimed_items(db: sqlite_utils.Database) -> set[str]:
    """The sources that still have items stored before migration 3 that no entry has claimed."""
    return {row[0] for row in db.execute("SELECT DISTINCT source FROM news WHERE entry_key IS NULL")}


def insert_items(db: sqlite_utils.Database, source: str, items: list[tuple[str, Item]], seen_at: str) -> None:
    """Store new items of ``source`` (``(id, item)`` pairs), first seen (and last updated) at ``seen_at``."""
    db.conn.executemany(
        """INSERT INTO news (id, entry_key, url, title, summary, source, tag, published_at, first_seen_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [(id_, i.key, i.url, i.title, i.summary, source, i.tag, i.published_at, seen_at, seen_at) for id_, i in items],
    )


def update_items(db: sqlite_utils.Database, items: list[tuple[str, Item, str]], updated_at: str) -> None:
    """Change the title, summary, tag and entry key of stored items (``(id, item, published_at)``)."""
    db.conn.executemany(
        "UPDATE news SET entry_key = ?, title = ?, summary = ?, tag = ?, published_at = ?, updated_at = ? WHERE id = ?",
        [(i.key, i.title, i.summary, i.tag, published, updated_at, id_) for id_, i, published in items],
    )


def claim_items(db: sqlite_utils.Database, claims: list[tuple[str, str]]) -> None:
    """Give items stored under the old rules the entry key of the entry that is theirs (``(id, key)``)."""
    db.conn.executemany("UPDATE news SET entry_key = ? WHERE id = ?", [(key, id_) for id_, key in claims])


def delete_published_before(db: sqlite_utils.Database, cutoff: str) -> int:
    """Delete the items published before ``cutoff``; return how many went."""
    return db.execute("DELETE FROM news WHERE published_at < ?", [cutoff]).rowcount
