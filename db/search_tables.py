"""The news search tables as one set: how each is filled from ``news``, the size of its index pages, and its rebuild.

Promises: each search table (:data:`SEARCH_TABLES`) is written in FTS5 leaf pages of about
:data:`SEARCH_PAGE_BYTES`, whoever writes it (the setting is the table's own, in its
``_config`` table, so the triggers' segments and FTS5's merges of them use it too), and
:func:`rebuild_search_table` leaves a table holding exactly what its fill reads from ``news``,
in one segment.

Why pages smaller than FTS5's 4,050 bytes: a search of a rare word and a common one is FTS5's
AND stepping the common word's list to each entry of the rare one. Its doclist index skips whole
pages, but inside a page FTS5 steps entry by entry, so each match cost about half a page of
steps: smaller pages are fewer steps for one more page read. 1,000 bytes halved such a count at a
million items and took a fifth off the p99 of the users' searches of two words, for an index 1%
larger; 500 bytes cut the counts further, but searches alone ran no faster than at 4,050
(docs/performance.md, "Index pages of 1,000 bytes").
"""

from __future__ import annotations

from qsite.db.news_derived import INDEX_NEWS_SEARCH, INDEX_NEWS_SEARCH_BY_SOURCE
from qsite.db.news_search_tags import INDEX_NEWS_SEARCH_TAGS, TAG_TABLES

#: The bytes of a search table's FTS5 leaf pages (its ``pgsz``; FTS5 writes 4,050 unless told).
SEARCH_PAGE_BYTES = 1000

#: Each search table and the statement that fills it from ``news``.
SEARCH_TABLES = {
    "news_search": INDEX_NEWS_SEARCH,
    "news_search_by_source": INDEX_NEWS_SEARCH_BY_SOURCE,
    **dict(zip(TAG_TABLES, INDEX_NEWS_SEARCH_TAGS)),
}


def rebuild_search_table(db, table: str) -> None:
    """Empty the search table ``table`` (one of :data:`SEARCH_TABLES`), fill it from ``news`` and merge it into one segment.

    In pages of :data:`SEARCH_PAGE_BYTES`, set first. Emptied and filled, not merged alone:
    FTS5's ``optimize`` leaves an index of one segment as it is, so a page size set on a built
    table would reach only the segments written after it. One segment: a search reads each of
    its words' lists once, not once per segment. ``db`` is a connection or a
    ``sqlite_utils.Database``; ``table`` is interpolated, so only this module's names are taken.
    """
    fill = SEARCH_TABLES[table]
    db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('pgsz', ?)", [SEARCH_PAGE_BYTES])
    db.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
    db.execute(fill)
    db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
