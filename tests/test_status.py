"""`qsite status`: the bookkeeping of a known database, as a table and as stable JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from qsite.config import load_config
from qsite.pipeline.ops.status import collect_status, format_status
from qsite.pipeline.store import open_database
from tests.support.feeds import RSS_TYPE, Entry, rss
from tests.support.local_server import Reply

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow


def lab_feed(count: int) -> str:
    entries = [Entry(f"https://lab.example/{n}", f"Story {n}", f"Mon, 0{n + 1} Mar 2025 08:00:00 GMT") for n in range(count)]
    return rss(entries, title="Lab", link="https://lab.example/")


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


@pytest.fixture
def known_db(tmp_path, make_config, http_server, qsite):
    """A database made by real ingests from local feeds, and the config ``qsite status`` then reads.

    Lab Notes is healthy; Busy Feed answered 503 with ``Retry-After: 7200``; Old Feed
    served one item, then 410 Gone (disabled), and has since left the config; New Feed
    was added after the ingests. The site export was ingested once, then failed (HTTP 500).
    """
    http_server.routes["/lab.xml"] = Reply(200, lab_feed(2), RSS_TYPE)
    http_server.routes["/busy.xml"] = Reply(503, "busy", {"Retry-After": "7200"})
    old_fetches = []

    def old(seen):
        old_fetches.append(seen)
        if len(old_fetches) == 1:
            return Reply(200, lab_feed(1).replace("lab.example", "old.example"), RSS_TYPE)
        return Reply(410, "gone")

    http_server.routes["/old.xml"] = old
    http_server.routes["/export.json"] = Reply(500, "down")
    lab = {"name": "Lab Notes", "url": http_server.url("/lab.xml"), "tag": "Science"}
    busy = {"name": "Busy Feed", "url": http_server.url("/busy.xml"), "tag": "Industry"}
    news = {"every": "15m"}
    make_config(news={**news, "sources": [lab, busy, {"name": "Old Feed", "url": http_server.url("/old.xml"), "tag": "Investing"}]})
    for command in (("ingest", "all"), ("ingest", "news")):
        result = qsite(*command, "--config", str(tmp_path / "qsite.yml"))
        assert result.returncode == 1, result.stderr  # Busy Feed, then Old Feed, failed
    assert len(old_fetches) == 2
    config = make_config(
        site_export={"source": http_server.url("/export.json")},
        news={**news, "sources": [lab, {"name": "New Feed", "url": http_server.url("/new.xml"), "tag": "Industry"}, busy]},
    )
    assert qsite("ingest", "site", "--config", str(config)).returncode == 1
    return config


def test_status_json_reports_the_known_database(qsite, known_db, tmp_path, http_server):
    result = qsite("status", "--json", "--config", str(known_db))
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["generated_at"].endswith("Z")
    assert status["database"] == str(tmp_path / "site.db") and status["ingest_running"] is False

    version = status["data_version"]
    # The first ingest changed each dataset once (news once per source with items, in
    # its own transaction); the repeat and the failures changed nothing.
    assert {name: item["version"] for name, item in version["datasets"].items()} == {
        "catalog": 1, "glossary": 1, "news": 2, "totals": 1,
    }
    assert version["version"] == 5
    assert version["changed_at"] == max(item["changed_at"] for item in version["datasets"].values())

    site = status["site_export"]
    assert site["source"] == http_server.url("/export.json")  # as the config gives it
    assert site["every"] == 3600
    run = site["last_run"]
    assert run["status"] == "failed" and "500" in run["error"] and run["counts"] == {}
    assert site["last_success_at"] is not None and site["last_success_at"] <= run["started_at"]
    assert site["fetched_at"] is not None and site["fetched_at"] <= site["last_success_at"]

    totals = status["totals"]
    assert totals["courses"] == 6 and totals["news_items"] == 3
    assert totals["exported_at"].endswith("Z")

    sources = {source["name"]: source for source in status["sources"]}
    assert [source["name"] for source in status["sources"]] == ["Lab Notes", "New Feed", "Busy Feed", "Old Feed"]
    lab, new, busy, old = (sources[name] for name in ("Lab Notes", "New Feed", "Busy Feed", "Old Feed"))

    assert lab["configured"] and not lab["disabled"] and lab["last_status"] == "unchanged"
    assert lab["consecutive_failures"] == 0 and lab["items"] == 2 and lab["last_error"] is None
    # A success leaves no backoff behind: the next fetch is one news interval after the last.
    assert at(lab["next_fetch_at"]) - at(lab["last_fetch_at"]) == timedelta(minutes=15)

    # Retry-After (2 h) is later than the interval (and the first backoff), so it wins.
    assert busy["last_status"] == "failed" and busy["consecutive_failures"] == 1 and "503" in busy["last_error"]
    assert at(busy["next_fetch_at"]) - at(busy["last_fetch_at"]) == timedelta(hours=2)

    assert new == {"name": "New Feed", "url": new["url"], "tag": "Industry", "configured": True, "disabled": False,
                   "last_fetch_at": None, "last_status": None, "last_error": None, "consecutive_failures": 0,
                   "next_fetch_at": None, "items": 0}

    # Disabled by the 410, dropped from the config, its item kept; never fetched again.
    assert not old["configured"] and old["disabled"] and old["last_status"] == "failed"
    assert "410" in old["last_error"] and old["items"] == 1 and old["next_fetch_at"] is None


def test_status_table_is_readable(qsite, known_db):
    result = qsite("status", "--config", str(known_db))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    status = json.loads(qsite("status", "--json", "--config", str(known_db)).stdout)
    assert f"data version    5 (last change {status['data_version']['changed_at']})" in out
    run = status["site_export"]["last_run"]
    assert f"#{run['id']} failed" in out and "HTTP 500" in out
    assert f"last success  {status['site_export']['last_success_at']}" in out
    lines = out.splitlines()
    old = next(line for line in lines if line.startswith("Old Feed"))
    assert "Investing" in old and "failed (disabled) (not in config)" in old and "410" in old
    lab = next(line for line in lines if line.startswith("Lab Notes"))
    sources = {source["name"]: source for source in status["sources"]}
    assert sources["Lab Notes"]["next_fetch_at"] in lab and lab.split()[-1] == "-"  # no error
    assert any(str(status["totals"]["courses"]) in line and str(status["totals"]["slides"]) in line for line in lines)


def test_status_without_a_database_says_so(qsite, make_config, tmp_path):
    result = qsite("status", "--json", "--config", str(make_config()))
    assert result.returncode == 1
    assert "no database yet" in result.stderr and str(tmp_path / "site.db") in result.stderr
    assert not (tmp_path / "site.db").exists()


def test_status_shows_a_running_ingest(qsite, known_db, tmp_path):
    from qsite.pipeline.store.lock import writer_lock

    with writer_lock(tmp_path / "site.db", 0):
        result = qsite("status", "--json", "--config", str(known_db))
    assert json.loads(result.stdout)["ingest_running"] is True


def test_status_table_is_framed_on_a_terminal_and_plain_when_piped(known_db):
    config = load_config(known_db)
    db = open_database(config.database_path)
    try:
        status = collect_status(db, config)
    finally:
        db.close()
    framed, plain = format_status(status, framed=True), format_status(status)
    assert "\u256d" in framed and "\u2502 Lab Notes" in framed  # rounded corner, cell border
    assert not any("\u2500" <= char <= "\u257f" for char in plain)  # no box drawing
    # the same cells either way
    assert [line.split()[0] for line in plain.splitlines() if line.startswith(("Lab Notes", "Old Feed"))] == ["Lab", "Old"]
    assert sum("Lab Notes" in line for line in framed.splitlines()) == 1
