"""The database schema: the ordered list of its migrations, the one place it is defined.

Every change to the schema is a new migration appended here, in order; existing ones
are never edited, because databases in the field have already applied them. The DDL
they run is in :mod:`qsite.db.ddl` (the same rule holds for its text).
Every command that opens the database applies what is pending
(:func:`qsite.pipeline.store.open_database`).

Nothing that must not be exposed has a column here: no quiz questions,
answers or explanations, and no user data. Datasette shows every table to
researchers, so the only safe place for such data is nowhere.
"""

from sqlite_utils.migrations import Migrations

from qsite.db import news_sync
from qsite.db.ddl import (
    CATALOG,
    COUNTS_AND_WAYS_IN,
    COUNTS_BY_TAG_AND_SOURCE,
    NEWS,
    NEWS_REBUILT,
    NEWS_SEARCH,
    NEWS_SEARCH_BY_TAG,
    NEWS_SEARCH_MONTHS,
    NEWS_SEARCH_TAGS,
)
from qsite.db.news_derived import (
    COUNT_NEWS,
    INDEX_NEWS_SEARCH_BY_SOURCE,
    INDEX_NEWS_SEARCH_M006,
    INDEX_NEWS_SEARCH_M008,
    TOTAL_COUNTS,
    TOTAL_SCHEMA,
    search_by_source_schema,
)
from qsite.db.news_search_tags import INDEX_NEWS_SEARCH_TAGS, TAG_TABLES
from qsite.db.redact import redact_text
from qsite.db.search_tables import rebuild_search_table
from qsite.db.urls import public_location

migrations = Migrations("qsite")


@migrations()
def m001_catalog(db):
    """Courses, their sections, the glossary and the site totals."""
    db.executescript(CATALOG)
    db["glossary"].enable_fts(["term", "definition"], create_triggers=True, tokenize="porter")


@migrations()
def m002_news(db):
    """News sources and their items."""
    db.executescript(NEWS)
    db["news"].enable_fts(["title", "summary"], create_triggers=True, tokenize="porter")


@migrations()
def m003_news_entry_keys(db):
    """Items identified within their source by the entry they come from, so one URL can carry many items.

    Until now an item *was* its canonical URL (``url`` unique), so posts that
    are fragments of one page, or podcast episodes sharing one link, were
    merged into one. Now each item records its entry's identity within its
    source (``entry_key``: guid/id, else link plus enclosure, else link plus
    title; see ``pipeline/news/normalise.py``), unique per source, and ``url`` is
    only indexed. Rows already stored keep their id, url, dates and rowid
    (which ``news_fts`` is keyed on); their ``entry_key`` stays null until
    their feed is next read and an entry claims them (``pipeline/news/legacy.py``).

    SQLite cannot drop a column's UNIQUE constraint in place, so the table is
    rebuilt (the documented way: new table, copy, drop, rename) in this
    migration's transaction, then its indexes and full-text triggers made again.
    """
    # sqlite-utils' executescript runs inside the migration's transaction (no implicit COMMIT).
    db.executescript(NEWS_REBUILT)
    # The triggers went with the old table; the full-text index is made again with them.
    db["news"].enable_fts(["title", "summary"], create_triggers=True, tokenize="porter", replace=True)


@migrations()
def m004_redact_locations(db):
    """Rows stored before locations were redacted: credentials out, file sources by file name.

    Everything here is public through Datasette. ``sources.url`` and the
    site export's ``ingest_runs.source`` and ``export_state.source`` become
    :func:`qsite.db.urls.public_location` of what they were; stored errors are
    redacted with :func:`qsite.db.redact.redact_text`. Export states whose
    locations now read the same keep the newest (the next fetch simply checks
    again).
    """
    for name, url in db.execute("SELECT name, url FROM sources").fetchall():
        db.execute("UPDATE sources SET url = ? WHERE name = ?", [public_location(url), name])
    for name, error in db.execute("SELECT name, last_error FROM sources WHERE last_error IS NOT NULL").fetchall():
        db.execute("UPDATE sources SET last_error = ? WHERE name = ?", [redact_text(error), name])
    for run_id, kind, source, error in db.execute("SELECT id, kind, source, error FROM ingest_runs").fetchall():
        public = public_location(source) if kind == "site" else source  # a news run's source is a publisher's name
        db.execute(
            "UPDATE ingest_runs SET source = ?, error = ? WHERE id = ?",
            [public, error if error is None else redact_text(error), run_id],
        )
    states = db.execute(
        "SELECT source, etag, last_modified, content_hash, fetched_at FROM export_state ORDER BY fetched_at"
    ).fetchall()
    db.execute("DELETE FROM export_state")
    for source, *rest in states:
        db.execute(
            "INSERT OR REPLACE INTO export_state (source, etag, last_modified, content_hash, fetched_at) VALUES (?, ?, ?, ?, ?)",
            [public_location(source), *rest],
        )


@migrations()
def m005_news_counts_and_indexes(db):
    """Counts kept by triggers and an index for every way into ``news``, so no API query reads it whole.

    ``news_counts``: how many items each month and each day, tag and source has.

    Counting the items that match a tag and a time range is a range count over
    an index, as long as the range is long: a million items are a million index
    entries. With these counts the API's ``count`` adds up from here the months
    wholly in the range (at most months x tags x sources rows) and the days
    wholly in the range in the month it starts in (at most 31 x tags x sources),
    and range-counts ``news`` only in the day it starts in: one day's items at
    most, whatever the size of the table (see ``api_news_count`` in metadata.yml).
    The triggers keep the counts in the same transaction as every insert,
    delete and change of date, tag or source, whoever writes.

    The indexes are the ways ``api_news`` reads a page: newest first overall
    (``news_newest``, which now also holds tag and source, so the count of a
    day's range reads no rows), by tag (``news_tag_newest``, as it was), and
    each named source's newest, with or without a tag. ``news_source`` is
    replaced by the first of those (a foreign key lookup by source uses it too).
    """
    db.executescript(COUNTS_AND_WAYS_IN)
    db.execute(COUNT_NEWS)


@migrations()
def m006_news_search(db):
    """``news_search``: the news full-text index in newest-first order, for /api/v1/news?q=.

    ``news_fts`` (Datasette's search of the table) is keyed by the item's
    rowid, which says nothing of its date: a search for a word most items hold
    had to read every match to find the newest twenty. ``news_search`` is keyed by minute first, newest first
    (see :data:`qsite.db.news_derived.SEARCH_ROWID_BITS`), so a page reads matches from its cursor
    and stops: ``api_news`` in metadata.yml takes the page's matches, then the
    rest of the oldest minute among them, and sorts those exactly.
    Tag and source are terms of the index too (``facets``), so a filtered search
    and its count never read ``news``. Contentless (``content=''``: the text is
    in ``news``) with ``detail=column`` (searches are words, never phrases); the
    triggers delete with the old values, as a contentless index needs.
    """
    (bad,) = db.execute("SELECT count(*) FROM news WHERE strftime('%s', published_at) IS NULL").fetchone()
    if bad:
        example = db.execute("SELECT id, published_at FROM news WHERE strftime('%s', published_at) IS NULL LIMIT 1").fetchone()
        raise ValueError(f"news: {bad} items have a published_at that is not a time (item {example[0]!r}: {example[1]!r})")
    db.executescript(NEWS_SEARCH)
    db.execute(INDEX_NEWS_SEARCH_M006)


@migrations()
def m007_news_sync(db):
    """Images, authors, a change-time index and tombstones, for mirrors (:mod:`qsite.db.news_sync`)."""
    db.executescript(news_sync.SCHEMA)


@migrations()
def m008_news_search_by_tag(db):
    """``news_search`` again, with each item's words in the column of its tag instead of a tag term.

    A search with a tag was its words AND the tag's term, whose list holds a
    third of the news: when the two seldom meet, FTS5 read both lists to their
    end. Now a tag is a column filter on the words' own lists
    (:func:`qsite.db.news_derived.search_columns_by_tag`). Same key, same facets for
    sources; the index is rebuilt from ``news``.
    """
    db.executescript(NEWS_SEARCH_BY_TAG)
    db.execute(INDEX_NEWS_SEARCH_M008)
    db.execute("INSERT INTO news_search (news_search) VALUES ('optimize')")  # one segment: fewer pages a search reads


@migrations()
def m009_news_sync_by_filter(db):
    """Indexes for sync walks with a tag or sources (:data:`qsite.db.news_sync.FILTER_INDEXES`)."""
    db.executescript(news_sync.FILTER_INDEXES)


@migrations()
def m010_news_counts_by_tag_and_source(db):
    """Indexes of ``news_counts`` that lead with a tag, or a source, then the span and the period.

    A count by tag read every tag's and every source's counts of its months and
    days through the primary key and kept a third of them; a count by source
    read all of the source's months and days, the period not being in its
    index. ``api_news_count`` has a term per way in (:data:`qsite.db.news_count.COUNT_WAYS`),
    each reading its own range of one of these (what it gained: ``docs/performance.md``).
    """
    db.executescript(COUNTS_BY_TAG_AND_SOURCE)


@migrations()
def m011_news_totals(db):
    """``news_totals``: the counts of ``news_counts`` without the source, for a count with no source asked.

    ``news_counts`` has a row per period, tag and source, so a count with no
    filter added every tag's and source's row of its months and days.
    ``news_totals`` has one row per period for every tag (tag ``''``) and one
    per period and tag, keyed by tag, span and period, so no filter and a tag
    each read one range of it. Sources still read ``news_counts`` (``news_counts_source``).
    Kept by triggers, as ``news_counts`` is, in the same transaction as every
    change to ``news``; filled from ``news_counts``, which holds the same items
    in fewer rows than ``news`` (:data:`qsite.db.news_derived.TOTAL_COUNTS`).
    What it gained: ``docs/performance.md``.
    ``news_counts_tag`` (m010) served only the count by tag, and every item
    stored rewrote two of its entries: it goes.
    """
    db.executescript(TOTAL_SCHEMA + "DROP INDEX news_counts_tag;")
    db.execute(TOTAL_COUNTS)


@migrations()
def m012_news_removed_by_view(db):
    """Tombstones with their item's tag and source, and ``news_left``: mirrors of a tag or source (:data:`qsite.db.news_sync.VIEW_LOG`)."""
    db.executescript(news_sync.VIEW_LOG)


@migrations()
def m013_news_guid_duplicates(db):
    """One item per story where changed guids stored it twice (:func:`qsite.db.news_sync.remove_guid_duplicates`)."""
    news_sync.remove_guid_duplicates(db)


@migrations()
def m014_news_search_by_source(db):
    """``news_search_by_source``: ``news_search``'s words keyed by source first, so that a search's count
    with sources reads each source's range of its words' lists, not the whole lists
    (:func:`qsite.db.news_derived.search_by_source_columns`). Kept by triggers; filled from ``news``."""
    db.executescript(search_by_source_schema())
    db.execute(INDEX_NEWS_SEARCH_BY_SOURCE)
    db.execute("INSERT INTO news_search_by_source (news_search_by_source) VALUES ('optimize')")


@migrations()
def m015_news_search_tags(db):
    """A search table per tag, keyed by item (:mod:`qsite.db.news_search_tags`), so that a search with a
    tag and no source counts, and finds a few matches, in its tag's entries alone, where ``news_search``'s
    column filter walked every tag's. Kept by triggers; filled from ``news``."""
    db.executescript(NEWS_SEARCH_TAGS)
    for fill, table in zip(INDEX_NEWS_SEARCH_TAGS, TAG_TABLES):
        db.execute(fill)
        db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")


@migrations()
def m016_count_index_pages(db):
    """The tables searches count in, ``news_search_by_source`` and each tag's, rebuilt from ``news`` in
    FTS5 pages of 1,000 bytes, not 4,050, and kept so: a count of a rare word and a common one steps
    the common word's entries one by one inside a page, so smaller pages are fewer steps for each match
    (:mod:`qsite.db.search_tables`). What each table finds is unchanged; ``news_search`` keeps its pages."""
    for table in ("news_search_by_source", *TAG_TABLES):
        rebuild_search_table(db, table)


@migrations()
def m017_news_search_months(db):
    """``news_search`` rebuilt with each item's month among its facets (``m202611``), and kept so.

    FTS5 walks an AND of words from their lists' first entries to each match and, when no match
    is left in a search's range, on past its end to the lists' ends: two words that never meet
    after a recent ``since`` read the whole index (8 ms at a million items). A page's search of
    words ANDed with a ``since`` in the newest months ANDs the terms of the months it covers, whose
    lists end where the range does (:data:`qsite.db.news_queries.IN_MONTHS`). What a search finds
    is unchanged.
    """
    db.executescript(NEWS_SEARCH_MONTHS)
    rebuild_search_table(db, "news_search")
