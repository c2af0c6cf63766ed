"""Transactions that fail for real: the real error reported, the data intact, the connection usable.

Two ways a transaction fails besides a statement's own error, each made with
real SQLite and no mocks:

* ``COMMIT`` itself fails and SQLite leaves the transaction open: a foreign key
  declared ``DEFERRABLE INITIALLY DEFERRED`` is only checked at ``COMMIT``.
* SQLite has already rolled the transaction back when the error reaches us: a
  trigger's ``RAISE(ROLLBACK)``, or ``SQLITE_FULL`` from ``PRAGMA max_page_count``.

The unit is :func:`qsite.pipeline.store.transaction`; then whole news and export runs,
where one source's failure must not stop the next.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from qsite.config import load_config
from qsite.db.redact import redact_text
from qsite.pipeline.news import ingest as news_ingest
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.site.ingest import ingest_site
from qsite.pipeline.store import open_database, transaction

FEEDS = Path(__file__).resolve().parents[1] / "pipeline" / "samples" / "feeds"

#: Checked at COMMIT only: a row pointing at no source makes COMMIT fail, and SQLite keeps the transaction open.
DEFERRED_CHECK = "CREATE TABLE audit (source TEXT REFERENCES sources(name) DEFERRABLE INITIALLY DEFERRED)"


def page_limit(db, extra_pages: int = 0) -> None:
    """Let the file grow by ``extra_pages`` pages at most: past that, a write fails with SQLITE_FULL."""
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0] + extra_pages}")


@pytest.fixture
def db(tmp_path):
    database = open_database(tmp_path / "site.db")
    database.execute("INSERT INTO sources (name, url, tag) VALUES ('Lab', 'https://lab.example/feed', 'Science')")
    yield database
    database.close()


def sources(db) -> list[str]:
    return [row[0] for row in db.execute("SELECT name FROM sources ORDER BY name")]


def add_source(db, name: str) -> None:
    db.execute("INSERT INTO sources (name, url, tag) VALUES (?, 'https://x.example/feed', 'Science')", [name])


# --- transaction() ------------------------------------------------------------------


def test_a_failed_commit_is_reported_rolled_back_and_the_connection_reusable(db):
    db.execute(DEFERRED_CHECK)
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY constraint failed"):
        with transaction(db):
            add_source(db, "Half")
            db.execute("INSERT INTO audit VALUES ('no such source')")
    assert not db.conn.in_transaction
    assert sources(db) == ["Lab"]
    with transaction(db):  # the next unit of work begins and commits
        add_source(db, "Next")
    assert sources(db) == ["Lab", "Next"]


def test_a_transaction_sqlite_already_rolled_back_reports_its_own_error(db):
    db.execute("CREATE TRIGGER boom BEFORE INSERT ON sources WHEN NEW.name = 'Boom' BEGIN SELECT RAISE(ROLLBACK, 'injected: rolled back by SQLite'); END")
    with pytest.raises(sqlite3.IntegrityError, match="injected: rolled back by SQLite") as caught:
        with transaction(db):
            add_source(db, "Before")
            add_source(db, "Boom")
    assert "cannot rollback" not in str(caught.value) and caught.value.__context__ is None
    assert sources(db) == ["Lab"]
    with transaction(db):
        add_source(db, "Next")
    assert sources(db) == ["Lab", "Next"]


def test_sqlite_full_reports_the_full_database_and_keeps_the_data(db):
    page_limit(db)
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        with transaction(db):
            db.conn.executemany(
                "INSERT INTO sources (name, url, tag) VALUES (?, 'https://x.example/feed', 'Science')",
                [(f"source {n} " + "x" * 500,) for n in range(200)],
            )
    assert not db.conn.in_transaction and sources(db) == ["Lab"]
    with transaction(db):  # a write that needs no new page still succeeds
        db.execute("UPDATE sources SET last_status = 'ok' WHERE name = 'Lab'")
    assert db.execute("SELECT last_status FROM sources").fetchone()[0] == "ok"


def test_an_error_inside_rolls_back_and_is_raised_unchanged(db):
    with pytest.raises(KeyError, match="not a database error"):
        with transaction(db):
            add_source(db, "Half")
            raise KeyError("not a database error")
    assert not db.conn.in_transaction and sources(db) == ["Lab"]


# --- a news run: the failing source fails alone ----------------------------------------


@pytest.fixture
def news_run(make_config):
    """``run(sources)`` ingests the sample feeds named, as ``{name: file}``, into one database; returns ({name: report}, db)."""
    state = {}

    def run(feeds: dict[str, str]):
        sources = [{"name": name, "url": str(FEEDS / file), "tag": "Science"} for name, file in feeds.items()]
        config = load_config(make_config(news={"sources": sources}))
        state.setdefault("db", open_database(config.database_path))
        reports = ingest_news(state["db"], config, parse_workers=0)
        return {report.source: report for report in reports}, state["db"]

    yield run
    if "db" in state:
        state["db"].close()


def items(db, source: str) -> list[tuple]:
    return db.execute("SELECT * FROM news WHERE source = ? ORDER BY id", [source]).fetchall()


def db_path(db) -> str:
    return db.execute("PRAGMA database_list").fetchone()[2]


def last_run(db, source: str) -> tuple:
    return tuple(db.execute("SELECT status, error FROM ingest_runs WHERE source = ? ORDER BY id DESC", [source]).fetchone())


FAILURES = {
    "failed COMMIT": (
        [DEFERRED_CHECK, "CREATE TRIGGER fail AFTER INSERT ON news WHEN NEW.source = 'Bad' BEGIN INSERT INTO audit VALUES ('nobody'); END"],
        "FOREIGN KEY constraint failed",
    ),
    "rolled back by SQLite": (
        ["CREATE TRIGGER fail BEFORE INSERT ON news WHEN NEW.source = 'Bad' BEGIN SELECT RAISE(ROLLBACK, 'injected rollback'); END"],
        "injected rollback",
    ),
    # A statement after the source's items are inserted fails, and the transaction stays open:
    # its savepoint must undo the items.
    "refused by a constraint": (
        ["CREATE TRIGGER fail BEFORE UPDATE OF content_hash ON sources WHEN NEW.name = 'Bad' AND NEW.content_hash IS NOT NULL"
         " BEGIN SELECT RAISE(ABORT, 'injected abort'); END"],
        "injected abort",
    ),
}

#: A real publisher's feed, whose stories none of the samples carry.
REAL_FEED = Path(__file__).resolve().parent / "data" / "realfeeds" / "bbc-news.rss"


@pytest.mark.parametrize("failure", FAILURES)
def test_a_source_the_database_refuses_fails_alone_and_the_next_source_is_stored(news_run, failure):
    statements, message = FAILURES[failure]
    reports, db = news_run({"Bad": "lab-notes.xml"})
    before = items(db, "Bad")
    assert reports["Bad"].status == "ok" and before
    for statement in statements:
        db.execute(statement)

    # Bad moves to another feed (new items to insert); Good is new and comes after it.
    reports, db = news_run({"Bad": "capital-brief.rdf", "Good": "industry-wire.atom"})
    bad, good = reports["Bad"], reports["Good"]
    assert bad.failed and message in bad.error and "cannot rollback" not in bad.error
    assert db_path(db) in bad.error
    assert items(db, "Bad") == before
    assert last_run(db, "Bad") == ("failed", redact_text(bad.error))  # public: the database's path cut to its name
    row = dict(next(db.query("SELECT * FROM sources WHERE name = 'Bad'")))
    assert row["last_status"] == "failed" and message in row["last_error"]
    assert row["consecutive_failures"] == 0 and row["next_fetch_at"] is None  # no backoff: not the feed's fault
    assert row["etag"] is None and row["content_hash"] is None  # nothing remembered of a body never stored
    assert good.status == "ok" and good.counts["new"] == len(items(db, "Good")) > 0
    assert last_run(db, "Good")[0] == "ok"
    assert not db.conn.in_transaction

    db.execute("DROP TRIGGER fail")
    reports, db = news_run({"Bad": "capital-brief.rdf", "Good": "industry-wire.atom"})
    assert reports["Bad"].status == "ok" and reports["Bad"].counts["new"] > 0  # retried at once, and stored
    assert reports["Good"].status == "unchanged"


@pytest.mark.parametrize("failure", FAILURES)
def test_a_source_refused_between_two_others_of_one_commit_costs_them_nothing(news_run, failure, monkeypatch):
    """Sources are written several to a transaction (:class:`qsite.pipeline.store.Batch`), each in a
    savepoint: the one the database refuses fails alone, whether SQLite keeps the transaction (its
    savepoint is undone), ends it (the others are written again, alone) or refuses its COMMIT."""
    monkeypatch.setattr(news_ingest, "COMMIT_SECONDS", 60.0)  # the three in one batch, however slow the machine
    statements, message = FAILURES[failure]
    reports, db = news_run({"Bad": "lab-notes.xml"})
    before = items(db, "Bad")
    for statement in statements:
        db.execute(statement)

    written = []
    db.conn.set_trace_callback(written.append)
    reports, db = news_run({"First": "industry-wire.atom", "Bad": "capital-brief.rdf", "Last": str(REAL_FEED)})
    db.conn.set_trace_callback(None)
    batch = written[written.index("SAVEPOINT unit"):]
    assert batch.count("SAVEPOINT unit") == 3 and "COMMIT" not in batch[:batch.index("RELEASE unit")]
    bad = reports["Bad"]
    assert bad.failed and message in bad.error and "cannot rollback" not in bad.error
    assert items(db, "Bad") == before and last_run(db, "Bad") == ("failed", redact_text(bad.error))
    for name in ("First", "Last"):
        assert reports[name].status == "ok" and reports[name].counts["new"] == len(items(db, name)) > 0
        assert last_run(db, name) == ("ok", None)
    assert [report.source for report in reports.values()] == ["First", "Bad", "Last"]
    assert not db.conn.in_transaction


def test_an_error_that_is_no_database_error_keeps_the_sources_written_before_it(news_run, monkeypatch):
    """A bug in writing one source ends the run with its error, as it always did; what it wrote is undone,
    the sources the batch held before it are committed, and the connection is left outside any transaction."""
    monkeypatch.setattr(news_ingest, "COMMIT_SECONDS", 60.0)
    write_outcome = news_ingest._write_outcome

    def failing(sweep, source, outcome):
        if source.name == "Bad":
            raise RuntimeError("a bug")
        return write_outcome(sweep, source, outcome)

    monkeypatch.setattr(news_ingest, "_write_outcome", failing)
    with pytest.raises(RuntimeError, match="a bug"):
        news_run({"First": "industry-wire.atom", "Bad": "capital-brief.rdf", "Last": "lab-notes.xml"})
    monkeypatch.setattr(news_ingest, "_write_outcome", write_outcome)
    reports, db = news_run({"First": "industry-wire.atom", "Bad": "capital-brief.rdf", "Last": "lab-notes.xml"})
    assert reports["First"].status == "unchanged" and items(db, "First")  # written before the bug, and kept
    assert reports["Bad"].status == reports["Last"].status == "ok"


def test_a_sweep_commits_several_sources_at_once(news_run, monkeypatch):
    """What batching is for: three sources (two changed), one commit (each in a savepoint)."""
    monkeypatch.setattr(news_ingest, "COMMIT_SECONDS", 60.0)
    written = []
    reports, db = news_run({"Lab": "lab-notes.xml"})
    db.conn.set_trace_callback(written.append)
    reports, db = news_run({"Lab": "lab-notes.xml", "Wire": "industry-wire.atom", "Brief": "capital-brief.rdf"})
    db.conn.set_trace_callback(None)
    assert reports["Lab"].status == "unchanged" and reports["Wire"].status == reports["Brief"].status == "ok"
    batch = written[written.index("SAVEPOINT unit") - 1:]
    last_release = len(batch) - 1 - batch[::-1].index("RELEASE unit")
    assert batch[0] == "BEGIN IMMEDIATE" and batch.count("SAVEPOINT unit") == 3 and "COMMIT" not in batch[:last_release]


def test_a_full_database_fails_the_source_that_needs_room_and_the_next_still_runs(news_run):
    reports, db = news_run({"Bad": "lab-notes.xml", "Good": "industry-wire.atom"})
    before = items(db, "Bad")
    assert before and reports["Good"].status == "ok"
    page_limit(db)  # the file cannot grow: new items cannot be stored, bookkeeping updates can

    reports, db = news_run({"Bad": "capital-brief.rdf", "Good": "industry-wire.atom"})
    assert reports["Bad"].failed and "database or disk is full" in reports["Bad"].error
    assert "cannot rollback" not in reports["Bad"].error
    assert items(db, "Bad") == before
    assert reports["Good"].status == "unchanged" and last_run(db, "Good") == ("unchanged", None)

    page_limit(db, 1000)
    reports, db = news_run({"Bad": "capital-brief.rdf", "Good": "industry-wire.atom"})
    assert reports["Bad"].status == "ok" and reports["Bad"].counts["new"] > 0


# --- a site export run: a failed COMMIT still records the run -------------------------------


def test_a_failed_commit_of_the_export_keeps_the_catalog_and_records_the_run(make_config, tmp_path, sample_export):
    config = load_config(make_config())
    db = open_database(config.database_path)
    assert ingest_site(db, config).status == "ok"
    catalog = db.execute("SELECT * FROM courses ORDER BY id").fetchall()
    db.execute(DEFERRED_CHECK)
    db.execute("CREATE TRIGGER fail AFTER INSERT ON courses BEGIN INSERT INTO audit VALUES ('nobody'); END")

    sample_export["courses"] = sample_export["courses"][:2]
    sample_export["glossary"] = []
    export = tmp_path / "smaller.json"
    export.write_text(json.dumps(sample_export), encoding="utf-8")
    config = load_config(make_config(site_export={"source": str(export)}))
    report = ingest_site(db, config)

    assert report.failed and "FOREIGN KEY constraint failed" in report.error
    assert db.execute("SELECT * FROM courses ORDER BY id").fetchall() == catalog
    # The run's row is committed, not left inside a transaction that never ends.
    reader = sqlite3.connect(config.database_path)
    try:
        assert reader.execute("SELECT status, error FROM ingest_runs ORDER BY id DESC").fetchone() == ("failed", report.error)
    finally:
        reader.close()
    db.close()
