"""The news search tables as one set: how each is filled from ``news``, the size of its index pages, and its rebuild.

Promises: each search table (:data:`SEARCH_TABLES`) is written in FTS5 leaf pages of about its
own size, whoever writes it (the setting is the table's own, in its ``_config`` table, so the
triggers' segments and FTS5's merges of them use it too), and :func:`rebuild_search_table`
leaves a table holding exactly what its fill reads from ``news``, in one segment.

Why the tables that count are written in pages of 1,000 bytes, not FTS5's 4,050: a count of a
rare word and a common one is FTS5's AND stepping the common word's list to each entry of the
rare one. Its doclist index skips whole pages, but inside a page FTS5 steps entry by entry, so
each match cost about half a page of steps: smaller pages are fewer steps for one more page
read. ``news_search_by_source`` and the tags' tables hold the counts without a range (and a
filter's few matches), and there 1,000 bytes halved such a count at a million items.
``news_search`` keeps FTS5's pages: it serves every search's page newest first, and the counts
of a range, walks of words that often meet (seeks of a few entries each), which smaller pages
made slower: the bench's filtered searches of two words of one item, p99 9.1 against 7.4 ms
(docs/performance.md, "Index pages of 1,000 bytes").
"""

from __future__ import annotations

from qsite.db.news_derived import INDEX_NEWS_SEARCH, INDEX_NEWS_SEARCH_BY_SOURCE
from qsite.db.news_search_tags import INDEX_NEWS_SEARCH_TAGS, TAG_TABLES

#: FTS5's own leaf page size, in bytes (its ``pgsz`` unless told otherwise), which ``news_search`` keeps.
FTS5_PAGE_BYTES = 4050
#: The leaf page size of the tables searches count in, in bytes.
COUNT_PAGE_BYTES = 1000

#: Each search table: the statement that fills it from ``news``, and the bytes of its FTS5 leaf pages.
SEARCH_TABLES = {
    "news_search": (INDEX_NEWS_SEARCH, FTS5_PAGE_BYTES),
    "news_search_by_source": (INDEX_NEWS_SEARCH_BY_SOURCE, COUNT_PAGE_BYTES),
    **{table: (fill, COUNT_PAGE_BYTES) for table, fill in zip(TAG_TABLES, INDEX_NEWS_SEARCH_TAGS)},
}


def rebuild_search_table(db, table: str) -> None:
    """Empty the search table ``table`` (one of :data:`SEARCH_TABLES`), fill it from ``news`` and merge it into one segment.

    In its pages' size, set first. Emptied and filled, not merged alone: FTS5's ``optimize``
    leaves an index of one segment as it is, so a page size set on a built table would reach
    only the segments written after it. One segment: a search reads each of its words' lists
    once, not once per segment. ``db`` is a connection or a ``sqlite_utils.Database``;
    ``table`` is interpolated, so only this module's names are taken.
    """
    fill, page_bytes = SEARCH_TABLES[table]
    db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('pgsz', ?)", [page_bytes])
    db.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
    db.execute(fill)
    db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
