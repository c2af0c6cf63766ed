"""Keeping a copy of the news in sync: updated_since, /api/v1/news/removed, and migration 7.

A mirror polls ``/api/v1/news?updated_since=`` and ``/api/v1/news/removed?since=``
with the newest ``updated_at`` and ``removed_at`` it has seen (both bounds are
inclusive), as the OpenAPI document tells it to. After every ingest of a
sequence that adds, edits (title, author, image), expires and brings back
items of real publishers' feeds served by a real HTTP server on 127.0.0.1,
it must hold exactly what a full walk of ``/api/v1/news`` holds.
"""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime, timezone

import pytest
import sqlite_utils

from qsite.config import load_config
from qsite.db.migrations import migrations
from qsite.db.model import NEWS
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import bump_version, open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store.records import Item, item_id
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.goldens import REAL
from tests.support.local_server import Reply

RSS = {"Content-Type": "application/rss+xml"}
GUARDIAN = (REAL / "guardian-us.rss").read_bytes()
#: Small pages, so every poll and walk follows cursors.
PAGE = 7


class Mirror:
    """A consumer's copy of the news, kept by polling only what changed."""

    def __init__(self):
        self.items: dict[str, dict] = {}
        self.updated_since = "1970-01-01T00:00:00Z"
        self.removed_since = "1970-01-01T00:00:00Z"

    def walk(self, client: ApiClient, url: str):
        while url:
            page = client.get(url).json()
            yield from page["results"]
            url = page["next"]

    def poll(self, client: ApiClient) -> None:
        for item in self.walk(client, f"/api/v1/news?updated_since={self.updated_since}&limit={PAGE}"):
            self.items[item["id"]] = item
            self.updated_since = max(self.updated_since, item["updated_at"])
        for removed in self.walk(client, f"/api/v1/news/removed?since={self.removed_since}&limit={PAGE}"):
            self.items.pop(removed["id"], None)
            self.removed_since = max(self.removed_since, removed["removed_at"])


def everything(client: ApiClient) -> dict[str, dict]:
    return {item["id"]: item for item in Mirror().walk(client, "/api/v1/news?limit=100")}


@pytest.fixture
def site(http_server, make_config):
    """Ingest with the given feeds served and retention, then answer with a fresh API (its own cache) over the same file."""
    served = {"/guardian.rss": GUARDIAN, "/nasa.rss": (REAL / "nasa-breaking-news.rss").read_bytes()}

    def ingest(feeds: dict[str, bytes], retention_days: int | None = None) -> ApiClient:
        served.update(feeds)
        for path, body in served.items():
            http_server.routes[path] = Reply(body=body, headers=RSS)
        sources = [{"name": path.strip("/"), "url": http_server.url(path), "tag": "Science"} for path in served]
        config = make_config(news={"sources": sources, "retention_days": retention_days}, api={"rate_limit": "off"})
        db = open_database(load_config(config).database_path)
        reports = ingest_news(db, load_config(config), parse_workers=0)
        db.close()
        assert all(report.status in ("ok", "warning", "unchanged") for report in reports), [r.line() for r in reports]
        return ApiClient(datasette_for_config(config))

    return ingest


def past(moment: str) -> None:
    """Wait until the clock is past ``moment`` (whole seconds, as stamps are)."""
    while datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") <= moment:
        time.sleep(0.05)  # polls for the event (the stored stamps are whole seconds: the next one must differ)


def edited(body: bytes, *changes: tuple[bytes, bytes]) -> bytes:
    for old, new in changes:
        assert body.count(old) == 1, old
        body = body.replace(old, new)
    return body


def test_a_mirror_polling_updated_since_ends_identical_to_the_news(site):
    mirror = Mirror()
    with site({}) as client:  # the Guardian and NASA: 65 items, first sync
        mirror.poll(client)
        first = everything(client)
        assert len(first) == 65 and mirror.items == first

    title = b"<title>So, how did conservatives like the State of the Union?"
    guardian = edited(
        GUARDIAN,
        (title, title + b" (updated)"),
        (b"<dc:creator>Jason Wilson</dc:creator>", b"<dc:creator>jason@x.org (Jason T. Wilson)</dc:creator>"),
        (b"3000.jpg?w=460&amp;q=55&amp;auto=format&amp;usm=12&amp;fit=max&amp;s=a606a273a90104e57b1e09bc4c0a1e11",
         b"3000.jpg?w=920&amp;q=55"),
    )
    bbc = (REAL / "bbc-news.rss").read_bytes()
    past(mirror.updated_since)  # so that what round one stored is older than anything round two stamps
    with site({"/guardian.rss": guardian, "/bbc.rss": bbc}) as client:  # edits, and 36 new items
        watermark = mirror.updated_since
        sent = list(Mirror().walk(client, f"/api/v1/news?updated_since={watermark}"))
        changed = {item["id"] for item in sent if item["updated_at"] > watermark}
        mirror.poll(client)
        second = everything(client)
        assert len(second) == 101 and mirror.items == second
        edits = {id_ for id_ in first if first[id_] != second[id_]}
        assert len(edits) >= 2 and edits <= changed
        assert any(item["authors"] == ["Jason T. Wilson"] for item in second.values())
        assert any((item["image_url"] or "").endswith("3000.jpg?w=920&q=55") for item in second.values())
        # Unchanged items are not sent again: only the edits and the new ones, and (the bound being
        # inclusive) those stamped in the watermark's own second.
        assert changed == edits | (set(second) - set(first))
        assert {item["updated_at"] for item in sent if item["id"] not in changed} <= {watermark}

    # Retention: everything published before 2022 expires (the Guardian's and NASA's), BBC's stays.
    days = (datetime.now(timezone.utc) - datetime(2022, 1, 1, tzinfo=timezone.utc)).days
    with site({}, retention_days=days) as client:
        mirror.poll(client)
        third = everything(client)
        assert len(third) == 36 and mirror.items == third
        removed = {item["id"] for item in Mirror().walk(client, "/api/v1/news/removed?limit=100")}
        assert removed == set(second) - set(third)

    # Retention off, and the Guardian's feed read again (its bytes changed): its items come back under their ids.
    with site({"/guardian.rss": guardian + b"\n"}) as client:
        mirror.poll(client)
        fourth = everything(client)
        assert len(fourth) == 36 + 55 and mirror.items == fourth
        back = {item["id"] for item in Mirror().walk(client, "/api/v1/news/removed?limit=100")}
        assert back == removed - set(fourth) and len(back) == 10  # NASA's stay removed: its bytes did not change


def test_a_walk_misses_nothing_changed_while_it_pages(site):
    mirror = Mirror()
    with site({}) as client:
        mirror.poll(client)
        first_page = client.get(f"/api/v1/news?updated_since={mirror.updated_since}&limit=3").json()
    assert first_page["next"] and [item["updated_at"] for item in first_page["results"]] == sorted(
        item["updated_at"] for item in first_page["results"]
    )
    # An item the walk has passed and one it has not reached are both edited before its next page.
    passed, ahead = first_page["results"][0], first_page["results"][-1]
    guardian = edited(GUARDIAN, (b"<dc:creator>Jason Wilson</dc:creator>", b"<dc:creator>J. Wilson</dc:creator>"))
    with site({"/guardian.rss": guardian}) as client:
        seen = {item["id"]: item for item in first_page["results"]}
        for item in Mirror().walk(client, first_page["next"]):
            seen[item["id"]] = item
        edited_item = next(item for item in everything(client).values() if item["authors"] == ["J. Wilson"])
        assert seen[edited_item["id"]] == edited_item  # came again at the end of the walk
        assert passed["id"] in seen and ahead["id"] in seen


def test_updated_since_refuses_what_it_cannot_combine_with_and_bad_times(site):
    with site({}) as client:
        # a sync walk is in change order: sort=published_at given with it would be ignored
        for query in ("updated_since=2020-01-01T00:00:00Z&q=trump", "updated_since=2020-01-01T00:00:00Z&since=2020-01-01T00:00:00Z",
                      "updated_since=2020-01-01T00:00:00Z&sort=published_at"):
            problem = client.get(f"/api/v1/news?{query}")
            assert problem.status_code == 400
            assert problem.json()["errors"][0]["parameter"] == "updated_since"
            assert "cannot be combined with" in problem.json()["errors"][0]["detail"]
        # the default written out, as clients generated from the OpenAPI document send every default
        assert client.get("/api/v1/news?updated_since=2020-01-01T00:00:00Z&sort=-published_at").status_code == 200
        assert client.get("/api/v1/news?updated_since=yesterday").status_code == 400
        assert client.get("/api/v1/news/removed?since=2020-13-01T00:00:00Z").status_code == 400
        assert client.get("/api/v1/news/removed?cursor=bm9wZQ").status_code == 400
        later = client.get("/api/v1/news?updated_since=2999-01-01T00:00:00Z").json()
        assert (later["count"], later["results"], later["next"]) == (0, [], None)
        tagged = client.get("/api/v1/news?updated_since=1970-01-01T00:00:00Z&tag=industry&limit=100").json()
        assert tagged["results"] == [] and tagged["tag"] == "Industry"


def test_a_cursor_is_refused_by_a_listing_in_another_order(site):
    """A sync walk's cursor on /news read as a time gave page one again, silently; the other way too."""
    with site({}) as client:
        walk_next = client.get("/api/v1/news?updated_since=1970-01-01T00:00:00Z&limit=2").json()["next"]
        news_next = client.get("/api/v1/news?limit=2").json()["next"]
        walk_cursor, news_cursor = walk_next.partition("cursor=")[2], news_next.partition("cursor=")[2]
        for path in (f"/api/v1/news?limit=2&cursor={walk_cursor}",
                     f"/api/v1/news?updated_since=1970-01-01T00:00:00Z&limit=2&cursor={news_cursor}",
                     f"/api/v1/news/removed?cursor={news_cursor}"):
            problem = client.get(path)
            assert problem.status_code == 400, path
            assert problem.json()["errors"][0]["parameter"] == "cursor"
            assert "keep each cursor to the listing it came from" in problem.json()["errors"][0]["detail"]
        assert client.get(walk_next).status_code == client.get(news_next).status_code == 200


def test_migration_7_upgrades_a_database_of_schema_6_in_place(tmp_path, make_config):
    """A database as qsite left it before images, authors and tombstones: rows kept, then filled by the next read."""
    path = tmp_path / "site.db"
    old = sqlite_utils.Database(path)
    migrations.apply(old, stop_before="m007_news_sync")
    old["sources"].insert({"name": "guardian", "url": str(REAL / "guardian-us.rss"), "tag": "Science"})
    old.execute(
        "INSERT INTO news (id, entry_key, url, title, summary, source, tag, published_at, first_seen_at, updated_at) "
        "VALUES ('a' || hex(randomblob(15)), 'k1', 'https://www.theguardian.com/old', 'Old', 'Kept', 'guardian', 'Science', "
        "'2018-01-01T00:00:00Z', '2018-01-02T00:00:00Z', '2018-01-03T00:00:00Z')"
    )
    before = old.execute("SELECT rowid, * FROM news").fetchall()
    old.close()
    assert "image_url" not in [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(news)")]

    db = open_database(path)
    assert migrations.pending(db) == []
    columns = [row[1] for row in db.execute("PRAGMA table_info(news)")]
    assert db.execute(f"SELECT rowid, {', '.join(columns[:-3])} FROM news").fetchall() == before
    assert db.execute("SELECT image_url, authors FROM news").fetchall() == [(None, "[]")]
    assert {"news_updated"} <= {row[1] for row in db.execute("PRAGMA index_list(news)")}
    assert db.execute("SELECT DISTINCT change_key FROM news").fetchall() == [("2018-01-03T00:00:00Z#000000000",)]
    plan = [row[3] for row in db.execute("EXPLAIN QUERY PLAN SELECT id FROM news WHERE change_key >= ? ORDER BY change_key, id", ["x"])]
    assert any("USING COVERING INDEX news_updated" in step for step in plan), plan
    db.close()

    config = load_config(make_config(news={"sources": [{"name": "guardian", "url": str(REAL / "guardian-us.rss"), "tag": "Science"}]}))
    db = open_database(path)
    assert ingest_news(db, config, parse_workers=0)[0].status == "ok"
    images = db.execute("SELECT count(*) FROM news WHERE image_url LIKE 'https://i.guim.co.uk/%'").fetchone()[0]
    assert images == 55
    authors = json.loads(db.execute("SELECT authors FROM news WHERE title LIKE 'Trump%' LIMIT 1").fetchone()[0])
    assert authors and all("@" not in name for name in authors)
    # The old row is untouched (no entry of the feed is it) and has no tombstone; deleting it leaves one.
    assert db.execute("SELECT updated_at FROM news WHERE url = 'https://www.theguardian.com/old'").fetchone()[0] == "2018-01-03T00:00:00Z"
    assert db.execute("SELECT count(*) FROM news_removed").fetchone()[0] == 0
    db.close()


def test_a_change_within_the_second_a_walk_has_reached_still_comes_after_it(make_config):
    """Times are whole seconds, so many changes share one: the walk's order (change_key) still puts a later one last.

    Every item here is stamped in the same second (a stored change far ahead
    of the clock: a stamp never goes back past one). The walk passes the item
    with the smallest id, that item is edited within the same second, and the
    rest of the walk must bring it again.
    """
    config = make_config(api={"rate_limit": "off"})
    db = open_database(load_config(config).database_path)
    items = [(item_id(f"https://same.example/{n}"), Item(f"k{n}", f"https://same.example/{n}", f"Title {n}", "", "Science",
                                                          "2026-11-20T08:00:00Z", True)) for n in range(5)]
    second = "2999-01-01T00:00:00Z"
    with transaction(db):
        db["sources"].insert({"name": "Same", "url": "https://same.example/feed", "tag": "Science"})
        news_store.insert_items(db, "Same", items, "2026-11-20T08:00:00Z")
        db.execute("UPDATE news SET updated_at = ?, change_key = ? || '#000000000'", [second, second])
        bump_version(db, NEWS, "2026-11-20T08:00:00Z")
    with ApiClient(datasette_for_config(config)) as client:
        first_page = client.get(f"/api/v1/news?updated_since={second}&limit=2").json()
    passed = first_page["results"][0]
    assert passed["id"] == min(id_ for id_, _ in items) and first_page["next"]
    edit = next(item for id_, item in items if id_ == passed["id"])._replace(title="Edited")
    with transaction(db):
        news_store.update_items(db, [(passed["id"], edit, edit.published_at)])
        bump_version(db, NEWS, "2026-11-20T08:00:01Z")
    db.close()
    with ApiClient(datasette_for_config(config)) as client:
        rest = list(Mirror().walk(client, first_page["next"]))
    assert rest[-1]["id"] == passed["id"] and rest[-1]["title"] == "Edited" and rest[-1]["updated_at"] == second
    assert len(rest) == 4
