"""One rule for undated items (issues 23 and 25): they never pose as the newest news, and never move.

Real ingests from a real HTTP server on 127.0.0.1, the API over the same SQLite file.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

from qsite.config import load_config
from qsite.db.model import format_time
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.news.normalise import parse_time
from qsite.pipeline.store import open_database
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.feeds import Entry, rss
from tests.support.goldens import REAL, load_golden
from tests.support.local_server import Reply


def day(n: int) -> str:
    return format_datetime(datetime(2025, 3, 1, 8, tzinfo=timezone.utc) + timedelta(days=n), usegmt=True)


def ingest(config_path, force: bool = False):
    config = load_config(config_path)
    db = open_database(config.database_path)
    if force:  # read the feed again even if the server says nothing changed
        db.execute("UPDATE sources SET content_hash = NULL, next_fetch_at = NULL, etag = NULL, last_modified = NULL")
    ingest_news(db, config)
    db.close()


def walk(client, url: str) -> tuple[list[str], str | None]:
    page = client.get(url).json()
    return [row["id"] for row in page["results"]], page["next"]


def test_a_date_that_arrives_mid_walk_does_not_repeat_an_item(http_server, make_config):
    http_server.routes["/feed"] = Reply(200, rss([Entry("https://t.example/b", "B", day(2)), Entry("https://t.example/a", "A", day(0))]))
    config_path = make_config(news={"sources": [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]}, api={"rate_limit": "off"})
    ingest(config_path)
    # a later read: a new entry without a date is stamped with the time first seen, the newest of all
    undated = Entry("https://t.example/u", "U", None)
    http_server.routes["/feed"] = Reply(200, rss([undated, Entry("https://t.example/b", "B", day(2)), Entry("https://t.example/a", "A", day(0))]))
    ingest(config_path, force=True)
    with ApiClient(datasette_for_config(config_path)) as client:
        seen, next_url = walk(client, "/api/v1/news?limit=1")
        assert client.get(f"/api/v1/news/{seen[0]}").json()["title"] == "U"
        # the publisher now dates U between A and B: stored before, U's place would move behind the cursor
        dated = Entry("https://t.example/u", "U", day(1))
        http_server.routes["/feed"] = Reply(200, rss([dated, Entry("https://t.example/b", "B", day(2)), Entry("https://t.example/a", "A", day(0))]))
        ingest(config_path, force=True)
        while next_url:
            page, next_url = walk(client, next_url)
            seen += page
        assert len(seen) == len(set(seen)) == 3
        titles = [row["title"] for row in client.get("/api/v1/news").json()["results"]]
        assert titles == ["U", "B", "A"]  # U kept the place it was stored with


def test_a_fresh_start_shows_dated_news_first(http_server, make_config):
    """A feed's first read: its undated backlog sorts below the dated entries around it, not at the ingest time."""
    feed = [Entry("https://t.example/u1", "Undated 1", None), Entry("https://t.example/n", "Newest", day(5)),
            Entry("https://t.example/u2", "Undated 2", None), Entry("https://t.example/m", "Middle", day(3)),
            Entry("https://t.example/o", "Oldest", day(1)), Entry("https://t.example/u3", "Undated 3", None)]
    http_server.routes["/feed"] = Reply(200, rss(feed))
    config_path = make_config(news={"sources": [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]}, api={"rate_limit": "off"})
    ingest(config_path)
    with ApiClient(datasette_for_config(config_path)) as client:
        rows = client.get("/api/v1/news").json()["results"]
        assert rows[0]["title"] in ("Newest", "Undated 1") and rows[0]["published_at"] == "2025-03-06T08:00:00Z"
        assert max(row["published_at"] for row in rows) == "2025-03-06T08:00:00Z"  # nothing stamped with today
    config = load_config(config_path)
    db = open_database(config.database_path)
    # the dashboard's weekly charts count published_at: no item carries the ingest's time
    assert db.execute("SELECT count(*) FROM news WHERE published_at = first_seen_at").fetchone()[0] == 0
    db.close()


def test_placeholder_dates_neither_show_nor_date_their_neighbours(http_server, make_config):
    """Year 1, 1900 (before the web: placeholders), 9999 and 2200 (far ahead), garbage: the time first seen, all of them."""
    dates = [None, "Fri, 31 Dec 9999 00:00:00 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "Mon, 01 Jan 1900 00:00:00 GMT",
             "Mon, 01 Jan 2200 00:00:00 GMT", "not a date at all"]
    feed = [Entry(f"https://t.example/{n}", f"Entry {n}", raw) for n, raw in enumerate(dates)]
    http_server.routes["/feed"] = Reply(200, rss(feed))
    config_path = make_config(news={"sources": [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]}, api={"rate_limit": "off"})
    ingest(config_path)
    db = open_database(load_config(config_path).database_path)
    # Before: 'Year 9999' and the undated one were served as 0001-01-01T00:00:00Z (a first read borrows
    # its neighbours' dates), 'Year 2200' and the garbage as 1900-01-01T00:00:00Z.
    stored = db.execute("SELECT title, published_at, first_seen_at FROM news").fetchall()
    db.close()
    # all undated: the time first seen, a second apart in the feed's order
    assert len(stored) == 6
    for title, published, seen in stored:
        position = int(title.split()[-1])
        assert published == format_time(parse_time(seen) - timedelta(seconds=position))


def test_a_feed_without_dates_keeps_its_order(make_config):
    """heise online's RSS 0.90 (tests/data/realfeeds/heise-online.rdf): 60 items, no dates; served in the feed's order.

    Each had the time first seen, and ties are ordered by id (a hash of the URL): the order was lost.
    """
    feed = REAL / "heise-online.rdf"
    config_path = make_config(news={"sources": [{"name": "heise", "url": str(feed), "tag": "Industry"}]}, api={"rate_limit": "off"})
    ingest(config_path)
    with ApiClient(datasette_for_config(config_path)) as client:
        rows = client.get("/api/v1/news?limit=100").json()["results"]
    golden = load_golden(feed)["items"]
    assert len(golden) == 60 and {item["published_at"] for item in golden} == {"first seen"}
    assert [row["title"] for row in rows] == [item["title"] for item in golden]
    # the newest keeps the time first seen; each below it is a second older
    db = open_database(load_config(config_path).database_path)
    stored = dict(db.execute("SELECT title, published_at FROM news").fetchall())
    seen = db.execute("SELECT DISTINCT first_seen_at FROM news").fetchall()
    db.close()
    assert len(seen) == 1 and stored[golden[0]["title"]] == seen[0][0]
    first = parse_time(seen[0][0])
    assert [stored[item["title"]] for item in golden] == [format_time(first - timedelta(seconds=n)) for n in range(60)]
