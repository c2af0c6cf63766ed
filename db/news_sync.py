"""What keeps a mirror of the news in step: each item's image, authors and change, and what was removed.

Migration 7 (:func:`qsite.db.migrations.m007_news_sync`) adds to ``news`` ``image_url`` (the entry's own
image, canonical, or null), ``authors`` (a JSON array of names, ``[]`` when none) and ``change_key``,
the position of its last change in commit order (:func:`next_change`), indexed by ``news_updated``
on ``(change_key, id)``: the order a sync walk reads (``/api/v1/news?updated_since=``,
``api_news_changes`` in ``metadata.yml``), so a walk reads only what changed since its time,
whatever the size of the table. It adds the table ``news_removed``: one tombstone per item qsite
deleted (retention), with when and its own ``change_key``, so a mirror learns to drop it
(``/api/v1/news/removed``). Tombstones are small and kept for good, so a mirror that has not synced
for any length of time still learns of every removal.

Must not change:

- An item stored again under a removed id loses its tombstone (trigger ``news_removed_back``), so
  the two lists never disagree about it.
- ``change_key`` is ``updated_at``'s second, ``#`` and a counter (``<second>#000000003``), greater
  than every key already committed, so a change committed while a walk pages lands after the walk's
  position; it compares with a bare time as that second's start. ``updated_at`` alone, to the
  second, cannot order a walk: two commits in one second share it.
- Rows stored before the migration keep their ``updated_at`` and get ``updated_at#000000000``.
"""

from __future__ import annotations

import logging

from qsite.db.model import NEWS, utc_now

log = logging.getLogger("qsite.migrations")

#: Digits of a change key's counter: more commits in one second than this would need is not possible.
COUNTER_DIGITS = 9

#: SQL: the greatest change key committed, of items and tombstones ('' when none).
LATEST_CHANGE = (
    "SELECT max(coalesce((SELECT max(change_key) FROM news), ''),"
    " coalesce((SELECT max(change_key) FROM news_removed), ''))"
)


def next_change(latest: str, now: str) -> tuple[str, str]:
    """The ``(updated_at, change_key)`` of a change committed after ``latest`` (a change key, or ``''``) at ``now``.

    The time is ``now``, but never earlier than the latest change's (a clock
    stepping back does not reorder changes); the key counts on within that second.
    """
    second, _, counter = latest.partition("#")
    if second and second >= now:
        return second, f"{second}#{int(counter or 0) + 1:0{COUNTER_DIGITS}d}"
    return now, f"{now}#{0:0{COUNTER_DIGITS}d}"


SCHEMA = f"""
    ALTER TABLE news ADD COLUMN image_url TEXT;
    ALTER TABLE news ADD COLUMN authors TEXT NOT NULL DEFAULT '[]';  -- a JSON array of names
    ALTER TABLE news ADD COLUMN change_key TEXT NOT NULL DEFAULT '';
    UPDATE news SET change_key = updated_at || '#{0:0{COUNTER_DIGITS}d}';
    CREATE INDEX news_updated ON news(change_key, id);

    CREATE TABLE news_removed (
        id TEXT PRIMARY KEY,
        removed_at TEXT NOT NULL,
        change_key TEXT NOT NULL
    );
    CREATE INDEX news_removed_at ON news_removed(change_key, id);

    CREATE TRIGGER news_removed_back AFTER INSERT ON news BEGIN
        DELETE FROM news_removed WHERE id = new.id;
    END;
"""

#: m009: a sync walk with a tag or sources reads an index that leads with them, in change
#: order, instead of news_updated filtered: a tag and a source that never meet read the whole
#: index there (a second at a million items), here nothing past the page.
FILTER_INDEXES = """
    CREATE INDEX news_tag_updated ON news(tag, change_key, id);
    CREATE INDEX news_source_updated ON news(source, change_key, id);
    CREATE INDEX news_source_tag_updated ON news(source, tag, change_key, id);
"""

#: m012: what a mirror of one view (a tag, sources) needs to learn an item left it. ``news_left``
#: holds, per item, each tag and source it had before it left them, with when and the change's key:
#: trigger ``news_left_view`` writes a row whenever an item's tag or source changes (the pipeline's
#: update gives the item a new ``change_key`` in the same statement), and ``news_left_removed`` one
#: when an item is deleted, from the tombstone written just before (:func:`qsite.pipeline.store.news.delete_published_before`).
#: Tombstones already there are copied with tag and source ``''``: unknown, so listed under every view.
#: An id left a view when its latest row that matches the view is there and the item is not in the view
#: now (``api_news_removed_filtered`` in ``datasette.yaml``, through ``news_left_tag``,
#: ``news_left_source`` (the rows that left a source: ``tag_only`` 0) and ``news_left_source_tag``
#: in change order).
VIEW_LOG = """
    CREATE TABLE news_left (
        id TEXT NOT NULL,
        tag TEXT NOT NULL,
        source TEXT NOT NULL,
        left_at TEXT NOT NULL,
        change_key TEXT NOT NULL,
        -- 1: only its tag changed (it is still in its source's views)
        tag_only INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX news_left_item ON news_left(id, tag, source);
    CREATE INDEX news_left_at ON news_left(change_key, id);
    CREATE INDEX news_left_tag ON news_left(tag, change_key, id);
    CREATE INDEX news_left_source ON news_left(source, tag_only, change_key, id);
    CREATE INDEX news_left_source_tag ON news_left(source, tag, change_key, id);
    INSERT INTO news_left (id, tag, source, left_at, change_key)
        SELECT id, '', '', removed_at, change_key FROM news_removed;

    CREATE TRIGGER news_left_view AFTER UPDATE OF tag, source ON news
    WHEN old.tag IS NOT new.tag OR old.source IS NOT new.source BEGIN
        INSERT INTO news_left (id, tag, source, left_at, change_key, tag_only)
        VALUES (old.id, old.tag, old.source, new.updated_at, new.change_key, old.source IS new.source)
        ON CONFLICT (id, tag, source) DO UPDATE
        SET left_at = excluded.left_at, change_key = excluded.change_key, tag_only = excluded.tag_only;
    END;

    CREATE TRIGGER news_left_removed AFTER DELETE ON news BEGIN
        INSERT INTO news_left (id, tag, source, left_at, change_key)
        SELECT old.id, old.tag, old.source, removed_at, change_key FROM news_removed WHERE id = old.id
        ON CONFLICT (id, tag, source) DO UPDATE
        SET left_at = excluded.left_at, change_key = excluded.change_key, tag_only = 0;
    END;
"""

#: m013: the items of one source a changed guid stored twice (same URL, title, and summary or date:
#: one story), each but the first stored (earliest first seen, then the lowest rowid), as
#: ``(id, tag, source)``. The first keeps its id, so mirrors and links keep theirs.
GUID_DUPLICATES = """
    SELECT id, tag, source FROM (
        SELECT news.id, news.tag, news.source, EXISTS (
            SELECT 1 FROM news AS first
            WHERE first.source = news.source AND first.url = news.url AND first.title = news.title
              AND (first.summary = news.summary OR first.published_at = news.published_at)
              AND (first.first_seen_at, first.rowid) < (news.first_seen_at, news.rowid)
        ) AS later
        FROM news
        WHERE (source, url, title) IN (
            SELECT source, url, title FROM news GROUP BY source, url, title HAVING count(*) > 1)
    ) WHERE later
"""

#: m013: remove one of :data:`GUID_DUPLICATES` (``id``, ``at``, ``key``), leaving its tombstone (and so its ``news_left`` row).
REMOVE_DUPLICATE = (
    """INSERT INTO news_removed (id, removed_at, change_key) VALUES (:id, :at, :key)
       ON CONFLICT (id) DO UPDATE SET removed_at = excluded.removed_at, change_key = excluded.change_key""",
    "DELETE FROM news WHERE id = :id",
)


def remove_guid_duplicates(db) -> int:
    """Migration 13: remove what changed guids stored twice (:data:`GUID_DUPLICATES`); log and return how many.

    The ingest now takes an entry whose guid changed for the item at its URL with its title. What
    the rules before stored twice goes: each later copy is removed as retention removes an item,
    with a tombstone, so mirrors drop it too (``/api/v1/news/removed``, with or without filters);
    the first keeps its id. Nothing else changes. An undated item that retention removed and the
    rules before stored again left no trace (its tombstone went when it came back): the next prune
    removes it for good.
    """
    duplicates = db.execute(GUID_DUPLICATES).fetchall()
    if duplicates:
        at, key = next_change(db.execute(LATEST_CHANGE).fetchone()[0], utc_now())
        insert, delete = REMOVE_DUPLICATE
        rows = [{"id": id_, "at": at, "key": key} for id_, _, _ in duplicates]
        db.conn.executemany(insert, rows)
        db.conn.executemany(delete, rows)
        db.execute(
            """INSERT INTO data_versions (dataset, version, changed_at) VALUES (?, 1, ?)
               ON CONFLICT (dataset) DO UPDATE SET version = version + 1, changed_at = max(changed_at, excluded.changed_at)""",
            [NEWS, at],
        )
    # a count of none only at info: every new database applies this migration
    log.log(logging.WARNING if duplicates else logging.INFO, "m013: removed %d news items a changed guid had stored twice", len(duplicates))
    return len(duplicates)
