"""What keeps a mirror of the news in step: each item's image, authors and change time, and what was removed.

Migration 7 (:func:`db.migrations.m007_news_sync`) adds, to ``news``:

- ``image_url``: the entry's own image, canonical, or null;
- ``authors``: a JSON array of its authors' names (``[]`` when none);
- the index ``news_updated`` on ``(updated_at, id)``: the order a sync walk
  reads (``/api/v1/news?updated_since=``, ``api_news_changes`` in
  ``metadata.yml``), so a walk reads only the items changed since its time,
  whatever the size of the table;

and the table ``news_removed``: one row (a tombstone) per item qsite deleted
(retention, or anything else that deletes), with when, so a mirror learns to
drop it (``/api/v1/news/removed``). Tombstones are small (an id and a time) and
kept for good: a mirror that has not synced for any length of time still
learns of every item removed since. An item stored again under a removed id
loses its tombstone (trigger ``news_removed_back``), so the two lists never
disagree about it.

``updated_at`` (there since migration 2) is when qsite last changed any
field of the item it serves; :data:`CHANGE_TIME` is the time a change is
stamped with, for items and tombstones alike. Existing rows keep their
``updated_at``; the next read of their feed under the new rules gives them
their images and authors, and so a new ``updated_at``.
"""

from __future__ import annotations

#: SQL: the time to stamp a change written now with. The clock, but never
#: earlier than any change already stored: one writer commits at a time, so
#: stamps then grow in commit order even when the clock steps back, and a
#: mirror that asks for changes at or after the newest stamp it saw (its
#: watermark) never misses one committed later. Both maxima are read from an index.
CHANGE_TIME = (
    "max(strftime('%Y-%m-%dT%H:%M:%SZ', 'now'),"
    " coalesce((SELECT max(updated_at) FROM news), ''),"
    " coalesce((SELECT max(removed_at) FROM news_removed), ''))"
)

SCHEMA = f"""
    ALTER TABLE news ADD COLUMN image_url TEXT;
    ALTER TABLE news ADD COLUMN authors TEXT NOT NULL DEFAULT '[]';  -- a JSON array of names
    CREATE INDEX news_updated ON news(updated_at, id);

    CREATE TABLE news_removed (
        id TEXT PRIMARY KEY,
        removed_at TEXT NOT NULL
    );
    CREATE INDEX news_removed_at ON news_removed(removed_at, id);

    CREATE TRIGGER news_removed_record AFTER DELETE ON news BEGIN
        INSERT INTO news_removed (id, removed_at) VALUES (old.id, {CHANGE_TIME})
        ON CONFLICT (id) DO UPDATE SET removed_at = excluded.removed_at;
    END;

    CREATE TRIGGER news_removed_back AFTER INSERT ON news BEGIN
        DELETE FROM news_removed WHERE id = new.id;
    END;
"""
