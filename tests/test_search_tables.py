"""The search tables' index pages (:mod:`qsite.db.search_tables`): each table's own size whoever writes it, finding the same.

A database as m015 left it (pages of FTS5's 4,050 bytes, filled row by row by the triggers) is
opened, which applies m016; each search table must then find exactly what it found before, pass
FTS5's integrity check, and hold no page larger than its size in :data:`SEARCH_TABLES` (and a
rowid's few bytes): 1,000 bytes for the tables searches count in. Rows written later, by the
triggers or by the bulk insert, keep those sizes.
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from qsite.db.model import TAGS
from qsite.db.search_tables import COUNT_PAGE_BYTES, FTS5_PAGE_BYTES, SEARCH_TABLES
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import open_database, transaction
from qsite.pipeline.store import sources as sources_store
from qsite.pipeline.store.records import Item
from tests.support.known_data import database_before

SOURCES = ("Lab Notes", "Industry Wire", "Capital Brief")
#: Two words in every item, so that each has a list of many pages; some rarer ones beside them.
COMMON, RARE = ("qubit", "device"), ("anyon", "fridge", "laser", "photon", "niobium")
SEARCHES = ("qubit", "anyon", "anyon device", "fridge laser", "photon OR niobium", "qubit NOT laser", "nothing")
#: FTS5 may end a leaf a little past the size it is given: by a rowid's varint and the page's index.
PAGE_SLACK = 32


def items(count: int, seed: int, prefix: str) -> list[tuple[str, str, Item]]:
    rng = random.Random(seed)
    made = []
    for n in range(count):
        words = " ".join((*COMMON, *rng.sample(RARE, rng.choice((0, 1, 2)))))
        stamp = f"2026-03-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z"
        item = Item(f"key-{prefix}-{n}", f"https://news.example/{prefix}/{n}", f"Headline {n}", words, rng.choice(TAGS), stamp, True)
        made.append((rng.choice(SOURCES), f"{prefix}-{n:05d}", item))
    return made


def found(db, table: str) -> dict[str, list[int]]:
    """The rowids ``table`` finds for each of :data:`SEARCHES`."""
    return {q: [rowid for (rowid,) in db.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid", [q])]
            for q in SEARCHES}


def largest_page(db, table: str) -> int:
    """The largest page of ``table``'s index, in bytes (rows 1 and 10 are its averages and its structure)."""
    return db.execute(f"SELECT max(length(block)) FROM {table}_data WHERE id > 10").fetchone()[0]


def page_bytes(table: str) -> int:
    return SEARCH_TABLES[table][1]


def check_integrity(db, table: str) -> None:
    db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 0)")


def test_migration_16_writes_the_count_tables_again_in_small_pages_finding_the_same(tmp_path):
    path = tmp_path / "old.db"
    database_before(path, "m016_count_index_pages", SOURCES, items(3000, seed=61, prefix="a"))
    with sqlite3.connect(path) as old:
        before = {table: found(old, table) for table in SEARCH_TABLES}
        # what the migration is for: m015 left pages of FTS5's own size
        assert all(largest_page(old, table) > 2 * COUNT_PAGE_BYTES for table in SEARCH_TABLES)
    db = open_database(path)
    try:
        for table in SEARCH_TABLES:
            assert found(db, table) == before[table], table
            assert sum(map(len, before[table].values())) > 1000, table  # the searches found something to compare
            assert largest_page(db, table) <= page_bytes(table) + PAGE_SLACK, table
            check_integrity(db, table)
        assert {table for table in SEARCH_TABLES if largest_page(db, table) > 2 * COUNT_PAGE_BYTES} == {
            table for table in SEARCH_TABLES if page_bytes(table) == FTS5_PAGE_BYTES} == {"news_search"}
        # the triggers' segments, and FTS5's merges of them, use the table's page size too
        with transaction(db):
            for source in SOURCES:
                news_store.insert_items(db, source, [(id_, item) for s, id_, item in items(600, seed=62, prefix="b") if s == source],
                                        "2026-03-29T00:00:00Z")
        for table in SEARCH_TABLES:
            db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            assert largest_page(db, table) <= page_bytes(table) + PAGE_SLACK, table
            check_integrity(db, table)
    finally:
        db.close()


@pytest.mark.parametrize("table", list(SEARCH_TABLES))
def test_bulk_insert_writes_each_search_table_in_its_pages(tmp_path, table):
    db = open_database(tmp_path / "bulk.db")
    try:
        with transaction(db):
            for name in SOURCES:
                sources_store.add_source(db, name, "https://feeds.example/" + name.replace(" ", ""), "Science")
            news_store.bulk_insert_items(db, items(3000, seed=63, prefix="c"), "2026-03-29T00:00:00Z")
        (entries,) = db.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH 'qubit'").fetchone()
        assert entries > 900  # every item of the table has the word: lists of many pages
        assert page_bytes(table) - 4 * PAGE_SLACK <= largest_page(db, table) <= page_bytes(table) + PAGE_SLACK
        check_integrity(db, table)
    finally:
        db.close()
