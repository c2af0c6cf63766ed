"""SIGKILL during ingest, again and again: nothing committed is lost and everything recovers.

A zygote process (``tests/crash_child.py``) forks children that ingest for
ever: the site export alternating between two versions, then news feeds that
grow on every fetch, all under the writer lock. Each child is SIGKILLed at a
random moment. After every kill: the database passes ``PRAGMA
integrity_check``, every news item committed before the kill is still there,
the catalog is exactly one of the two exports (never a mix), a real
``qsite serve`` running all along still answers, and the next ingest (which
must get the writer lock a dead process held) completes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from qsite.config import load_config
from qsite.pipeline.store.lock import writer_lock
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.site.ingest import ingest_site
from qsite.pipeline.store import open_database
from qsite.pipeline.store.runs import start_run
from tests.support.feeds import growing_feed
from tests.support.processes import qsite_serve, wait_until
from tests.support.site_exports import configs_for_both_exports
from tests.support.snapshot import snapshot

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOAK = bool(os.environ.get("QSITE_SOAK"))
KILLS = 200 if SOAK else 22
FEEDS = 4
#: Items per feed response; each fetch slides the window on by NEW_PER_FETCH new items.
WINDOW = 100
NEW_PER_FETCH = 25
#: The random kill moment, in seconds after the child is forked.
KILL_WITHIN = 0.6

#: Figures of the last run, for the README.
FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "crash.json"


def catalog(conn) -> list:
    return conn.execute("SELECT id, title FROM courses ORDER BY position").fetchall()


def committed_news(path: Path) -> set[str]:
    """The ids of the news items committed right now."""
    return {row[0] for row in snapshot(path, ["news"], columns="id")["news"]}


def test_sigkill_at_random_points_loses_nothing(make_config, http_server, tmp_path, sample_export):
    rand = random.Random(int(os.environ.get("QSITE_SEED", time.time())))
    sources = []
    for feed in range(FEEDS):
        http_server.routes[f"/feed{feed}.xml"] = growing_feed(f"Feed {feed}", NEW_PER_FETCH, window=WINDOW)
        sources.append({"name": f"Feed {feed}", "url": http_server.url(f"/feed{feed}.xml"), "tag": "Science"})
    # Export B: a course fewer and retitled, so a mix of A and B is detectable.
    news = {"every": "1s", "sources": sources}
    api = {"rate_limit": "off"}  # the checks after 200 kills would pass any fair-use limit
    config_a, config_b, _ = configs_for_both_exports(make_config, tmp_path, sample_export, news=news, api=api)
    config = load_config(config_a)
    db_path = config.database_path

    db = open_database(db_path)
    assert not ingest_site(db, config).failed
    catalog_a = catalog(db.conn)
    assert not ingest_site(db, load_config(config_b)).failed
    catalog_b = catalog(db.conn)
    assert catalog_a != catalog_b
    assert all(not r.failed for r in ingest_news(db, config, parse_workers=0))
    db.close()

    zygote = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("crash_child.py")), str(config_a), str(config_b)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "children.log", "wb"),
        text=True,
        cwd=tmp_path,
    )
    survived, delays, lost, progress = 0, [], [], []
    try:
        with qsite_serve(config_a, tmp_path / "serve.log") as served:
            for _ in range(KILLS):
                zygote.stdin.write("go\n")
                zygote.stdin.flush()
                pid = int(zygote.stdout.readline())
                delay = rand.uniform(0, KILL_WITHIN)
                time.sleep(delay)  # review: a kill at a random moment of the ingest is the test (fault injection), not a wait
                committed = committed_news(db_path)
                os.kill(pid, signal.SIGKILL)
                delays.append(delay)
                assert wait_until(lambda: _gone(pid), 5, interval=0.005), f"child {pid} still alive 5 s after SIGKILL"

                conn = sqlite3.connect(db_path, timeout=10)
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                present = {row[0] for row in conn.execute("SELECT id FROM news")}
                lost.append(len(committed - present))
                assert committed <= present, f"{len(committed - present)} committed items lost after a kill at {delay:.3f} s"
                assert catalog(conn) in (catalog_a, catalog_b), "catalog is a mix of two exports"
                totals = conn.execute("SELECT courses FROM site_totals").fetchone()[0]
                assert totals == len(catalog(conn))
                conn.close()

                for path in ("/api/v1/stats", "/api/v1/news?limit=5", "/api/v1/courses"):
                    response = httpx.get(served.url(path), timeout=10)
                    assert response.status_code == 200, (path, response.status_code, response.text[:300])

                # The next ingest: the dead child's writer lock must be free.
                config = load_config(rand.choice([config_a, config_b]))
                with writer_lock(db_path, 5):
                    db = open_database(db_path)
                    site = ingest_site(db, config)
                    reports = ingest_news(db, config, parse_workers=0)
                    count = db.execute("SELECT count(*) FROM news").fetchone()[0]
                    db.close()
                assert not site.failed, site.line()
                assert all(not r.failed for r in reports), [r.line() for r in reports]
                assert count > len(present)  # the feeds grew, and this ingest stored it
                progress.append(count)
                survived += 1
    finally:
        zygote.stdin.close()
        zygote.wait(10)
    conn = sqlite3.connect(db_path)
    interrupted = conn.execute("SELECT count(*) FROM ingest_runs WHERE status = 'running'").fetchone()[0]
    conn.close()
    assert survived == KILLS
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps({
        "kills": KILLS, "survived": survived, "items_lost": sum(lost), "news_items_at_end": progress[-1],
        "kill_delay_s": [round(min(delays), 3), round(max(delays), 3)], "runs_left_running": interrupted,
    }))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_left_running_by_a_killed_process_is_closed_by_the_next(make_config, tmp_path):
    """A SIGKILLed ingest cannot finish its ingest_runs row; the next run marks it failed."""
    config = load_config(make_config())
    db = open_database(config.database_path)
    stale = start_run(db, "news", "Killed Source")
    assert ingest_site(db, config).status == "ok"
    status, error, finished = db.execute(
        "SELECT status, error, finished_at FROM ingest_runs WHERE id = ?", [stale]
    ).fetchone()
    assert status == "failed" and error.startswith("interrupted") and finished
    assert db.execute("SELECT count(*) FROM ingest_runs WHERE status = 'running'").fetchone()[0] == 0
