"""Migration 3 on a database the old pipeline wrote: every row kept, then claimed, and the lost posts back.

``tests/data/legacy/old-pipeline-news.sql`` holds the rows the pipeline of
main at f016125 (before migration 3) stored from eight files of
tests/data/realfeeds, made by running that code (a git worktree of that
commit) with ``qsite ingest news`` and dumping the ``sources``, ``news`` and
``data_versions`` rows. The schema they go into is migrations m001 and m002,
which are never edited.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest
import sqlite_utils

from qsite.config import load_config
from qsite.db.migrations import migrations
from qsite.db.snapshot import KNOWN_MIGRATIONS
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import open_database
from tests.support.goldens import REAL, load_golden
from tests.support.paths import ROOT

OLD_ROWS = ROOT / "tests" / "data" / "legacy" / "old-pipeline-news.sql"
FEEDS = ["tls-org-diary.rdf", "martinfowler.atom", "uol-noticias.rss", "paseri-blog.atom", "info-org-il.rss",
         "apology-line-podcast.rss", "bbc-news.rss", "taverncast-podcast.rss"]
COLUMNS = "rowid, id, url, title, summary, source, tag, published_at, first_seen_at, updated_at"


@pytest.fixture
def old_database(tmp_path):
    """A database file as the old pipeline left it."""
    path = tmp_path / "site.db"
    db = sqlite_utils.Database(path)
    migrations.apply(db, stop_before="m003_news_entry_keys")
    db.executescript(OLD_ROWS.read_text(encoding="utf-8").replace("{realfeeds}", str(REAL)))
    db.close()
    return path


def test_migration_keeps_every_row_and_lets_one_url_carry_many_items(old_database):
    before = sqlite3.connect(old_database).execute(f"SELECT {COLUMNS} FROM news ORDER BY id").fetchall()
    assert len(before) == 93
    db = open_database(old_database)
    assert db.execute(f"SELECT {COLUMNS} FROM news ORDER BY id").fetchall() == before
    assert db.execute("SELECT count(*) FROM news WHERE entry_key IS NULL").fetchone()[0] == 93
    # Full-text search still finds the old rows, and follows changes through the new triggers.
    found = db.execute("SELECT count(*) FROM news_fts WHERE news_fts MATCH 'Temporal'").fetchone()[0]
    assert found >= 1
    url, source = db.execute("SELECT url, source FROM news LIMIT 1").fetchone()
    db.execute(
        "INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at, entry_key) "
        "VALUES ('x', ?, 'Zyzzyva episode', '', ?, 'Science', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z', 'k')",
        [url, source],
    )
    assert db.execute("SELECT id FROM news_fts JOIN news ON news.rowid = news_fts.rowid WHERE news_fts MATCH 'Zyzzyva'").fetchone()[0] == "x"


@pytest.mark.slow
def test_reading_the_feeds_again_claims_the_old_items_and_brings_back_the_lost_posts(old_database, make_config):
    old = {row[0]: row[1:] for row in sqlite3.connect(old_database).execute("SELECT id, url, source, published_at, first_seen_at FROM news")}
    config = load_config(make_config(news={"sources": [{"name": name, "url": str(REAL / name), "tag": "Science"} for name in FEEDS]}))
    db = open_database(old_database)
    reports = {report.source: report for report in ingest_news(db, config, parse_workers=0)}
    assert all(report.status in ("ok", "warning") for report in reports.values())  # read again: the rules changed

    # Nothing lost: every old item keeps its id, url and first-seen time, and now has its entry's key.
    now = {row[0]: row[1:] for row in db.execute("SELECT id, url, source, published_at, first_seen_at, entry_key FROM news")}
    for id_, (url, source, _, first_seen) in old.items():
        assert now[id_][0:2] == (url, source) and now[id_][3] == first_seen and now[id_][4] is not None

    # Every post of each feed is one item: the counts and titles of the goldens.
    for name in FEEDS:
        golden = load_golden(REAL / name)["items"]
        titles = Counter(row[0] for row in db.execute("SELECT title FROM news WHERE source = ?", [name]))
        assert titles == Counter(item["title"] for item in golden), name
    assert reports["tls-org-diary.rdf"].counts["new"] == 32 and reports["info-org-il.rss"].counts["new"] == 32

    # Dates the old code could not read were stored as first seen; they stay so: a stored date never moves,
    # so a client walking /api/v1/news with a cursor never meets an item twice (docs/news-api.md, "Dates").
    # Titles are decoded once, as written.
    uol = dict(db.execute("SELECT title, published_at FROM news WHERE source = 'uol-noticias.rss'").fetchall())
    assert set(uol) == {item["title"] for item in load_golden(REAL / "uol-noticias.rss")["items"]}
    stored_before = {url: published for url, source, published, _ in old.values() if source == "uol-noticias.rss"}
    assert stored_before and set(uol.values()) == set(stored_before.values())
    assert db.execute("SELECT count(*) FROM news WHERE title LIKE '%&lt;DVD版>%'").fetchone()[0] == 1

    # And once claimed, reading again changes nothing.
    db.execute("UPDATE sources SET content_hash = NULL, etag = NULL, next_fetch_at = NULL")
    again = ingest_news(db, config, parse_workers=0)
    assert all(report.counts["new"] == 0 and report.counts["updated"] == 0 for report in again)


@pytest.mark.slow
def test_migrate_names_the_migrations_it_applied(qsite, make_config, old_database):
    result = qsite("migrate", "--config", str(make_config()))
    assert result.returncode == 0, result.stderr
    pending = [name for name in KNOWN_MIGRATIONS if name >= "m003"]
    assert result.stdout.splitlines() == [
        f"{old_database}: schema up to date; applied {len(pending)} migration(s): {', '.join(pending)}",
    ]
    assert qsite("migrate", "--config", str(make_config())).stdout.splitlines() == [f"{old_database}: schema up to date"]


@pytest.mark.slow
def test_writers_refuse_a_database_a_newer_qsite_migrated(qsite, make_config, tmp_path):
    config = make_config(snapshots={"store": "store"})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    database = tmp_path / "site.db"
    with sqlite3.connect(database) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('qsite', 'm099_future', '2027')")
    runs = "SELECT count(*), max(id) FROM ingest_runs"
    before = sqlite3.connect(database).execute(runs).fetchone()
    for command in (["migrate"], ["ingest", "site"], ["ingest", "all"], ["publish"], ["schedule", "--no-run-now"], ["up", "--port", "0"]):
        result = qsite(*command, "--config", str(config), timeout=30)
        assert result.returncode == 1, (command, result.stdout, result.stderr)
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert line.startswith(f"Error: {database}: a newer qsite has migrated this database (m099_future, unknown to qsite "), line
        assert "upgrade qsite to" in line and "replica" not in line
    assert sqlite3.connect(database).execute(runs).fetchone() == before  # no ingest ran
    assert not (tmp_path / "store" / "latest.json").exists()
    assert qsite("status", "--config", str(config)).returncode == 0  # reading it is still allowed


GUID_CHANGES = ROOT / "tests" / "data" / "legacy" / "guid-changes.sql"
ALL_COLUMNS = COLUMNS + ", entry_key, image_url, authors, change_key"


def test_migration_13_removes_what_changed_guids_stored_twice_and_nothing_else(qsite, make_config, tmp_path):
    """On rows the pipeline before stored: each story a changed guid stored twice is one item again, with a tombstone."""
    path = tmp_path / "site.db"
    db = sqlite_utils.Database(path)
    migrations.apply(db, stop_before="m012_news_removed_by_view")
    db.executescript(GUID_CHANGES.read_text(encoding="utf-8"))
    before = {row[1]: row for row in db.execute(f"SELECT {ALL_COLUMNS} FROM news")}
    db.close()
    assert len(before) == 10

    result = qsite("migrate", "--config", str(make_config()))
    assert result.returncode == 0, result.stderr
    assert "m013: removed 2 news items a changed guid had stored twice" in result.stderr

    after = sqlite3.connect(path)
    kept = {row[1]: row for row in after.execute(f"SELECT {ALL_COLUMNS} FROM news")}
    gone = set(before) - set(kept)
    # the second copies (stored later) of wp.rss's two posts went; every other row is as it was
    assert {(before[id_][5], before[id_][3]) for id_ in gone} == {("wp.rss", "Moving to HTTPS"), ("wp.rss", "Second post")}
    assert all(before[id_][8] > min(row[8] for row in before.values() if row[2] == before[id_][2]) for id_ in gone)
    assert kept == {id_: row for id_, row in before.items() if id_ not in gone}
    assert Counter(row[3] for row in kept.values() if row[5] == "pod.rss") == {"Bonus": 2, "Episode 1": 1, "Episode 2": 1}
    tombstones = after.execute("SELECT news_removed.id, tag, source FROM news_removed JOIN news_left USING (id)").fetchall()
    assert sorted(tombstones) == sorted((id_, "Science", "wp.rss") for id_ in gone)
    # the counts derived from news followed
    assert after.execute("SELECT sum(items) FROM news_totals WHERE tag = '' AND span = 'month'").fetchone()[0] == 8
    assert qsite("migrate", "--config", str(make_config())).stdout.splitlines() == [f"{path}: schema up to date"]
