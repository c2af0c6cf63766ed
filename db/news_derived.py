"""The SQL that derives ``news_counts``, ``news_totals``, ``news_search`` and ``news_search_by_source`` from ``news``.

The four tables are kept in step with ``news`` by triggers that the migrations
create (:mod:`qsite.db.migrations`, m005, m006, m008, m011 and m012), and are filled in one
statement when they are created and after the pipeline's bulk inserts
(:mod:`qsite.pipeline.store.news`). The SQL lives here, apart from the migrations,
because both use it (and the news queries, :mod:`qsite.db.news_queries`, read the
search index's rowid layout described here).
"""

from __future__ import annotations

from qsite.db.model import TAGS

#: Fills ``news_counts`` from ``news`` (when the table is created, and after a bulk insert).
COUNT_NEWS = """
    INSERT INTO news_counts (span, period, tag, source, items)
    SELECT 'month', substr(published_at, 1, 7), tag, source, count(*) FROM news GROUP BY 2, 3, 4
    UNION ALL
    SELECT 'day', substr(published_at, 1, 10), tag, source, count(*) FROM news GROUP BY 2, 3, 4
"""


def _changes(table: str, key: dict[str, str], sign: str) -> list[str]:
    """The statements that count one item in or out (``sign``) of the row of ``table`` at ``key``.

    ``key`` is each key column's SQL value. In: an upsert. Out: one less, and
    the row deleted at zero, so a table never holds a period with no items.
    """
    if sign == "+":
        return [
            f"INSERT INTO {table} ({', '.join(key)}, items) VALUES ({', '.join(key.values())}, 1) "
            f"ON CONFLICT DO UPDATE SET items = items + 1;"
        ]
    where = " AND ".join(f"{column} = {value}" for column, value in key.items())
    return [f"UPDATE {table} SET items = items - 1 WHERE {where};", f"DELETE FROM {table} WHERE {where} AND items = 0;"]


def _spans(row: str):
    """Each span of ``news_counts`` and ``news_totals``, its name and the period of ``row`` in it (SQL)."""
    return [(f"'{span}'", f"substr({row}.published_at, 1, {length})") for span, length in (("month", 7), ("day", 10))]


def count_changes(sign: str, row: str) -> str:
    """The statements of a trigger that count ``row`` (``new`` or ``old``) in or out (``+`` or ``-``) of ``news_counts``."""
    statements = []
    for span, period in _spans(row):
        key = {"span": span, "period": period, "tag": f"{row}.tag", "source": f"{row}.source"}
        statements += _changes("news_counts", key, sign)
    return "\n            ".join(statements)


def insert_delete_triggers(table: str, changes) -> str:
    """The triggers that keep ``table`` as ``news`` gains and loses rows; ``changes(sign, row)`` writes their statements."""
    return f"""
        CREATE TRIGGER {table}_insert AFTER INSERT ON news BEGIN
            {changes("+", "new")}
        END;

        CREATE TRIGGER {table}_delete AFTER DELETE ON news BEGIN
            {changes("-", "old")}
        END;
"""


def update_trigger(table: str, columns: tuple[str, ...], changes) -> str:
    """The trigger that moves a row of ``news`` in ``table`` when one of ``columns`` changes: ``changes(sign, row)``
    takes the old row out and puts the new one in, as :func:`insert_delete_triggers` does."""
    return f"""\
        CREATE TRIGGER {table}_update AFTER UPDATE OF {", ".join(columns)} ON news
        WHEN {" OR ".join(f"old.{column} IS NOT new.{column}" for column in columns)}
        BEGIN
            {changes("-", "old")}
            {changes("+", "new")}
        END;
"""


#: m005's table of counts and its triggers, kept by :func:`count_changes`.
COUNT_SCHEMA = f"""
        CREATE TABLE news_counts (
            span TEXT NOT NULL CHECK (span IN ('month', 'day')),
            period TEXT NOT NULL,      -- the start of published_at: YYYY-MM for a month, YYYY-MM-DD for a day
            tag TEXT NOT NULL,
            source TEXT NOT NULL,
            items INTEGER NOT NULL CHECK (items >= 0),  -- a row at 0 is deleted at once
            PRIMARY KEY (span, period, tag, source)
        ) WITHOUT ROWID;
{insert_delete_triggers("news_counts", count_changes)}"""

#: m005's trigger of a change of date, tag or source.
COUNT_UPDATE_TRIGGER = "\n" + update_trigger("news_counts", ("published_at", "tag", "source"), count_changes)


def total_changes(sign: str, row: str) -> str:
    """The statements of a trigger that count ``row`` in or out of ``news_totals``: its tag's row and every tag's ('')."""
    statements = []
    for span, period in _spans(row):
        for tag in (f"{row}.tag", "''"):
            statements += _changes("news_totals", {"tag": tag, "span": span, "period": period}, sign)
    return "\n            ".join(statements)


#: m011's roll-up of ``news_counts`` without the source, and its triggers (:func:`total_changes`).
#: The key leads with the tag, then the span: a count's months or days after a time are one range of it.
TOTAL_SCHEMA = f"""
        CREATE TABLE news_totals (
            tag TEXT NOT NULL,         -- '' for every tag
            span TEXT NOT NULL CHECK (span IN ('month', 'day')),
            period TEXT NOT NULL,      -- YYYY-MM for a month, YYYY-MM-DD for a day, as in news_counts
            items INTEGER NOT NULL CHECK (items >= 0),  -- a row at 0 is deleted at once
            PRIMARY KEY (tag, span, period)
        ) WITHOUT ROWID;
{insert_delete_triggers("news_totals", total_changes)}
        -- a source's items are counted in every tag's and their own tag's rows: only a date or a tag moves them
{update_trigger("news_totals", ("published_at", "tag"), total_changes)}"""

#: Fills ``news_totals`` from ``news_counts`` (when m011 creates it, and after a bulk insert has
#: counted ``news_counts`` again): a few tens of thousands of rows, where ``news`` holds millions.
TOTAL_COUNTS = """
    INSERT INTO news_totals (tag, span, period, items)
    SELECT tag, span, period, sum(items) FROM news_counts GROUP BY 1, 2, 3
    UNION ALL
    SELECT '', span, period, sum(items) FROM news_counts GROUP BY 2, 3
"""


#: A ``news_search`` rowid is the item's minute, negated (bits 36 and up), and
#: its ``news`` rowid (the low 36 bits): ascending rowids are newest first by
#: minute, in any order within one, and ``& SEARCH_ROWID_MASK`` is the item's
#: rowid. Negated because FTS5 reads a term's matches fastest in ascending
#: rowid order (it seeks through a long one by its doclist index; going down,
#: it loads it; docs/performance.md, "Measurements behind the code"). 36 bits hold 68 billion rowids; the minute is clamped to 26 bits
#: and a sign (years 1842 to 2097), which keeps the order.
SEARCH_ROWID_BITS = 36
SEARCH_ROWID_MASK = (1 << SEARCH_ROWID_BITS) - 1
MINUTE_MAX = (1 << 26) - 1
#: Past every ``news_search`` rowid (its negation before every one): the open end of a range.
SEARCH_OPEN_END = 1 << 62


def search_key(row: str) -> str:
    """SQL: the ``news_search`` rowid of ``row`` (``new``, ``old`` or ``news``)."""
    minute = f"CAST(strftime('%s', {row}.published_at) AS INTEGER) / 60"
    return f"((-max({-MINUTE_MAX}, min({MINUTE_MAX}, {minute})) << {SEARCH_ROWID_BITS}) | {row}.rowid)"


def search_columns(row: str) -> str:
    """SQL: the ``news_search`` rowid, words and facets of ``row``.

    Facets are terms no text makes, so a filter is one more term of the same
    MATCH: the tag (``tagscience``), the source by its rowid in ``sources``
    (``s3``; sources are only ever added) and both at once (``t3science``):
    one term for a source and a tag, whose matches are few, rather than two
    whose matches are many.
    """
    source = f"(SELECT rowid FROM sources WHERE name = {row}.source)"
    facets = f"'tag' || lower({row}.tag) || coalesce(' s' || {source} || ' t' || {source} || lower({row}.tag), '')"
    return f"{search_key(row)}, {row}.title || ' ' || {row}.summary, {facets}"


#: Fills m006's ``news_search`` (``words``, ``facets``) from ``news``, when m006 creates it.
INDEX_NEWS_SEARCH_M006 = f"INSERT INTO news_search (rowid, words, facets) SELECT {search_columns('news')} FROM news"

#: SQL: the facet term of the month of the time ``{time}`` (``m202611``): each item's in ``news_search``
#: since m017, written by the triggers and the rebuild, and the months a page's search ANDs.
#: FTS5 walks an AND of words from their lists' first entries to each match, past a range's end when
#: no match is left in it (it bounds an AND by its matches, not by a rowid range): with a recent
#: ``since``, words that never meet walked the whole index. The terms of the months a range covers
#: end that walk with the range (:data:`qsite.db.news_queries.IN_MONTHS`, docs/performance.md).
MONTH_TERM = "strftime('m%Y%m', {time})"

#: The words columns of ``news_search`` since m008, one per tag (``science``, ...), then ``facets``.
SEARCH_TAG_COLUMNS = tuple(tag.lower() for tag in TAGS)
SEARCH_COLUMNS = ", ".join((*SEARCH_TAG_COLUMNS, "facets"))


def search_columns_by_tag(row: str, month: bool = False) -> str:
    """SQL: the ``news_search`` rowid, words by tag and facets of ``row`` (m008; with ``month``, m017).

    An item's words are in the column of its tag, and empty in the others, so a
    search with a tag reads only its words' lists and keeps the entries of that
    column (``{science}: ...``). As a term of its own, the tag had a list as
    long as a third of the news: a word and a tag that seldom meet read both to
    their end (``tag=Science&q=raises``; docs/performance.md, "Measurements behind the code").
    ``facets`` keeps the sources, alone (``s3``) and with the tag (``t3science``), and since m017
    the item's month (:data:`MONTH_TERM`).
    """
    text = f"{row}.title || ' ' || {row}.summary"
    by_tag = ", ".join(f"iif({row}.tag = '{tag}', {text}, '')" for tag in TAGS)
    source = f"(SELECT rowid FROM sources WHERE name = {row}.source)"
    facets = f"coalesce('s' || {source} || ' t' || {source} || lower({row}.tag), '')"
    if month:
        facets += " || ' ' || " + MONTH_TERM.format(time=f"{row}.published_at")
    return f"{search_key(row)}, {by_tag}, {facets}"


#: Fills ``news_search`` as m008 made it, when m008 creates it.
INDEX_NEWS_SEARCH_M008 = f"INSERT INTO news_search (rowid, {SEARCH_COLUMNS}) SELECT {search_columns_by_tag('news')} FROM news"
#: Fills ``news_search`` from ``news`` (when m017 makes it again, and after a bulk insert).
INDEX_NEWS_SEARCH = f"INSERT INTO news_search (rowid, {SEARCH_COLUMNS}) SELECT {search_columns_by_tag('news', month=True)} FROM news"

#: A stored time ``strftime`` can read is what the search key is made of.
CHECK_TIME = (
    "SELECT RAISE(ABORT, 'news.published_at must be a time such as 2026-11-20T08:00:00Z')"
    " WHERE strftime('%s', new.published_at) IS NULL;"
)


def search_triggers(columns: str, values) -> str:
    """SQL: the triggers that keep ``news_search`` (its ``columns``) in step with ``news``.

    ``values(row)`` is the SQL of the rowid and ``columns`` of ``row`` (``new`` or ``old``):
    :func:`search_columns` for m006's index, :func:`search_columns_by_tag` since m008. The
    index is contentless, so an update or delete removes the entry with the old values.
    """
    return f"""
        CREATE TRIGGER news_search_insert AFTER INSERT ON news BEGIN
            {CHECK_TIME}
            INSERT INTO news_search (rowid, {columns}) VALUES ({values("new")});
        END;

        CREATE TRIGGER news_search_delete AFTER DELETE ON news BEGIN
            INSERT INTO news_search (news_search, rowid, {columns}) VALUES ('delete', {values("old")});
        END;

        CREATE TRIGGER news_search_update AFTER UPDATE OF published_at, title, summary, tag, source ON news
        WHEN old.published_at IS NOT new.published_at OR old.title IS NOT new.title
          OR old.summary IS NOT new.summary OR old.tag IS NOT new.tag OR old.source IS NOT new.source
        BEGIN
            {CHECK_TIME}
            INSERT INTO news_search (news_search, rowid, {columns}) VALUES ('delete', {values("old")});
            INSERT INTO news_search (rowid, {columns}) VALUES ({values("new")});
        END;
        """


#: A ``news_search_by_source`` rowid: the item's source (its rowid in ``sources``, 0 for a name
#: no publisher has) above its ``news`` rowid (the low :data:`SOURCE_ROWID_BITS` bits), so one
#: source's entries are one range of every list and a count by source walks only that range.
SOURCE_ROWID_BITS = 44


def search_by_source_columns(row: str) -> str:
    """SQL: the ``news_search_by_source`` rowid and words by tag of ``row`` (``new``, ``old`` or ``news``).

    The same words by tag as :func:`search_columns_by_tag`, keyed by source first: a search's
    count with sources (and neither ``since`` nor ``until``) reads each source's range of its
    words' lists, a source's share of them, where ``news_search`` walks the whole lists to meet
    the source's term (docs/performance.md, "Measurements behind the code").
    """
    text = f"{row}.title || ' ' || {row}.summary"
    by_tag = ", ".join(f"iif({row}.tag = '{tag}', {text}, '')" for tag in TAGS)
    source = f"coalesce((SELECT rowid FROM sources WHERE name = {row}.source), 0)"
    return f"({source} << {SOURCE_ROWID_BITS}) | {row}.rowid, {by_tag}"


#: Fills ``news_search_by_source`` from ``news`` (when its migration creates it, and after a bulk insert).
INDEX_NEWS_SEARCH_BY_SOURCE = (
    f"INSERT INTO news_search_by_source (rowid, {', '.join(SEARCH_TAG_COLUMNS)}) "
    f"SELECT {search_by_source_columns('news')} FROM news"
)


def search_by_source_schema() -> str:
    """SQL: ``news_search_by_source`` and the triggers that keep it in step with ``news``."""
    columns = ", ".join(SEARCH_TAG_COLUMNS)
    values = search_by_source_columns
    return f"""
        CREATE VIRTUAL TABLE news_search_by_source USING fts5(
            {columns}, content='', detail=column, tokenize='porter'
        );

        CREATE TRIGGER news_search_by_source_insert AFTER INSERT ON news BEGIN
            INSERT INTO news_search_by_source (rowid, {columns}) VALUES ({values("new")});
        END;

        CREATE TRIGGER news_search_by_source_delete AFTER DELETE ON news BEGIN
            INSERT INTO news_search_by_source (news_search_by_source, rowid, {columns}) VALUES ('delete', {values("old")});
        END;

        CREATE TRIGGER news_search_by_source_update AFTER UPDATE OF title, summary, tag, source ON news
        WHEN old.title IS NOT new.title OR old.summary IS NOT new.summary OR old.tag IS NOT new.tag
          OR old.source IS NOT new.source
        BEGIN
            INSERT INTO news_search_by_source (news_search_by_source, rowid, {columns}) VALUES ('delete', {values("old")});
            INSERT INTO news_search_by_source (rowid, {columns}) VALUES ({values("new")});
        END;
        """
