"""Where the parts meet, by example: identity, retention, filtered mirrors and the feeds out.

Each case runs the real ``qsite ingest news`` on feeds served by a real HTTP
server on 127.0.0.1, and reads what the API answers (docs/invariants.md
states each invariant; ``tests/test_seams_model.py`` checks them over random
sequences).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone

import feedparser
import pytest
import yaml

from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.feeds import rss_items as rss
from tests.support.local_server import Reply

RSS = {"Content-Type": "application/rss+xml"}


@pytest.fixture
def news(http_server, make_config, qsite):
    """``news(feeds, **news_settings)``: serve ``feeds`` (path: body), run ``qsite ingest news``, return an API client."""

    def ingest(feeds: dict[str, bytes], sources: list[dict] | None = None, **settings) -> ApiClient:
        for path, body in feeds.items():
            http_server.routes[path] = Reply(body=body, headers=RSS)
        sources = sources or [{"name": path.strip("/"), "url": http_server.url(path), "tag": "Science"} for path in feeds]
        for source in sources:
            source.setdefault("url", http_server.url("/" + source["name"]))
            source.setdefault("tag", "Science")
        config = make_config(news={"sources": sources, **settings}, api={"rate_limit": "off"})
        done = qsite("ingest", "news", "--config", str(config))
        assert done.returncode == 0, done.stderr
        ingest.config = config
        return ApiClient(datasette_for_config(config))

    return ingest


def listing(client: ApiClient, query: str = "") -> dict[str, dict]:
    found, url = {}, f"/api/v1/news?limit=100&{query}"
    while url:
        page = client.get(url).json()
        found.update((item["id"], item) for item in page["results"])
        url = page["next"]
    return found


def walk(client: ApiClient, url: str) -> list[dict]:
    found = []
    while url:
        page = client.get(url).json()
        found += page["results"]
        url = page["next"]
    return found


NOW = datetime.now(timezone.utc).replace(microsecond=0)


def test_a_changed_guid_keeps_one_item(news):
    """WordPress moving http://site/?p=1 to https://site/?p=1: the link and title stay, so the item does."""
    story = {"link": "https://site.example/story", "title": "A story", "date": NOW - timedelta(hours=1)}
    with news({"/wp.rss": rss({**story, "guid": "http://site.example/?p=1"})}) as client:
        (first,) = listing(client).values()
    with news({"/wp.rss": rss({**story, "guid": "https://site.example/?p=1"})}) as client:
        assert list(listing(client)) == [first["id"]]
    # an edited title under the new guid is still an edit of that item, not a second one
    with news({"/wp.rss": rss({**story, "guid": "https://site.example/?p=1", "title": "A story, corrected"})}) as client:
        (item,) = listing(client).values()
        assert (item["id"], item["title"]) == (first["id"], "A story, corrected")


def test_entries_sharing_a_link_in_one_document_stay_apart_when_their_guids_change(news):
    """The podcast rule: episodes on the show's page are each their own item, whatever happens to their guids."""
    episodes = [{"link": "https://pod.example/show", "title": "Episode", "guid": f"ep-{n}", "date": NOW - timedelta(hours=n)}
                for n in (1, 2)]
    with news({"/pod.rss": rss(*episodes)}) as client:
        assert len(listing(client)) == 2


def age_items(config_path, days: int) -> None:
    """Time passing: every stored item's dates moved ``days`` back, as if it had been stored that long ago."""
    database = yaml.safe_load(open(config_path, encoding="utf-8"))["database"]
    with sqlite3.connect(database) as db:
        db.execute(
            "UPDATE news SET published_at = strftime('%Y-%m-%dT%H:%M:%SZ', published_at, ?),"
            " first_seen_at = strftime('%Y-%m-%dT%H:%M:%SZ', first_seen_at, ?)",
            [f"-{days} days", f"-{days} days"],
        )
    db.close()


def test_an_undated_item_removed_by_retention_stays_removed_while_listed(news):
    undated = {"link": "https://site.example/undated", "title": "Undated"}
    with news({"/f.rss": rss(undated)}) as client:
        (stored,) = listing(client)
    age_items(news.config, 40)  # stamped when first seen, 40 days ago
    with news({"/f.rss": rss(undated)}, retention_days=30) as client:
        assert listing(client) == {}
        assert [item["id"] for item in walk(client, "/api/v1/news/removed?limit=100")] == [stored]
    # The feed changes (a new entry) and still lists the undated one: it stays removed.
    fresh = {"link": "https://site.example/fresh", "title": "Fresh", "date": NOW - timedelta(minutes=5)}
    with news({"/f.rss": rss(fresh, undated)}, retention_days=30) as client:
        assert [item["title"] for item in listing(client).values()] == ["Fresh"]
        assert [item["id"] for item in walk(client, "/api/v1/news/removed?limit=100")] == [stored]
    with news({"/f.rss": rss(undated, fresh)}, retention_days=30) as client:  # and again, in another order
        assert [item["title"] for item in listing(client).values()] == ["Fresh"]
    # Given a date inside the window by its publisher, it comes back, under its id.
    with news({"/f.rss": rss(fresh, {**undated, "date": NOW - timedelta(minutes=1)})}, retention_days=30) as client:
        back = {item["title"]: item["id"] for item in listing(client).values()}
        assert back == {"Fresh": back["Fresh"], "Undated": stored}
        assert walk(client, "/api/v1/news/removed?limit=100") == []


class Mirror:
    """A copy of one filtered view, kept by updated_since and /news/removed with the same filter."""

    def __init__(self, query: str = ""):
        self.query, self.items = query, {}
        self.updated_since = self.removed_since = "1970-01-01T00:00:00Z"

    def sync(self, client: ApiClient) -> None:
        for item in walk(client, f"/api/v1/news?updated_since={self.updated_since}&limit=3&{self.query}"):
            self.items[item["id"]] = item
            self.updated_since = max(self.updated_since, item["updated_at"])
        for removed in walk(client, f"/api/v1/news/removed?since={self.removed_since}&limit=3&{self.query}"):
            self.items.pop(removed["id"], None)
            self.removed_since = max(self.removed_since, removed["removed_at"])


def test_a_filtered_mirror_learns_that_items_left_its_filter(news):
    entries = [{"link": f"https://site.example/{n}", "title": f"Story {n}", "date": NOW - timedelta(hours=n)} for n in range(1, 6)]
    other = [{"link": f"https://other.example/{n}", "title": f"Other {n}", "date": NOW - timedelta(hours=n)} for n in range(1, 3)]
    feeds = {"/a.rss": rss(*entries), "/b.rss": rss(*other)}
    mirrors = [Mirror(), Mirror("tag=Science"), Mirror("tag=Investing"), Mirror("source=a.rss"),
               Mirror("source=a.rss&tag=Science"), Mirror("source=a.rss&source=b.rss&tag=Investing")]

    def check(client):
        for mirror in mirrors:
            mirror.sync(client)
            assert mirror.items == listing(client, mirror.query), mirror.query

    with news(feeds) as client:
        check(client)
    # Stories 1 and 2 are re-tagged by a rule; then source a's tag changes: everything of a leaves Science.
    rules = [{"match": "Story [12]", "tag": "Investing"}]
    with news(feeds, sources=[{"name": "a.rss", "rules": rules}, {"name": "b.rss"}]) as client:
        assert {item["title"] for item in listing(client, "tag=Investing").values()} == {"Story 1", "Story 2"}
        check(client)
    with news(feeds, sources=[{"name": "a.rss", "tag": "Industry"}, {"name": "b.rss"}]) as client:
        assert listing(client, "tag=Science&source=a.rss") == {}
        check(client)
    # Back into Science: the mirrors of Science get them again, and no stale removal drops them.
    with news(feeds) as client:
        check(client)
        assert len(mirrors[1].items) == 7


def test_the_feeds_out_carry_when_an_item_was_last_changed(news):
    story = {"link": "https://site.example/story", "title": "A story", "date": NOW - timedelta(days=3), "guid": "s"}
    with news({"/f.rss": rss(story)}):
        pass
    with news({"/f.rss": rss({**story, "title": "A story, corrected"})}) as client:
        (item,) = listing(client).values()
        assert item["updated_at"] > item["published_at"]
        entry = feedparser.parse(client.get("/api/v1/news.atom").content).entries[0]
        stamp = datetime(*entry.updated_parsed[:6], tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert stamp == item["updated_at"]
        (json_item,) = json.loads(client.get("/api/v1/news.json").content)["items"]
        assert json_item["date_modified"] == item["updated_at"] and json_item["date_published"] == item["published_at"]


@pytest.mark.parametrize(
    "fragment",
    ["#xtor=RSS-3208", "#utm_source=rss&utm_medium=feed", "#respond", "#comments", "#more-1234", "#top",
     "#:~:text=quantum%20error"],
)
def test_a_tracking_or_navigation_fragment_makes_no_second_item(news, fragment):
    plain = {"link": "https://site.example/post", "title": "A post", "date": NOW - timedelta(hours=1)}
    with news({"/f.rss": rss(plain), "/g.rss": rss({**plain, "link": plain["link"] + fragment})}) as client:
        (item,) = listing(client).values()
        assert item["url"] == "https://site.example/post"


def test_fragments_that_tell_posts_of_one_page_apart_stay(news):
    day = [{"link": f"https://links.example/2026/11/28#p{n}", "title": f"Link {n}", "date": NOW - timedelta(hours=n)}
           for n in (1, 2)]
    with news({"/f.rss": rss(*day)}) as client:
        assert sorted(item["url"] for item in listing(client).values()) == [
            "https://links.example/2026/11/28#p1", "https://links.example/2026/11/28#p2"]
