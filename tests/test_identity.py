"""Which stored item a guid-less entry is: its link alone, unless the link is shared within the document.

Real feeds without guids (tests/data/realfeeds), ingested into real SQLite
files from local copies; where a publisher's later edit is needed, the test
makes it in the copy's bytes and says so. ``tests/data/legacy/link-title-keys.sql``
holds the rows the rules before this one stored (every guid-less entry keyed
by its link and title): they must be found again, never duplicated.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from qsite.config import load_config
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import open_database
from tests.support.goldens import REAL, load_golden
from tests.support.paths import ROOT

OLD_ROWS = ROOT / "tests" / "data" / "legacy" / "link-title-keys.sql"
#: The feeds the old rows were stored from: guid-less, with unique links (info-org-il, jn-pt, feedforall),
#: a link two entries share (kinder-ru), untitled entries on one link (godthink), empty links (debian-udd).
OLD_FEEDS = ["info-org-il.rss", "kinder-ru.rss", "godthink-blogsome.rss", "jn-pt.rss", "feedforall-sample.rss", "debian-udd-dashboard.rss"]
ROWS = "SELECT id, url, title, entry_key FROM news WHERE source = ? ORDER BY id"


@pytest.fixture
def ingest(make_config, tmp_path):
    """Ingest copies of the named real feeds (``{name: bytes}``, or ``None`` for the file as it is)."""

    def run(feeds: dict[str, bytes | None]):
        sources = []
        for name, body in feeds.items():
            copy = tmp_path / "feeds" / name
            copy.parent.mkdir(exist_ok=True)
            if body is None:
                shutil.copyfile(REAL / name, copy)
            else:
                copy.write_bytes(body)
            sources.append({"name": name, "url": str(copy), "tag": "Science"})
        config = load_config(make_config(news={"sources": sources}))
        db = open_database(config.database_path)
        reports = {report.source: report for report in ingest_news(db, config, parse_workers=0)}
        assert all(report.status in ("ok", "warning") for report in reports.values()), [r.line() for r in reports.values()]
        return reports, db

    return run


def test_a_title_the_publisher_corrects_updates_its_item_and_keeps_its_identity(ingest):
    name = "feedforall-sample.rss"
    original = (REAL / name).read_bytes()
    _, db = ingest({name: original})
    before = db.execute(ROWS, [name]).fetchall()
    assert len(before) == len(load_golden(REAL / name)["items"]) == 9
    # The publisher corrects one title (this edit is ours; the feed has no guids, only unique links).
    edited = original.replace(b"<title>RSS Solutions for Schools and Colleges</title>", b"<title>RSS Solutions for Schools &amp; Colleges</title>")
    assert edited != original
    reports, db = ingest({name: edited})
    assert reports[name].counts["new"] == 0 and reports[name].counts["updated"] == 1
    after = db.execute(ROWS, [name]).fetchall()
    changed = [(old, new) for old, new in zip(before, after) if old != new]
    assert len(after) == 9 and len(changed) == 1
    (old, new), = changed
    assert (new[0], new[1], new[3]) == (old[0], old[1], old[3])  # same id, url and entry key
    assert (old[2], new[2]) == ("RSS Solutions for Schools and Colleges", "RSS Solutions for Schools & Colleges")


def test_entries_sharing_a_link_are_told_apart_by_title_and_one_left_alone_keeps_its_item(ingest):
    name = "kinder-ru.rss"
    original = (REAL / name).read_bytes()
    _, db = ingest({name: None})
    shared = "http://www.kinder.ru/redir.asp?id=2736"
    both = db.execute("SELECT id, title FROM news WHERE url = ? ORDER BY title", [shared]).fetchall()
    assert len(both) == 2
    # The older of the two entries on that page leaves the feed (our edit): the other's link is its own now.
    start = original.index("<title>&quot;Кто они".encode("koi8-r"))
    start, end = original.rindex(b"<item>", 0, start), original.index(b"</item>", start) + len(b"</item>")
    alone = original[:start] + original[end:]
    reports, db = ingest({name: alone})
    assert reports[name].counts["new"] == 0 and reports[name].counts["updated"] == 0
    assert db.execute("SELECT id, title FROM news WHERE url = ? ORDER BY title", [shared]).fetchall() == both
    # And back again: shared once more, each entry finds its own item.
    reports, db = ingest({name: original})
    assert reports[name].counts["new"] == 0 and reports[name].counts["updated"] == 0
    assert db.execute("SELECT count(*) FROM news WHERE source = ?", [name]).fetchone()[0] == 34


def test_items_stored_under_link_and_title_keys_are_found_again_not_duplicated(ingest, tmp_path):
    # A database file as the rules before left it: the same schema, every guid-less item keyed by link + title.
    db = open_database(tmp_path / "site.db")
    db.executescript(OLD_ROWS.read_text(encoding="utf-8").replace("{realfeeds}", str(REAL)))
    db.close()
    old = {name: sqlite3.connect(tmp_path / "site.db").execute(ROWS, [name]).fetchall() for name in OLD_FEEDS}
    assert sum(len(rows) for rows in old.values()) == 133

    reports, db = ingest({name: None for name in OLD_FEEDS})
    for name in OLD_FEEDS:
        assert reports[name].counts["new"] == 0 and reports[name].counts["updated"] == 0, reports[name].line()
        now = db.execute(ROWS, [name]).fetchall()
        # Every item keeps its id, url and title; the keys of entries whose link is their own are the link's now.
        assert [row[:3] for row in now] == [row[:3] for row in old[name]], name
    changed = {name: sum(1 for a, b in zip(old[name], db.execute(ROWS, [name]).fetchall()) if a[3] != b[3]) for name in OLD_FEEDS}
    # Keys left as they were: entries on a shared link (kinder-ru 2 on one page, godthink 3 untitled on one
    # link), and the items no entry has any more (kinder-ru 1 and debian-udd 3 stored with the site's homepage).
    assert changed == {"info-org-il.rss": 33, "kinder-ru.rss": 32, "godthink-blogsome.rss": 7, "jn-pt.rss": 40,
                       "feedforall-sample.rss": 9, "debian-udd-dashboard.rss": 3}

    # Claimed once, reading again changes nothing.
    db.execute("UPDATE sources SET content_hash = NULL")
    again, db = ingest({name: None for name in OLD_FEEDS})
    assert all(report.counts["new"] == 0 and report.counts["updated"] == 0 for report in again.values())
