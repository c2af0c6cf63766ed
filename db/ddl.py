"""The DDL the migrations of :mod:`qsite.db.migrations` run, as they have always written it.

Promises: each constant is the exact text one migration executes; SQLite stores the text of
each ``CREATE`` as written, so the schema of a database made today is the schema those
migrations always wrote. Must not change: the text of any constant here (databases in the
field applied it); a change to the schema is a new migration with new DDL.

Why apart from the migration list: so that :mod:`qsite.db.migrations` reads as the ordered list of
changes, each with its reason, and the SQL of the base tables is found in one place.
"""

from qsite.db.news_derived import (
    COUNT_SCHEMA,
    COUNT_UPDATE_TRIGGER,
    SEARCH_COLUMNS,
    search_columns,
    search_columns_by_tag,
    search_triggers,
)
from qsite.db.news_search_tags import tag_tables_schema

TAG_CHECK = "tag IN ('Science', 'Industry', 'Investing')"

# The news table's columns after ``url`` and its indexes, as m002 made them and
# m003 made them again when it rebuilt the table (the same SQL text, so the
# schema SQLite stores is what those migrations always wrote).
NEWS_COLUMNS = f"""\
            title TEXT NOT NULL,
            summary TEXT NOT NULL,
            source TEXT NOT NULL REFERENCES sources(name),
            tag TEXT NOT NULL CHECK ({TAG_CHECK}),
            published_at TEXT NOT NULL,
            first_seen_at TEXT NOT NULL,
            updated_at TEXT NOT NULL"""
NEWS_INDEXES = """\
        CREATE INDEX news_newest ON news(published_at DESC, id DESC);
        CREATE INDEX news_tag_newest ON news(tag, published_at DESC, id DESC);
        CREATE INDEX news_source ON news(source);"""

#: m001: courses, their sections, the glossary, the site totals, the export's validators, ``data_versions`` and ``ingest_runs``.
CATALOG = """
        CREATE TABLE courses (
            id TEXT PRIMARY KEY,
            position INTEGER NOT NULL,
            title TEXT NOT NULL,
            summary TEXT NOT NULL,
            level TEXT,
            url TEXT NOT NULL,
            section_count INTEGER NOT NULL,
            slide_count INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX courses_position ON courses(position);

        CREATE TABLE sections (
            course_id TEXT NOT NULL REFERENCES courses(id) ON DELETE CASCADE,
            id TEXT NOT NULL,
            position INTEGER NOT NULL,
            title TEXT NOT NULL,
            url TEXT,
            slide_count INTEGER NOT NULL CHECK (slide_count >= 0),
            PRIMARY KEY (course_id, id)
        );
        CREATE UNIQUE INDEX sections_course_position ON sections(course_id, position);

        CREATE TABLE glossary (
            id TEXT PRIMARY KEY,
            term TEXT NOT NULL,
            definition TEXT NOT NULL,
            lesson_title TEXT NOT NULL,
            lesson_url TEXT NOT NULL,
            course_id TEXT,
            section_id TEXT,
            FOREIGN KEY (course_id, section_id) REFERENCES sections(course_id, id) ON DELETE SET NULL
        );
        CREATE INDEX glossary_term ON glossary(term COLLATE NOCASE);
        CREATE INDEX glossary_section ON glossary(course_id, section_id);

        CREATE TABLE site_totals (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            site_name TEXT,
            site_base_url TEXT,
            exported_at TEXT,
            courses INTEGER NOT NULL,
            slides INTEGER NOT NULL,
            quizzes INTEGER NOT NULL,
            question_bank_size INTEGER NOT NULL,
            glossary_terms INTEGER NOT NULL
        );

        -- Validators of the last export fetched, so an unchanged export writes nothing.
        CREATE TABLE export_state (
            source TEXT PRIMARY KEY,
            etag TEXT,
            last_modified TEXT,
            content_hash TEXT,
            fetched_at TEXT
        );

        -- When each dataset behind the API last changed: bumped in the same
        -- transaction as the change, read by the service for updated_at and ETags.
        CREATE TABLE data_versions (
            dataset TEXT PRIMARY KEY CHECK (dataset IN ('catalog', 'glossary', 'news', 'totals')),
            version INTEGER NOT NULL DEFAULT 0,
            changed_at TEXT NOT NULL
        );

        CREATE TABLE ingest_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('site', 'news')),
            source TEXT NOT NULL,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'unchanged', 'warning', 'failed')),
            counts TEXT NOT NULL DEFAULT '{}',
            error TEXT
        );
        CREATE INDEX ingest_runs_kind_source ON ingest_runs(kind, source, id);
        """

#: m002: news sources and their items.
NEWS = f"""
        CREATE TABLE sources (
            name TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            tag TEXT NOT NULL CHECK ({TAG_CHECK}),
            etag TEXT,
            last_modified TEXT,
            content_hash TEXT,
            last_fetch_at TEXT,
            last_status TEXT,
            last_error TEXT,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            next_fetch_at TEXT,
            disabled INTEGER NOT NULL DEFAULT 0
        );

        CREATE TABLE news (
            id TEXT PRIMARY KEY,
            url TEXT NOT NULL UNIQUE,
{NEWS_COLUMNS}
        );
{NEWS_INDEXES}
        """

#: m003: ``news`` rebuilt without ``url``'s UNIQUE, with ``entry_key`` unique per source (new table, copy, drop, rename).
NEWS_REBUILT = f"""
        CREATE TABLE news_rebuilt (
            id TEXT PRIMARY KEY,
            url TEXT NOT NULL,
{NEWS_COLUMNS},
            entry_key TEXT
        );
        INSERT INTO news_rebuilt (rowid, id, url, title, summary, source, tag, published_at, first_seen_at, updated_at)
            SELECT rowid, id, url, title, summary, source, tag, published_at, first_seen_at, updated_at FROM news;
        DROP TABLE news;
        ALTER TABLE news_rebuilt RENAME TO news;
{NEWS_INDEXES}
        CREATE INDEX news_url ON news(url);
        CREATE UNIQUE INDEX news_source_entry_key ON news(source, entry_key);
        """

#: m005: ``news_counts`` and an index for every way into ``news``.
COUNTS_AND_WAYS_IN = f"""
        {COUNT_SCHEMA}
        CREATE INDEX news_counts_source ON news_counts(source, span, items);

        DROP INDEX news_newest;
        CREATE INDEX news_newest ON news(published_at DESC, id DESC, tag, source);
        DROP INDEX news_source;
        CREATE INDEX news_source_newest ON news(source, published_at DESC, id DESC);
        CREATE INDEX news_source_tag_newest ON news(source, tag, published_at DESC, id DESC);

        -- The pipeline changes an item's tag when a rule or the feed's tag changes.
        {COUNT_UPDATE_TRIGGER}
        """

#: m006: ``news_search``, contentless, keyed newest first, with its triggers.
NEWS_SEARCH = f"""
        CREATE VIRTUAL TABLE news_search USING fts5(
            words, facets, content='', detail=column, tokenize='porter'
        );

        {search_triggers("words, facets", search_columns)}
        """

#: m008: ``news_search`` made again with each item's words in the column of its tag.
NEWS_SEARCH_BY_TAG = f"""
        DROP TRIGGER news_search_insert;
        DROP TRIGGER news_search_delete;
        DROP TRIGGER news_search_update;
        DROP TABLE news_search;

        CREATE VIRTUAL TABLE news_search USING fts5(
            {SEARCH_COLUMNS}, content='', detail=column, tokenize='porter'
        );

        {search_triggers(SEARCH_COLUMNS, search_columns_by_tag)}
        """

#: m017: ``news_search``'s triggers again, each item's month among its facets (rebuilt by the migration).
NEWS_SEARCH_MONTHS = f"""
        DROP TRIGGER news_search_insert;
        DROP TRIGGER news_search_delete;
        DROP TRIGGER news_search_update;

        {search_triggers(SEARCH_COLUMNS, lambda row: search_columns_by_tag(row, month=True))}
        """

#: m010: ``news_counts``'s indexes that lead with a tag, or a source, then span and period.
COUNTS_BY_TAG_AND_SOURCE = """
        CREATE INDEX news_counts_tag ON news_counts(tag, span, period, items);
        DROP INDEX news_counts_source;
        CREATE INDEX news_counts_source ON news_counts(source, span, period, items);
        """

#: m015: a search table per tag (``news_search_science``, ...), keyed by item, with their triggers.
NEWS_SEARCH_TAGS = tag_tables_schema()
