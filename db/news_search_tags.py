"""``news_search_science``, ``news_search_industry``, ``news_search_investing``: each tag's news words, keyed by item.

Promises: the table of a tag (:func:`tag_table`) holds the words (title and summary) of every item
of that tag and of no other, keyed by the item's ``news`` rowid; kept by triggers in the same
transaction as every change to ``news``, whoever writes (an item that changes tag leaves one table
for the other); filled from ``news`` when the migration creates them and after a bulk insert.

Why: a search with a tag and no source read ``news_search``'s column filter, which walks its words'
whole lists, every tag's entries, to keep the tag's: words that seldom meet in a tag, or a word the
tag never has, cost the lists' length whatever the tag. Here a tag's lists hold only its entries,
and the keys of items in a row are a byte or two apart (``news_search``'s, minute first, are six),
so a tag's count, and its page when it matches a few times, read a third of the entries in shorter
lists (docs/performance.md, "The searches users send"). Not in time order: a page of many matches
is still the newest of ``news_search``.
"""

from __future__ import annotations

from qsite.db.model import TAGS
from qsite.db.news_derived import insert_delete_triggers, update_trigger


def tag_table(tag: str) -> str:
    """The name of the search table of ``tag`` (one of :data:`TAGS`)."""
    return f"news_search_{tag.lower()}"


#: Every tag's table, in the order of :data:`TAGS`.
TAG_TABLES = tuple(tag_table(tag) for tag in TAGS)


def _words(row: str) -> str:
    return f"{row}.title || ' ' || {row}.summary"


def _changes(sign: str, row: str) -> str:
    """The statements that put ``row`` into (``+``) or take it out of (``-``) its tag's table."""
    statements = []
    for tag in TAGS:
        table = tag_table(tag)
        if sign == "+":
            statements.append(f"INSERT INTO {table} (rowid, words) SELECT {row}.rowid, {_words(row)} WHERE {row}.tag = '{tag}';")
        else:
            statements.append(
                f"INSERT INTO {table} ({table}, rowid, words) SELECT 'delete', {row}.rowid, {_words(row)} WHERE {row}.tag = '{tag}';"
            )
    return "\n            ".join(statements)


def tag_tables_schema() -> str:
    """SQL: the tags' search tables and the triggers that keep them in step with ``news``."""
    tables = "\n".join(
        f"""        CREATE VIRTUAL TABLE {table} USING fts5(
            words, content='', detail=none, tokenize='porter'
        );"""
        for table in TAG_TABLES
    )
    return f"""
{tables}

{insert_delete_triggers("news_search_tags", _changes)}
{update_trigger("news_search_tags", ("title", "summary", "tag"), _changes)}        """


#: Fills the tags' tables from ``news`` (when their migration creates them, and after a bulk insert).
INDEX_NEWS_SEARCH_TAGS = tuple(
    f"INSERT INTO {tag_table(tag)} (rowid, words) SELECT rowid, {_words('news')} FROM news WHERE tag = '{tag}'" for tag in TAGS
)
