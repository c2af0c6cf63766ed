"""A feed that failed backs off, and the back-off yields once the feed may be fixed: its file
changed, or the operator asks (``qsite ingest news --now``). Real ``qsite`` runs, a real HTTP
server on 127.0.0.1, a real file."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time

import pytest

from tests.support.feeds import RSS_TYPE
from tests.support.local_server import Reply
from tests.support.paths import FEEDS
from tests.support.processes import run_qsite

pytestmark = pytest.mark.slow


def items_of(database, source: str) -> int:
    with sqlite3.connect(database) as db:
        return db.execute("select count(*) from news where source = ?", (source,)).fetchone()[0]


def test_a_missing_feed_file_created_afterwards_is_read_at_the_next_run(make_config, tmp_path):
    feed = tmp_path / "feeds" / "mine.xml"
    config = make_config(news={"sources": [{"name": "Mine", "url": str(feed), "tag": "science"}]})
    first = run_qsite("ingest", "news", "--config", str(config))
    assert first.returncode == 1 and "news Mine: failed" in first.stdout, first.stdout + first.stderr
    # still missing: the next run waits out the back-off, as before
    waiting = run_qsite("ingest", "news", "--config", str(config))
    assert waiting.returncode == 0 and "news Mine: skipped: backing off until" in waiting.stdout, waiting.stdout
    time.sleep(1.1)  # a modification time a whole second after the failed try (stored times are to the second)
    feed.parent.mkdir()
    shutil.copy(FEEDS / "lab-notes.xml", feed)
    os.utime(feed)
    fixed = run_qsite("ingest", "news", "--config", str(config))
    assert fixed.returncode == 0 and "news Mine: ok" in fixed.stdout, fixed.stdout + fixed.stderr
    assert items_of(tmp_path / "site.db", "Mine") > 0


def test_a_feed_fixed_on_its_server_is_fetched_at_once_when_asked_with_now(make_config, tmp_path, http_server):
    http_server.routes["/feed.xml"] = Reply(500, "down for maintenance")
    url = http_server.url("/feed.xml")
    config = make_config(news={"sources": [{"name": "Web", "url": url, "tag": "Industry"}]})
    assert run_qsite("ingest", "news", "--config", str(config)).returncode == 1
    http_server.routes["/feed.xml"] = Reply(200, (FEEDS / "lab-notes.xml").read_bytes(), RSS_TYPE)
    # A URL's content is not known without fetching it: the back-off holds ...
    waiting = run_qsite("ingest", "news", "--config", str(config))
    assert "news Web: skipped: backing off until" in waiting.stdout, waiting.stdout
    assert items_of(tmp_path / "site.db", "Web") == 0
    # ... until the operator asks.
    asked = run_qsite("ingest", "all", "--now", "--config", str(config))
    assert asked.returncode == 0 and "news Web: ok" in asked.stdout, asked.stdout + asked.stderr
    assert items_of(tmp_path / "site.db", "Web") > 0
