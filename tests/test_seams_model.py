"""The invariants of docs/invariants.md, checked as a system: random sequences of feed changes, ingests, time and mirror syncs.

A hypothesis rule-based state machine keeps a model of two publishers' feeds
(entries with or without a guid and a date, titles, fragments on their links),
serves them from a real HTTP server on 127.0.0.1, ingests them through the real
pipeline (``ingest_news``, with the run's time set: time passes by days, and
retention keeps 30 of them) and reads the real API (Datasette with the
plugin). After every step:

- each mirror (kept with ``updated_since`` and ``/news/removed``, with and
  without ``tag`` and ``source``) equals the listing with its filter;
- nothing retention removed comes back unless its publisher dates it inside
  the window;
- one story is one item (one canonical URL, no tracking or navigation fragment);
- the feeds out carry each item's ``updated_at``;
- an ingest in which the database refuses one source's items leaves that source's rows as they
  were, and every source it reported stored is stored (the same feeds again find it unchanged).

``QSITE_SOAK=1`` runs many more and longer sequences.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import feedparser
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from qsite.config import load_config
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import open_database
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.config_files import write_config
from tests.support.local_server import LocalServer, Reply
from tests.support.feeds import rss_items as rss

SOAK = bool(os.environ.get("QSITE_SOAK"))
RSS = {"Content-Type": "application/rss+xml"}
RETENTION_DAYS = 30
SOURCES = ("a.rss", "b.rss")
#: What a publisher may append to a story's link that names no other story.
FRAGMENTS = ("", "#respond", "#comments", "#more-17", "#top", "#xtor=RSS-3208", "#utm_source=rss&utm_medium=feed",
             "#:~:text=qubit")
#: The views mirrored: everything, a tag, a source, a source and a tag.
VIEWS = ("", "tag=Science", "tag=Investing", "source=a.rss", "source=b.rss&tag=Industry")
START = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)


class Mirror:
    def __init__(self, query: str):
        self.query, self.items = query, {}
        self.updated_since = self.removed_since = "1970-01-01T00:00:00Z"

    def sync(self, client: ApiClient) -> None:
        for item in walk(client, f"/api/v1/news?updated_since={self.updated_since}&limit=4&{self.query}"):
            self.items[item["id"]] = item
            self.updated_since = max(self.updated_since, item["updated_at"])
        for removed in walk(client, f"/api/v1/news/removed?since={self.removed_since}&limit=4&{self.query}"):
            self.items.pop(removed["id"], None)
            self.removed_since = max(self.removed_since, removed["removed_at"])


def walk(client: ApiClient, url: str) -> list[dict]:
    found = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, (url, response.text)
        page = response.json()
        found += page["results"]
        url = page["next"]
    return found


def listing(client: ApiClient, query: str = "") -> dict[str, dict]:
    return {item["id"]: item for item in walk(client, f"/api/v1/news?limit=5&{query}")}


class Seams(RuleBasedStateMachine):
    """Two publishers' feeds, the pipeline and the API, and mirrors of several views."""

    @initialize()
    def start(self):
        self.folder = Path(tempfile.mkdtemp(prefix="qsite-seams-"))
        self.server = LocalServer()
        self.now = START
        #: Per source, its entries in feed order: dicts of story, link, title, guid, guid version, date, fragment.
        self.feeds = {name: [] for name in SOURCES}
        self.tag_b = "Science"
        self.stories = 0
        self.mirrors = [Mirror(view) for view in VIEWS]
        #: Every id /news/removed ever listed, and the story of every id seen.
        self.removed: set[str] = set()
        #: The ids the last check listed.
        self.listed: set[str] = set()
        for source in SOURCES:  # the API answers 503 until there is data
            self.new_entry(source, guid=True, dated=True, hours=1, fragment="")

    def teardown(self):
        if hasattr(self, "server"):
            self.server.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- the publishers ------------------------------------------------------------------------

    def entries(self):
        return [(name, i) for name in SOURCES for i in range(len(self.feeds[name]))]

    @rule(source=st.sampled_from(SOURCES), guid=st.booleans(), dated=st.booleans(), hours=st.integers(0, 72),
          fragment=st.sampled_from(FRAGMENTS))
    def new_entry(self, source, guid, dated, hours, fragment):
        self.add_story(source, guid, dated, hours, fragment)
        self.ingest()

    def add_story(self, source, guid, dated, hours, fragment):
        """A new story at the top of ``source``'s feed, ``hours`` before now (undated unless ``dated``)."""
        self.stories += 1
        n = self.stories
        self.feeds[source].insert(0, {
            "story": n, "link": f"https://{source.split('.')[0]}.example/story/{n}", "title": f"Story {n}",
            "guid": f"http://{source}/?p={n}" if guid else None, "date": self.now - timedelta(hours=hours) if dated else None,
            "fragment": fragment,
        })

    @rule(refused=st.sampled_from(SOURCES), how=st.sampled_from(("ABORT", "ROLLBACK")), data=st.data())
    def new_entries_refused(self, refused, how, data):
        """A new story in each feed, and an ingest in which the database refuses one source's items (a
        statement, or the whole transaction its batch shares with the other source)."""
        for source in SOURCES:
            self.add_story(source, data.draw(st.booleans()), True, data.draw(st.integers(0, 72)), "")
        self.ingest((refused, how))

    def entry(self, data):
        name, i = data.draw(st.sampled_from(self.entries()))
        return self.feeds[name][i]

    @precondition(lambda self: self.entries())
    @rule(data=st.data())
    def edit_title(self, data):
        entry = self.entry(data)
        entry["title"] += " (corrected)"
        self.ingest()

    @precondition(lambda self: self.entries())
    @rule(data=st.data())
    def retag(self, data):
        """A title about markets: the rule of a.rss and b.rss tags it Investing."""
        entry = self.entry(data)
        entry["title"] = entry["title"].replace(" - Markets", "") if "Markets" in entry["title"] else entry["title"] + " - Markets"
        self.ingest()

    @precondition(lambda self: self.entries())
    @rule(data=st.data())
    def undate(self, data):
        self.entry(data)["date"] = None
        self.ingest()

    @precondition(lambda self: self.entries())
    @rule(data=st.data(), hours=st.integers(0, 24 * 45))
    def redate(self, data, hours):
        self.entry(data)["date"] = self.now - timedelta(hours=hours)
        self.ingest()

    @precondition(lambda self: any(entry["guid"] for name in SOURCES for entry in self.feeds[name]))
    @rule(data=st.data())
    def change_guid(self, data):
        """WordPress moving to https, or a feed service re-issuing its ids: the link and title stay."""
        entry = data.draw(st.sampled_from([e for name in SOURCES for e in self.feeds[name] if e["guid"]]))
        entry["guid"] = entry["guid"].replace("http://", "https://") if entry["guid"].startswith("http://") else entry["guid"] + "-reissued"
        self.ingest()

    @precondition(lambda self: self.entries())
    @rule(data=st.data(), fragment=st.sampled_from(FRAGMENTS))
    def change_fragment(self, data, fragment):
        self.entry(data)["fragment"] = fragment
        self.ingest()

    @precondition(lambda self: self.entries())
    @rule(data=st.data())
    def drop(self, data):
        name, i = data.draw(st.sampled_from(self.entries()))
        del self.feeds[name][i]
        self.ingest()

    @rule()
    def retag_source(self):
        self.tag_b = "Industry" if self.tag_b == "Science" else "Science"
        self.ingest()

    @rule(days=st.integers(1, 40))
    def time_passes(self, days):
        self.now += timedelta(days=days)
        self.ingest()

    # -- qsite ---------------------------------------------------------------------------------

    def config(self) -> Path:
        sources = []
        for name in SOURCES:
            body = rss(*[
                {"link": e["link"] + e["fragment"], "title": e["title"], "guid": e["guid"], "date": e["date"]}
                for e in self.feeds[name]
            ])
            self.server.routes["/" + name] = Reply(body=body, headers=RSS)
            sources.append({"name": name, "url": self.server.url("/" + name), "tag": "Science" if name == "a.rss" else self.tag_b,
                            "rules": [{"match": "Markets", "tag": "Investing"}]})
        return write_config(self.folder, news={"sources": sources, "retention_days": RETENTION_DAYS}, api={"rate_limit": "off"})

    def ingest(self, refused: tuple[str, str] | None = None):
        """Ingest the feeds as they are; with ``refused`` (a source, ``ABORT`` or ``ROLLBACK``), the database
        refuses that source's new and changed items, which must leave its rows as they were and cost the
        other source nothing."""
        config = self.config()
        db = open_database(load_config(config).database_path)
        try:
            if refused:
                source, how = refused
                rows_before = db.execute("SELECT * FROM news WHERE source = ? ORDER BY id", [source]).fetchall()
                for event in ("INSERT", "UPDATE"):  # the model's own source names: no quoting needed
                    db.execute(f"CREATE TRIGGER refuse_{event.lower()} BEFORE {event} ON news WHEN NEW.source = '{source}'"
                               f" BEGIN SELECT RAISE({how}, 'refused by the model'); END")
            reports = ingest_news(db, load_config(config), parse_workers=0, now=self.now)
            if refused:
                failed = [report for report in reports if report.failed]
                assert all(report.source == source and "refused by the model" in report.error for report in failed), failed
                if failed:
                    assert db.execute("SELECT * FROM news WHERE source = ? ORDER BY id", [source]).fetchall() == rows_before
                db.execute("DROP TRIGGER refuse_insert")
                db.execute("DROP TRIGGER refuse_update")
                # what was reported stored is stored: the same feeds again find the other source unchanged
                stored = {report.source for report in reports if report.status in ("ok", "warning")}
                again = ingest_news(db, load_config(config), parse_workers=0, now=self.now)
                assert all(report.status == "unchanged" for report in again if report.source in stored), [r.line() for r in again]
        finally:
            db.close()
        assert all(report.status in ("ok", "warning", "unchanged") for report in reports if not refused or report.source != refused[0]), [
            r.line() for r in reports]
        self.client = ApiClient(datasette_for_config(config))
        self.check()

    @precondition(lambda self: hasattr(self, "client"))
    @rule(which=st.sets(st.sampled_from(range(len(VIEWS))), min_size=1))
    def sync_mirrors(self, which):
        """Some mirrors catch up (the others lag behind, over several changes)."""
        for i in sorted(which):
            mirror = self.mirrors[i]
            mirror.sync(self.client)
            assert mirror.items == listing(self.client, mirror.query), mirror.query

    # -- the invariants ------------------------------------------------------------------------

    def check(self):
        client = self.client
        items = listing(client)
        cutoff = (self.now - timedelta(days=RETENTION_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
        stories = {}
        for name in SOURCES:
            for entry in self.feeds[name]:
                stories[entry["link"]] = entry
        # one story is one item, at its link without the fragment
        urls = [item["url"] for item in items.values()]
        assert len(urls) == len(set(urls)), sorted(urls)
        assert all("#" not in url for url in urls), urls
        # nothing removed comes back, unless its publisher dated it inside the window
        self.removed |= {item["id"] for item in walk(client, "/api/v1/news/removed?limit=20")}
        for id_ in (set(items) & self.removed) - self.listed:
            entry = stories.get(items[id_]["url"])
            assert entry is not None and entry["date"] is not None, items[id_]
            assert entry["date"].strftime("%Y-%m-%dT%H:%M:%SZ") >= cutoff, items[id_]
        self.listed = set(items)
        # the feeds out carry each item's updated_at
        shown = client.get("/api/v1/news?limit=50").json()["results"]
        atom = feedparser.parse(client.get("/api/v1/news.atom?limit=50").content).entries
        assert [datetime(*entry.updated_parsed[:6]).strftime("%Y-%m-%dT%H:%M:%SZ") for entry in atom] == [
            item["updated_at"] for item in shown]
        document = json.loads(client.get("/api/v1/news.json?limit=50").content)
        assert [item["date_modified"] for item in document["items"]] == [item["updated_at"] for item in shown]


Seams.TestCase.settings = settings(
    max_examples=200 if SOAK else 6,
    stateful_step_count=60 if SOAK else 10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSeams = Seams.TestCase
