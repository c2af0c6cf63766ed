"""The search tables' index pages (:mod:`qsite.db.search_tables`): each table's own size whoever writes it, finding the same.

A database as m015 left it (pages of FTS5's 4,050 bytes, filled row by row by the triggers) is
opened, which applies m016; each search table must then find exactly what it found before, pass
FTS5's integrity check, and hold no page larger than its size in :data:`SEARCH_TABLES` (and a
rowid's few bytes): 1,000 bytes for the tables searches count in. Rows written later, by the
triggers or by the bulk insert, keep those sizes. ``TestSearchTablesFollowNews`` holds the
invariant of docs/invariants.md, "The search tables", over random sequences of every writer:
bursts of items through the triggers, re-tagging, moves, new words, new times, deletes, retention, a
rebuild (the migration's and the bulk insert's) and FTS5's merges.
"""

from __future__ import annotations

import json
import random
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from qsite.db.model import TAGS
from qsite.db.news_derived import SEARCH_ROWID_MASK, SOURCE_ROWID_BITS
from qsite.db.search_tables import (
    COUNT_PAGE_BYTES,
    FTS5_PAGE_BYTES,
    SEARCH_TABLES,
    rebuild_search_table,
)
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


#: Words that are their own stems (FTS5's porter tokenizer), so a plain scan of the text finds what the tables should.
MODEL_WORDS = ("qubit", "photon", "ion", "chip", "error")
#: Times in three months, two of them a second either side of a month's end: ``news_search`` holds each item's month.
MODEL_TIMES = [f"2026-11-{day:02d}T{hour:02d}:00:00Z" for day in (18, 19, 20, 21) for hour in (3, 15)] + [
    "2026-10-31T23:59:59Z", "2026-12-01T00:00:00Z"]
#: The mask that takes each table's key back to the item's ``news`` rowid.
ITEM_ROWID = {table: SEARCH_ROWID_MASK if table == "news_search" else (1 << SOURCE_ROWID_BITS) - 1 for table in SEARCH_TABLES}


@settings(max_examples=15, stateful_step_count=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
class TestSearchTablesFollowNews(RuleBasedStateMachine):
    """Every search table finds exactly the items of ``news`` whose words (and tag, for a tag's table)
    match, in pages of its own size, after any sequence of the writers that touch them."""

    @initialize()
    def database(self):
        self.folder = tempfile.TemporaryDirectory(prefix="qsite-search-tables-")
        self.db = open_database(Path(self.folder.name) / "site.db")
        self.db["sources"].insert_all([{"name": name, "url": f"https://{n}.example/feed", "tag": "Science"}
                                       for n, name in enumerate(SOURCES)])
        self.next_id = 0
        # lists of several pages of 1,000 bytes from the start: a word in every item
        self.add_a_burst(700, ["qubit"], TAGS[0], SOURCES[0], MODEL_TIMES)

    def teardown(self):
        if hasattr(self, "db"):
            self.db.conn.close()
            self.folder.cleanup()

    @rule(count=st.integers(1, 80), words=st.lists(st.sampled_from(MODEL_WORDS), min_size=1, max_size=3),
          tag=st.sampled_from(TAGS), source=st.sampled_from(SOURCES),
          times=st.lists(st.sampled_from(MODEL_TIMES), min_size=1, max_size=3))
    def add_a_burst(self, count, words, tag, source, times):
        """``count`` items through the insert triggers, as an ingest stores them."""
        items = []
        for i in range(count):
            self.next_id += 1
            items.append({
                "id": f"{self.next_id:032x}", "url": f"https://news.example/{self.next_id}", "title": " ".join(words),
                "summary": f"About {words[i % len(words)]}", "source": source, "tag": tag,
                "published_at": times[i % len(times)], "first_seen_at": times[0], "updated_at": times[0],
                "authors": json.dumps([]), "change_key": f"{times[0]}#{self.next_id:09d}",
            })
        with self.db.conn:
            self.db["news"].insert_all(items)

    @rule(data=st.data())
    def change_some_items(self, data):
        """Re-tag, move to another source, give new words, another time, or delete: the update and delete triggers."""
        ids = [row[0] for row in self.db.conn.execute("SELECT id FROM news")]
        chosen = data.draw(st.lists(st.sampled_from(ids), max_size=12, unique=True)) if ids else []
        what = data.draw(st.sampled_from(["tag", "source", "words", "published_at", "delete"]))
        with self.db.conn:
            for item_id in chosen:
                if what == "delete":
                    self.db.conn.execute("DELETE FROM news WHERE id = ?", [item_id])
                elif what == "words":
                    self.db.conn.execute("UPDATE news SET summary = ? WHERE id = ?", [f"About {data.draw(st.sampled_from(MODEL_WORDS))}", item_id])
                else:
                    value = data.draw(st.sampled_from({"tag": TAGS, "source": SOURCES, "published_at": MODEL_TIMES}[what]))
                    self.db.conn.execute(f"UPDATE news SET {what} = ? WHERE id = ?", [value, item_id])

    @rule(cutoff=st.sampled_from(MODEL_TIMES))
    def retention(self, cutoff):
        with transaction(self.db):
            news_store.delete_published_before(self.db, cutoff)

    @rule(table=st.sampled_from(list(SEARCH_TABLES)))
    def rebuild(self, table):
        """What migration 16 and the bulk insert do to a table."""
        with self.db.conn:
            rebuild_search_table(self.db, table)

    @rule(table=st.sampled_from(list(SEARCH_TABLES)), command=st.sampled_from(["optimize", "merge"]))
    def merge(self, table, command):
        """FTS5's own merges of the segments the triggers wrote."""
        with self.db.conn:
            if command == "merge":
                self.db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('merge', 16)")
            else:
                self.db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")

    @invariant()
    def each_table_finds_what_news_holds_in_its_pages(self):
        if not hasattr(self, "db"):
            return
        conn = self.db.conn
        for word in MODEL_WORDS:
            having = conn.execute(
                "SELECT rowid, tag FROM news WHERE instr(' ' || lower(title || ' ' || summary) || ' ', ?)", [f" {word} "]
            ).fetchall()
            for table in SEARCH_TABLES:
                tag = table.removeprefix("news_search_").capitalize()
                expected = {rowid for rowid, its_tag in having if tag not in TAGS or its_tag == tag}
                mask = ITEM_ROWID[table]
                found = [key & mask for (key,) in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", [word])]
                assert sorted(found) == sorted(expected), (table, word)
        # news_search's facets: each item under its month's term (migration 17), which a page's search ANDs
        for (month,) in conn.execute("SELECT DISTINCT strftime('m%Y%m', value) FROM json_each(?)", [json.dumps(MODEL_TIMES)]):
            expected = [rowid for (rowid,) in conn.execute("SELECT rowid FROM news WHERE strftime('m%Y%m', published_at) = ?", [month])]
            found = [key & SEARCH_ROWID_MASK for (key,) in conn.execute("SELECT rowid FROM news_search WHERE news_search MATCH ?", [f"facets: {month}"])]
            assert sorted(found) == sorted(expected), month
        for table in SEARCH_TABLES:
            assert (largest_page(conn, table) or 0) <= page_bytes(table) + PAGE_SLACK, table


TestSearchTablesFollowNews = TestSearchTablesFollowNews.TestCase
