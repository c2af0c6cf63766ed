"""News items in ``news``: read what a feed's items may already be, insert, update, prune.

Which items to insert or update is decided by
:func:`qsite.pipeline.news.policy.merge_items`; a feed's items are looked up in
three queries and written with one statement per kind of change (the rows as one
JSON array, :func:`_rows`), because each statement that writes a full-text table
flushes that table's pending entries into a segment of its own (FTS5 cannot roll
back to a statement's start otherwise): ``executemany``, a statement a row, wrote the
five search tables a segment per item, and a sweep's store took three times as long.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence

import sqlite_utils

from qsite.db.model import utc_now
from qsite.db.news_derived import COUNT_NEWS, TOTAL_COUNTS
from qsite.db.news_search_tags import TAG_TABLES
from qsite.db.news_sync import LATEST_CHANGE, next_change
from qsite.db.search_tables import rebuild_search_table
from qsite.pipeline.store.records import Item, Known, StoredItem, item_id

_STORED = "id, source, entry_key, title, summary, tag, published_at, first_seen_at, image_url, authors"


def _stored(row: Sequence) -> StoredItem:
    """A ``news`` row read with :data:`_STORED` (authors are stored as a JSON array)."""
    return StoredItem(*row[:-1], authors=tuple(json.loads(row[-1] or "[]")))


def authors_json(authors: Sequence[str]) -> str:
    """How ``news.authors`` stores a list of names."""
    if not authors:  # most items name nobody: a bulk insert of a million saves 3 s
        return "[]"
    return json.dumps(list(authors), ensure_ascii=False)


def change_time(db: sqlite_utils.Database) -> tuple[str, str]:
    """The ``(updated_at, change_key)`` to stamp the changes of the open transaction with.

    Read inside the write transaction, never at the start of a run: one writer
    commits at a time, so keys then grow in the order changes become visible
    (:mod:`qsite.db.news_sync`).
    """
    return next_change(db.execute(LATEST_CHANGE).fetchone()[0], utc_now())


def known_items(db: sqlite_utils.Database, source: str, items: Sequence[Item]) -> Known:
    """What ``news`` holds that ``source``'s ``items`` may be (see :class:`qsite.pipeline.store.records.Known`)."""
    keys = json.dumps([item.key for item in items])
    ids = json.dumps([item.legacy_id for item in items if item.legacy_id] + [item_id(item.url) for item in items])
    urls = json.dumps([item.url for item in items])
    by_key = {
        row[2]: _stored(row)
        for row in db.execute(
            f"SELECT {_STORED} FROM news WHERE source = ? AND entry_key IN (SELECT value FROM json_each(?))",
            [source, keys],
        )
    }
    by_id = {
        row[0]: _stored(row)
        for row in db.execute(f"SELECT {_STORED} FROM news WHERE id IN (SELECT value FROM json_each(?))", [ids])
    }
    url_sources: dict[str, str] = {}
    at_url: dict[str, list[StoredItem]] = {}
    for row in db.execute(f"SELECT url, {_STORED} FROM news WHERE url IN (SELECT value FROM json_each(?))", [urls]):
        stored = _stored(row[1:])
        if stored.source == source:
            at_url.setdefault(row[0], []).append(stored)
        else:
            url_sources[row[0]] = stored.source
    candidates = json.dumps([item_id(item.url) for item in items] + [item_id(item.url, item.key) for item in items])
    removed = frozenset(
        row[0] for row in db.execute("SELECT id FROM news_removed WHERE id IN (SELECT value FROM json_each(?))", [candidates])
    )
    return Known(by_key, by_id, url_sources, at_url, removed)


def holds_items(db: sqlite_utils.Database, source: str) -> bool:
    """Whether ``news`` holds any item of ``source`` (one index probe: ``news_source_newest``)."""
    return db.execute("SELECT 1 FROM news WHERE source = ? LIMIT 1", [source]).fetchone() is not None


def sources_with_unclaimed_items(db: sqlite_utils.Database) -> set[str]:
    """The sources that still have items stored before migration 3 that no entry has claimed."""
    return {row[0] for row in db.execute("SELECT DISTINCT source FROM news WHERE entry_key IS NULL")}


def _rows(rows: list[tuple]) -> tuple[str, str]:
    """``rows`` (equal-length tuples of text and ``None``) as one parameter, and the ``SELECT`` list of
    their columns, ``c0``, ``c1``, ...: ``SELECT {columns} FROM json_each(?)`` reads them back, each
    value the text it was (JSON strings round-trip exactly)."""
    columns = ", ".join(f"json_extract(value, '$[{i}]') AS c{i}" for i in range(len(rows[0])))
    return json.dumps(rows, ensure_ascii=False), columns


def insert_items(db: sqlite_utils.Database, source: str, items: list[tuple[str, Item]], seen_at: str) -> None:
    """Store new items of ``source`` (``(id, item)`` pairs), first seen at ``seen_at``, updated now (:func:`change_time`)."""
    if not items:
        return
    updated_at, change_key = change_time(db)
    rows, columns = _rows([
        (id_, i.key, i.url, i.title, i.summary, source, i.tag, i.published_at, seen_at, updated_at,
         i.image_url, authors_json(i.authors), change_key)
        for id_, i in items
    ])
    db.execute(
        f"""INSERT INTO news (id, entry_key, url, title, summary, source, tag, published_at, first_seen_at, updated_at,
                              image_url, authors, change_key)
            SELECT * FROM (SELECT {columns} FROM json_each(?) ORDER BY key)""",
        [rows],
    )


def update_items(db: sqlite_utils.Database, items: list[tuple[str, Item, str]], updated_at: str | None = None) -> None:
    """Change what is served of stored items (``(id, item, published_at)``) and their entry key.

    Only items that :func:`qsite.pipeline.news.policy.merge_items` found changed come
    here, so ``updated_at`` moves on a real change only: to ``updated_at``, by
    default now (:func:`change_time`).
    """
    if not items:
        return
    now, change_key = change_time(db)
    rows, columns = _rows([
        (id_, i.key, i.title, i.summary, i.tag, published, i.image_url, authors_json(i.authors), updated_at or now, change_key)
        for id_, i, published in items
    ])
    db.execute(
        f"""UPDATE news SET entry_key = changed.c1, title = changed.c2, summary = changed.c3, tag = changed.c4,
                            published_at = changed.c5, image_url = changed.c6, authors = changed.c7,
                            updated_at = changed.c8, change_key = changed.c9
            FROM (SELECT {columns} FROM json_each(?)) AS changed
            WHERE news.id = changed.c0""",
        [rows],
    )


def claim_items(db: sqlite_utils.Database, claims: list[tuple[str, str]]) -> None:
    """Give items stored under the old rules the entry key of the entry that is theirs (``(id, key)``)."""
    db.conn.executemany("UPDATE news SET entry_key = ? WHERE id = ?", [(key, id_) for id_, key in claims])


def delete_published_before(db: sqlite_utils.Database, cutoff: str) -> int:
    """Delete the items published before ``cutoff``; return how many went.

    Each leaves a tombstone in ``news_removed`` (:mod:`qsite.db.news_sync`), and (trigger
    ``news_left_removed``) a row in ``news_left`` with the tag and source it had, so that
    mirrors drop it too, those of one tag or source included.
    """
    removed_at, change_key = change_time(db)
    db.execute(
        """INSERT INTO news_removed (id, removed_at, change_key)
           SELECT id, ?, ? FROM news WHERE published_at < ?
           ON CONFLICT (id) DO UPDATE SET removed_at = excluded.removed_at, change_key = excluded.change_key""",
        [removed_at, change_key, cutoff],
    )
    return db.execute("DELETE FROM news WHERE published_at < ?", [cutoff]).rowcount


#: The triggers that keep derived data in step with each inserted row, and how
#: to build that data at once instead (:func:`bulk_insert_items`), in this order.
_INSERT_TRIGGERS = {
    "news_ai": lambda db: db["news"].rebuild_fts(),
    "news_counts_insert": lambda db: (db.execute("DELETE FROM news_counts"), db.execute(COUNT_NEWS)),
    # from the counts just made: they hold what news does in a few tens of thousands of rows
    "news_totals_insert": lambda db: (db.execute("DELETE FROM news_totals"), db.execute(TOTAL_COUNTS)),
    "news_search_insert": lambda db: rebuild_search_table(db, "news_search"),
    "news_search_by_source_insert": lambda db: rebuild_search_table(db, "news_search_by_source"),
    "news_search_tags_insert": lambda db: [rebuild_search_table(db, table) for table in TAG_TABLES],
}

#: Page cache during a bulk insert, in KiB: the primary key and URL indexes of a
#: million random ids fit, so inserting does not wait on the disk.
BULK_CACHE_KIB = 256 * 1024


def bulk_insert_items(
    db: sqlite_utils.Database, rows: Iterable[tuple[str, str, Item]], seen_at: str, batch: int = 50_000
) -> int:
    """Store many new items of many sources, ``(source, id, item)``, at once; return how many.

    For filling a new database in one go (the benchmark's million items), not
    for ingesting: call it inside a :func:`~qsite.pipeline.store.transaction`. Row
    by row, the secondary indexes, the full-text index and the monthly counts
    cost more than the rows themselves, so they are set aside and built once
    at the end: the news indexes and insert triggers are dropped, and after
    the rows are in, ``news_fts``, ``news_search``, ``news_search_by_source`` and each tag's search table are rebuilt, ``news_counts`` counted from
    the table and ``news_totals`` from those counts, and the indexes and triggers are created again from their own
    stored SQL. Schema changes are transactional in SQLite, so no other
    connection ever sees the table without them. All of it reads the whole
    table, so on a big database it costs as much as the table's size.
    """
    kept = db.execute(
        """SELECT type, name, sql FROM sqlite_master
           WHERE tbl_name = 'news' AND sql IS NOT NULL AND (type = 'index' OR type = 'trigger' AND name IN (SELECT value FROM json_each(?)))""",
        [json.dumps(list(_INSERT_TRIGGERS))],
    ).fetchall()
    cache_size = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB:d}")
    try:
        for kind, name, _ in kept:
            db.execute(f"DROP {kind.upper()} [{name}]")
        total = 0
        rows = iter(rows)
        change_key = next_change("", seen_at)[1]
        while chunk := [
            (id_, i.key, i.url, i.title, i.summary, source, i.tag, i.published_at, seen_at, seen_at,
             i.image_url, authors_json(i.authors), change_key)
            for source, id_, i in itertools.islice(rows, batch)
        ]:
            db.conn.executemany(
                """INSERT INTO news (id, entry_key, url, title, summary, source, tag, published_at, first_seen_at, updated_at,
                                     image_url, authors, change_key)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                chunk,
            )
            total += len(chunk)
        for rebuild in _INSERT_TRIGGERS.values():
            rebuild(db)
        for _, _, sql in kept:
            db.execute(sql)
    finally:
        db.execute(f"PRAGMA cache_size = {cache_size:d}")
    return total
