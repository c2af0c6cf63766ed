"""``news_counts``, ``news_totals`` and the count the API answers: always the table's own count, however news changed.

The API's ``count`` and the stats' ``news_items`` are read from ``news_totals``
and ``news_counts`` (kept by triggers, db/migrations.py) and a range count within one day
(``api_news_count`` in metadata.yml). Here items go in, change tag and go out
the ways the pipeline does it (:mod:`qsite.pipeline.store.news`), and the canned
queries are compared with ``count(*)`` over ``news`` itself at every boundary
that matters: no ``since``, the start and end of a day and of a month, the
times of items themselves. Also :func:`~qsite.pipeline.store.news.bulk_insert_items`:
the same counts, full-text index and schema as inserting row by row.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

import pytest

from qsite.db.model import TAGS, format_time
from qsite.pipeline.store.records import Item
from qsite.pipeline.store import open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import sources as sources_store
from qsite.service.datasette.metadata import configured_queries
from tests.support.known_data import database_before

SQL = {name: q["sql"] for name, q in configured_queries().items()}
SOURCES = ("Lab Notes", "Industry Wire", "Capital Brief")
START = datetime(2025, 12, 30, 22, 0, tzinfo=timezone.utc)


def items(count: int, seed: int, prefix: str = "i") -> list[tuple[str, str, Item]]:
    """``(source, id, item)``, a few hours apart from :data:`START` over month and year ends."""
    rng = random.Random(seed)
    made = []
    for n in range(count):
        moment = START + timedelta(hours=rng.randrange(24 * 70))
        url = f"https://news.example/{prefix}/{n}"
        item = Item(f"key-{prefix}-{n}", url, f"Headline {n}", f"summary {prefix} qubit{n % 7}", rng.choice(TAGS), format_time(moment), True)
        made.append((rng.choice(SOURCES), f"{prefix}-{n}", item))
    return made


@pytest.fixture
def db(tmp_path):
    db = open_database(tmp_path / "site.db")
    with transaction(db):
        for name in SOURCES:
            sources_store.add_source(db, name, f"https://{name.replace(' ', '').lower()}.example/feed", "Science")
        db["site_totals"].insert({"id": 1, "courses": 1, "slides": 2, "quizzes": 0, "question_bank_size": 0, "glossary_terms": 0})
    yield db
    db.close()


def insert(db, rows: list[tuple[str, str, Item]]) -> None:
    with transaction(db):
        for source in SOURCES:
            news_store.insert_items(db, source, [(id_, item) for s, id_, item in rows if s == source], "2026-01-01T00:00:00Z")


def since_values(db) -> list[str]:
    """No since, each item's own time, a second either side, and the edges of its day and month."""
    values = {""}
    for (published,) in db.execute("SELECT published_at FROM news"):
        moment = datetime.fromisoformat(published.replace("Z", "+00:00"))
        day = moment.replace(hour=0, minute=0, second=0)
        for edge in (moment, moment - timedelta(seconds=1), moment + timedelta(seconds=1), day,
                     day - timedelta(seconds=1), day.replace(day=1), day.replace(day=1) - timedelta(seconds=1)):
            values.add(format_time(edge))
    return sorted(values)


def assert_counts_match(db) -> None:
    """``api_news_count`` against ``count(*)`` for every since value, each with a few until values, tags and sources."""
    rng = random.Random(7)
    values = since_values(db)
    sources = ("", json.dumps(["Lab Notes"]), json.dumps(["Lab Notes", "Capital Brief"]), json.dumps(["Nobody"]))
    for since in values:
        for until in ["", *rng.sample(values, 3)]:
            params = {"tag": rng.choice(("", *TAGS)), "since": since, "until": until, "sources": rng.choice(sources), "q": "", "count_limit": 1}
            expected = db.execute(
                """SELECT count(*) FROM news WHERE (:tag = '' OR tag = :tag) AND published_at > :since
                   AND (:until = '' OR published_at < :until)
                   AND (:sources = '' OR source IN (SELECT value FROM json_each(:sources)))""",
                params,
            ).fetchone()[0]
            assert db.execute(SQL["api_news_count"], params).fetchone()[0] == expected, params
    total = db.execute("SELECT count(*) FROM news").fetchone()[0]
    stats = db.execute(SQL["api_stats"]).fetchone()
    assert stats[-1] == total  # news_items
    recount = db.execute(
        """SELECT 'day', substr(published_at, 1, 10), tag, source, count(*) FROM news GROUP BY 2, 3, 4
           UNION ALL SELECT 'month', substr(published_at, 1, 7), tag, source, count(*) FROM news GROUP BY 2, 3, 4
           ORDER BY 1, 2, 3, 4"""
    ).fetchall()
    assert db.execute("SELECT * FROM news_counts ORDER BY 1, 2, 3, 4").fetchall() == recount  # no rows at zero
    assert db.execute("SELECT * FROM news_totals ORDER BY 1, 2, 3").fetchall() == totals(db)


def totals(db) -> list[tuple]:
    """What ``news_totals`` must hold: ``news`` counted by tag (and '', every tag), span and period."""
    return db.execute(
        """SELECT tag, 'day', substr(published_at, 1, 10), count(*) FROM news GROUP BY 1, 3
           UNION ALL SELECT tag, 'month', substr(published_at, 1, 7), count(*) FROM news GROUP BY 1, 3
           UNION ALL SELECT '', 'day', substr(published_at, 1, 10), count(*) FROM news GROUP BY 3
           UNION ALL SELECT '', 'month', substr(published_at, 1, 7), count(*) FROM news GROUP BY 3
           ORDER BY 1, 2, 3"""
    ).fetchall()


@pytest.mark.slow
def test_counts_follow_inserts_retags_and_deletions(db):
    rows = items(120, seed=1)
    insert(db, rows)
    assert_counts_match(db)
    # a rule or the feed's tag changed: the pipeline rewrites tags (and titles) in place; a feed moved a date
    changed = [
        (id_, item._replace(tag=TAGS[(TAGS.index(item.tag) + 1) % 3], title="Retitled"), item.published_at)
        for _, id_, item in rows[:40]
    ]
    changed += [(id_, item, "2026-02-14T12:00:00Z") for _, id_, item in rows[40:50]]
    with transaction(db):
        news_store.update_items(db, changed, "2026-01-02T00:00:00Z")
    assert_counts_match(db)
    # whoever writes: a source, a tag and a date changed by hand, one at a time and together
    with transaction(db):
        db.execute("UPDATE news SET source = 'Capital Brief' WHERE id IN ('i-50', 'i-51', 'i-52') AND source <> 'Capital Brief'")
        db.execute("UPDATE news SET tag = 'Investing' WHERE id IN ('i-53', 'i-54')")
        db.execute("UPDATE news SET published_at = '2026-03-01T00:00:00Z' WHERE id = 'i-55'")
        db.execute("UPDATE news SET source = 'Lab Notes', tag = 'Science', published_at = '2025-12-31T23:59:59Z' WHERE id = 'i-56'")
    assert_counts_match(db)
    # retention: everything before a cutoff goes
    with transaction(db):
        gone = news_store.delete_published_before(db, "2026-01-20T00:00:00Z")
    assert gone > 0
    assert_counts_match(db)
    with transaction(db):
        db.execute("DELETE FROM news")
    assert db.execute("SELECT count(*) FROM news_counts").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM news_totals").fetchone()[0] == 0
    assert db.execute(SQL["api_news_count"], {"tag": "", "since": "", "until": "", "sources": "", "q": "", "count_limit": 1}).fetchone()[0] == 0


def schema(db) -> list[tuple]:
    return db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


@pytest.mark.slow
def test_bulk_insert_gives_what_row_by_row_inserts_give(db, tmp_path):
    insert(db, items(30, seed=2, prefix="old"))  # a database that already holds items
    before = schema(db)
    with transaction(db):
        assert news_store.bulk_insert_items(db, items(200, seed=3, prefix="bulk"), "2026-01-03T00:00:00Z", batch=64) == 200
    assert schema(db) == before  # every index and trigger is back, as it was
    assert_counts_match(db)
    row_by_row = open_database(tmp_path / "row-by-row.db")
    with transaction(row_by_row):
        for name in SOURCES:
            sources_store.add_source(row_by_row, name, "https://x.example/feed", "Science")
    insert(row_by_row, items(30, seed=2, prefix="old") + items(200, seed=3, prefix="bulk"))
    search = "SELECT rowid FROM news_fts WHERE news_fts MATCH ? ORDER BY rowid"
    ids = "SELECT id FROM news WHERE rowid IN (SELECT rowid FROM news_fts WHERE news_fts MATCH ?) ORDER BY id"
    for words in ("qubit3", "headline", "bulk", "old"):
        assert db.execute(ids, [words]).fetchall() == row_by_row.execute(ids, [words]).fetchall() != []
    db.execute("INSERT INTO news_fts(news_fts) VALUES ('integrity-check')")  # raises if the index and table disagree
    # the triggers work again: an item inserted afterwards is searchable and counted
    insert(db, [("Lab Notes", "late", Item("key-late", "https://news.example/late", "Late", "straggler", "Science", "2026-02-01T00:00:00Z", True))])
    assert db.execute(search, ["straggler"]).fetchall() == db.execute("SELECT rowid FROM news WHERE id = 'late'").fetchall()
    assert_counts_match(db)
    row_by_row.close()


def test_migration_counts_the_items_already_stored(tmp_path):
    """A database holding news before migration 5 gets its counts (and indexes) when it is opened."""
    path = tmp_path / "old.db"
    database_before(path, "m005_news_counts_and_indexes", SOURCES, items(80, seed=4))
    db = open_database(path)
    db["site_totals"].insert({"id": 1, "courses": 1, "slides": 2, "quizzes": 0, "question_bank_size": 0, "glossary_terms": 0})
    assert_counts_match(db)
    db.close()


def test_migration_totals_the_counts_already_stored(tmp_path):
    """A database that kept ``news_counts`` before migration 11 gets ``news_totals`` from them when it is opened."""
    path = tmp_path / "old.db"
    database_before(path, "m011_news_totals", SOURCES, items(150, seed=5))  # m005's triggers count them
    db = open_database(path)
    assert totals(db) and db.execute("SELECT * FROM news_totals ORDER BY 1, 2, 3").fetchall() == totals(db)
    db["site_totals"].insert({"id": 1, "courses": 1, "slides": 2, "quizzes": 0, "question_bank_size": 0, "glossary_terms": 0})
    assert_counts_match(db)
    # and keeps them: the new triggers count what comes after
    insert(db, items(20, seed=6, prefix="new"))
    assert_counts_match(db)
    db.close()
