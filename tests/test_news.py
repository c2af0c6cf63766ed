"""News ingestion end to end: a real HTTP server on 127.0.0.1, a real SQLite file, the real CLI."""

import json
import os
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from qsite.config import load_config
from qsite.db.model import format_time, utc_now
from qsite.pipeline.fetch import FetchError, fetch_one, parse_retry_after
from qsite.pipeline.news.feeds import MAX_ENTRIES
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.news.normalise import TITLE_MAX, URL_MAX
from qsite.pipeline.news.policy import MAX_BACKOFF, backoff_seconds
from qsite.pipeline.store import open_database
from tests.support.feeds import Entry, rss
from tests.support.goldens import REAL
from tests.support.local_server import Reply
from tests.support.paths import FEEDS

#: Short timeouts so that failure tests take a fraction of a second.
FAST = {"connect_timeout": 1.0, "read_timeout": 0.4, "deadline": 3.0}


def entry(link: str, title: str, published: str | None) -> Entry:
    """An item whose summary is a line of HTML about it."""
    return Entry(link, title, published, f"<p>About {title}.</p>")


def day(n: int) -> str:
    return format_datetime(datetime(2025, 3, 1, 8, tzinfo=timezone.utc) + timedelta(days=n), usegmt=True)


THREE = rss(
    [
        entry("https://t.example/a?utm_source=rss", "Alpha qubits", day(0)),
        entry("https://t.example/b", "Beta raises funding", day(1)),
        entry("https://t.example/c", "Gamma gates", day(2)),
    ]
).encode()


@pytest.fixture
def news(make_config):
    """Ingest with the given sources; returns (reports, db). Sources are dicts as in the YAML."""
    state = {}

    def run(sources=None, parse_workers=None, **news_options):
        if sources is not None or "config" not in state:
            state["config"] = make_config(news={"sources": sources or [], **news_options})
        config = load_config(state["config"])
        db = open_database(config.database_path)
        reports = ingest_news(db, config, client_options=FAST, parse_workers=parse_workers)
        return {report.source: report for report in reports}, db

    return run


def rows(db, sql="SELECT id, url, title, summary, source, tag, published_at, first_seen_at, updated_at FROM news ORDER BY url"):
    return [tuple(row) for row in db.execute(sql).fetchall()]


def source_row(db, name):
    return dict(db.query("SELECT * FROM sources WHERE name = ?", [name]).__next__())


def make_due(db):
    db.execute("UPDATE sources SET next_fetch_at = NULL")


def news_version(db):
    found = db.execute("SELECT version FROM data_versions WHERE dataset = 'news'").fetchone()
    return found[0] if found else 0


def test_a_sweep_that_changed_data_ends_at_a_second_of_its_own(http_server, news):
    """Its commits (one per source) may share a second; its last version's time then moves to a second of its own."""
    http_server.routes.update({f"/{n}.xml": Reply(200, THREE.replace(b"t.example", f"t{n}.example".encode()))
                               for n in range(3)})
    sources = [{"name": f"S{n}", "url": http_server.url(f"/{n}.xml"), "tag": "Science"} for n in range(3)]
    reports, db = news(sources)
    assert [report.status for report in reports.values()] == ["ok"] * 3
    (changed_at,) = db.execute("SELECT changed_at FROM data_versions WHERE dataset = 'news'").fetchone()
    (last_commit,) = db.execute("SELECT max(finished_at) FROM ingest_runs WHERE kind = 'news'").fetchone()
    # three commits, then the last one's time moved past every earlier second (its version stays)
    assert news_version(db) == 3 and last_commit < changed_at <= utc_now()
    make_due(db)
    reports, db = news()  # nothing changed: neither version nor time
    assert [report.status for report in reports.values()] == ["unchanged"] * 3 and news_version(db) == 3
    assert db.execute("SELECT changed_at FROM data_versions WHERE dataset = 'news'").fetchone()[0] == changed_at


def test_200_then_304_with_validators_sent_back_exactly(http_server, news):
    etag, modified = 'W/"feed-v1"', "Sat, 01 Mar 2025 08:00:00 GMT"

    def route(request):
        if request.headers.get("if-none-match") == etag and request.headers.get("if-modified-since") == modified:
            return Reply(304, headers={"ETag": etag})
        return Reply(200, THREE, {"ETag": etag, "Last-Modified": modified, "Content-Type": "application/rss+xml"})

    http_server.routes["/feed"] = route
    sources = [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]
    reports, db = news(sources)
    assert reports["T"].status == "ok" and reports["T"].counts["new"] == 3
    first = rows(db)
    assert [row[1] for row in first] == ["https://t.example/a", "https://t.example/b", "https://t.example/c"]
    version = news_version(db)
    assert version == 1

    reports, db = news()
    assert reports["T"].status == "unchanged"
    second = http_server.requests[-1].headers
    assert second["if-none-match"] == etag and second["if-modified-since"] == modified
    assert rows(db) == first and news_version(db) == version
    assert source_row(db, "T")["last_status"] == "unchanged"
    runs = db.execute("SELECT source, status FROM ingest_runs WHERE kind = 'news' ORDER BY id").fetchall()
    assert [tuple(run) for run in runs] == [("T", "ok"), ("T", "unchanged")]


def test_same_body_is_not_parsed_and_a_change_updates_without_moving_dates(http_server, news):
    http_server.routes["/feed"] = Reply(200, THREE)
    sources = [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]
    _, db = news(sources)
    before = {row[1]: row for row in rows(db)}
    reports, db = news()
    assert reports["T"].status == "unchanged" and news_version(db) == 1

    changed = THREE.replace(b"Gamma gates", b"Gamma gates, corrected").replace(day(2).encode(), day(9).encode())
    http_server.routes["/feed"] = Reply(200, changed)
    reports, db = news()
    assert reports["T"].counts == {"new": 0, "updated": 1, "unchanged": 2, "skipped": 0, "duplicates": 0, "repeated": 0}
    after = {row[1]: row for row in rows(db)}
    gamma_before, gamma = before["https://t.example/c"], after["https://t.example/c"]
    assert gamma[2] == "Gamma gates, corrected"
    assert gamma[6:8] == gamma_before[6:8]  # published_at and first_seen_at never move
    assert after["https://t.example/a"] == before["https://t.example/a"]
    assert news_version(db) == 2


def test_redirect_chain_is_followed_and_more_than_five_fails(http_server, news):
    for hop in range(1, 4):
        http_server.routes[f"/r{hop}"] = Reply(301, headers={"Location": http_server.url(f"/r{hop + 1}")})
    http_server.routes["/r4"] = Reply(200, THREE)
    for hop in range(1, 8):
        http_server.routes[f"/loop{hop}"] = Reply(301, headers={"Location": http_server.url(f"/loop{hop + 1}")})
    http_server.routes["/loop8"] = Reply(200, THREE)
    reports, db = news(
        [
            {"name": "Moved", "url": http_server.url("/r1"), "tag": "Science"},
            {"name": "Too far", "url": http_server.url("/loop1"), "tag": "Industry"},
        ]
    )
    assert reports["Moved"].status == "ok" and reports["Moved"].counts["new"] == 3
    assert reports["Too far"].failed and "redirects" in reports["Too far"].error
    assert db.execute("SELECT count(*) FROM news WHERE source = 'Too far'").fetchone()[0] == 0


FAILURES = {
    "404": (Reply(404, b"gone fishing"), "HTTP 404"),
    "500": (Reply(500, b"oops"), "HTTP 500"),
    "stall": (Reply(200, THREE, stall=1.5), "timed out"),
    "oversize": (Reply(200, THREE + b"<!--" + b"x" * 200_000 + b"-->"), "byte limit"),
    "html": (Reply(200, b"<html><body><h1>Moved</h1></body></html>", {"Content-Type": "text/html"}), "not an RSS or Atom feed"),
    "truncated": (Reply(200, THREE[:150]), "not a readable feed"),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_failing_source_keeps_its_items_and_does_not_stop_others(http_server, make_config, failure):
    reply, message = FAILURES[failure]
    http_server.routes["/bad"] = Reply(200, THREE)
    http_server.routes["/good"] = Reply(200, rss([entry("https://g.example/1", "Good one", day(3))]))
    sources = [
        {"name": "Bad", "url": http_server.url("/bad"), "tag": "Science"},
        {"name": "Good", "url": http_server.url("/good"), "tag": "Industry"},
    ]
    config = load_config(make_config(news={"sources": sources}))
    db = open_database(config.database_path)
    ingest_news(db, config, client_options={**FAST, "max_bytes": 100_000})
    before = rows(db, "SELECT * FROM news WHERE source = 'Bad' ORDER BY id")
    assert len(before) == 3

    http_server.routes["/bad"] = reply
    http_server.routes["/good"] = Reply(200, rss([entry("https://g.example/1", "Good one", day(3)), entry("https://g.example/2", "Good two", day(4))]))
    make_due(db)
    started = datetime.now(timezone.utc).replace(microsecond=0)
    reports = {r.source: r for r in ingest_news(db, config, client_options={**FAST, "max_bytes": 100_000})}

    assert reports["Bad"].failed and message in reports["Bad"].error
    assert reports["Good"].status == "ok" and reports["Good"].counts["new"] == 1
    assert rows(db, "SELECT * FROM news WHERE source = 'Bad' ORDER BY id") == before
    bad = source_row(db, "Bad")
    assert bad["consecutive_failures"] == 1 and bad["last_status"] == "failed" and message in bad["last_error"]
    next_fetch = datetime.strptime(bad["next_fetch_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert timedelta(seconds=890) <= next_fetch - started <= timedelta(seconds=905)  # news.every (15m) for a first failure
    last_run = db.execute("SELECT status, error FROM ingest_runs WHERE source = 'Bad' ORDER BY id DESC").fetchone()
    assert last_run[0] == "failed" and message in last_run[1]


def test_truncated_feed_with_whole_entries_is_a_warning_and_they_land(http_server, news):
    body = THREE[: THREE.index(b"<item><title>Gamma")] + b"<item><title>Gam"
    http_server.routes["/feed"] = Reply(200, body)
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["T"].status == "warning" and not reports["T"].failed and "not well-formed" in reports["T"].error
    assert {"https://t.example/a", "https://t.example/b"} <= {row[1] for row in rows(db)}
    assert source_row(db, "T")["last_status"] == "warning"


@pytest.mark.parametrize("reference", ["&#xD800;", "&#xDFFF;", "&#55296;", "&#x110000;", "&#99999999999;"])
def test_a_reference_to_no_character_is_a_warning_and_the_entries_land(http_server, news, reference):
    # A surrogate or a code point past U+10FFFF: feedparser's lenient parser raised on it, failing the whole feed.
    bad = f"<item><title>a {reference} b</title><link>http://pub.example/1</link></item>".encode()
    body = THREE.replace(b"<item>", bad + b"<item>", 1).replace(b"</channel>", b"<item><title>ok &#x41;&#233;</title><link>http://pub.example/2</link></item></channel>")
    http_server.routes["/feed"] = Reply(200, body)
    reports, db = news([{"name": "S2", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["S2"].status == "warning" and "not well-formed" in reports["S2"].error, reports["S2"].line()
    assert reports["S2"].counts["new"] == 5
    titles = {row[1]: row[2] for row in rows(db)}
    assert titles["http://pub.example/1"] == "a \ufffd b" and titles["http://pub.example/2"] == "ok Aé"  # valid references as written
    assert source_row(db, "S2")["consecutive_failures"] == 0


def test_such_a_reference_as_text_in_cdata_leaves_a_well_formed_feed_ok(http_server, news):
    # In CDATA it is text, no reference: the feed is well-formed and not to be called broken.
    item = "<item><title><![CDATA[Escapes such as &#xD800; name no character]]></title><link>http://pub.example/c</link></item>"
    http_server.routes["/feed"] = Reply(200, THREE.replace(b"<item>", item.encode() + b"<item>", 1))
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["T"].status == "ok", reports["T"].line()
    assert reports["T"].counts["new"] == 4


def test_control_characters_are_never_stored(http_server, news):
    # NUL and U+0001 were stored and served by /api/v1/news/{id}, while news.atom (XML) left them out.
    item = "<item><title>Ctrl &#x1; char</title><description>a&#x0;b</description><link>http://pub.example/c</link></item>"
    http_server.routes["/feed"] = Reply(200, THREE.replace(b"<item>", item.encode() + b"<item>", 1))
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["T"].counts["new"] == 4
    assert db.execute("SELECT title, summary FROM news WHERE url = 'http://pub.example/c'").fetchone() == ("Ctrl char", "ab")


def test_a_long_title_is_cut_and_an_entry_whose_link_is_too_long_is_skipped(http_server, news):
    # A 14 MB title was stored whole (one /news?q= answer was 14 MB), and so was a link of 1,000,017 characters.
    long_title = "<item><title>" + "quantum word " * 100_000 + "</title><link>http://pub.example/t</link></item>"
    long_link = "<item><title>Long link</title><link>http://pub.example/" + "a" * (URL_MAX - len("http://pub.example/") + 1) + "</link></item>"
    longest = "http://pub.example/" + "b" * (URL_MAX - len("http://pub.example/"))
    at_bound = f"<item><title>At the bound</title><link>{longest}</link></item>"
    http_server.routes["/feed"] = Reply(200, THREE.replace(b"<item>", (long_title + long_link + at_bound).encode() + b"<item>", 1))
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["T"].counts["new"] == 5 and reports["T"].counts["skipped"] == reports["T"].counts["skipped_no_link"] == 1
    title = db.execute("SELECT title FROM news WHERE url = 'http://pub.example/t'").fetchone()[0]
    assert len(title) <= TITLE_MAX and title.startswith("quantum word quantum") and title.endswith("word…")
    assert db.execute("SELECT max(length(url)) FROM news").fetchone()[0] == URL_MAX
    assert db.execute("SELECT count(*) FROM news WHERE title = 'Long link'").fetchone()[0] == 0


def test_a_feed_is_read_up_to_its_first_max_entries_and_the_report_says_how_many_were_left_out(http_server, news):
    # 300,000 entries were all stored (104 s, +336 MB), and the next run took 36 s and 985 MB.
    links = [f"http://p.example/{n}" for n in range(MAX_ENTRIES + 7)]
    http_server.routes["/feed"] = Reply(200, rss([Entry(link, f"Story {n}", day(0)) for n, link in enumerate(links)]).encode())
    reports, db = news([{"name": "Many", "url": http_server.url("/feed"), "tag": "Science"}])
    report = reports["Many"]
    assert report.status == "warning" and report.counts["new"] == MAX_ENTRIES
    assert f"lists {MAX_ENTRIES + 7:,} entries; read the first {MAX_ENTRIES:,}, 7 left out" in report.error
    stored = {row[0] for row in db.execute("SELECT url FROM news")}
    assert stored == set(links[:MAX_ENTRIES])  # the first in document order: feeds list the newest first


def test_429_and_503_retry_after_are_honoured(http_server, news):
    http_server.routes["/busy"] = Reply(429, b"slow down", {"Retry-After": "7200"})
    later = format_datetime(datetime.now(timezone.utc) + timedelta(hours=3), usegmt=True)
    http_server.routes["/down"] = Reply(503, b"maintenance", {"Retry-After": later})
    started = datetime.now(timezone.utc)
    reports, db = news(
        [
            {"name": "Busy", "url": http_server.url("/busy"), "tag": "Science"},
            {"name": "Down", "url": http_server.url("/down"), "tag": "Science"},
        ]
    )
    assert reports["Busy"].failed and reports["Down"].failed
    for name, wait in (("Busy", 7200), ("Down", 3 * 3600)):
        next_fetch = datetime.strptime(source_row(db, name)["next_fetch_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert abs((next_fetch - started).total_seconds() - wait) < 10

    served = len(http_server.requests)
    reports, db = news()
    assert reports["Busy"].status == "skipped" and "backing off" in reports["Busy"].error
    assert not reports["Busy"].failed and len(http_server.requests) == served  # not asked again early


def test_an_unreadable_retry_after_is_ignored_and_the_429_kept(http_server, news):
    """``²`` passes ``str.isdigit``: it failed the fetch as "cannot request this URL: ValueError ...", the 429 lost."""
    http_server.routes["/busy"] = Reply(429, b"slow down", {"Retry-After": "\u00b2"})  # sent as the byte 0xb2
    started = datetime.now(timezone.utc)
    reports, db = news([{"name": "Busy", "url": http_server.url("/busy"), "tag": "Science"}])
    assert reports["Busy"].failed and "/busy: HTTP 429 Too Many Requests (failure 1" in reports["Busy"].error, reports["Busy"].error
    next_fetch = datetime.strptime(source_row(db, "Busy")["next_fetch_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((next_fetch - started).total_seconds() - 900) < 10  # the usual backoff: news.every (15m)
    assert [parse_retry_after(value) for value in ("120", " 7 ", "\u00b2", "\u0661\u0662", "1.5", "soon")] == [120, 7, None, None, None, None]


def test_backoff_grows_exponentially_and_caps_at_a_day(http_server, news):
    assert [backoff_seconds(n, 900) for n in (1, 2, 3, 4)] == [900, 1800, 3600, 7200]
    assert backoff_seconds(7, 900) == 57600 and backoff_seconds(8, 900) == MAX_BACKOFF == backoff_seconds(50, 900)
    assert backoff_seconds(1, 900, retry_after=86400 * 7) == MAX_BACKOFF
    assert backoff_seconds(3, 900, retry_after=60) == 3600

    http_server.routes["/feed"] = Reply(500, b"no")
    sources = [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]
    _, db = news(sources)
    for _ in range(3):
        make_due(db)
        started = datetime.now(timezone.utc)
        reports, db = news()
    row = source_row(db, "T")
    assert row["consecutive_failures"] == 4 and row["disabled"] == 0
    next_fetch = datetime.strptime(row["next_fetch_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((next_fetch - started).total_seconds() - 7200) < 10
    assert "failure 4 in a row" in reports["T"].error

    http_server.routes["/feed"] = Reply(200, THREE)
    make_due(db)
    reports, db = news()
    row = source_row(db, "T")
    assert reports["T"].status == "ok" and row["consecutive_failures"] == 0 and row["next_fetch_at"] is None


def test_410_disables_the_source_and_keeps_its_items(http_server, news):
    http_server.routes["/feed"] = Reply(200, THREE)
    sources = [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]
    _, db = news(sources)
    before = rows(db)
    http_server.routes["/feed"] = Reply(410, b"gone")
    reports, db = news()
    assert reports["T"].failed and "disabled" in reports["T"].error
    assert source_row(db, "T")["disabled"] == 1 and rows(db) == before

    served = len(http_server.requests)
    reports, db = news()
    assert reports["T"].status == "disabled" and not reports["T"].failed
    assert len(http_server.requests) == served

    # A new URL in the config gives the source another chance.
    http_server.routes["/new"] = Reply(200, THREE)
    reports, db = news([{"name": "T", "url": http_server.url("/new"), "tag": "Science"}])
    assert reports["T"].status == "ok" and source_row(db, "T")["disabled"] == 0


def test_declared_non_utf8_encoding(http_server, news):
    http_server.routes["/latin1"] = Reply(200, (FEEDS / "capital-brief.rdf").read_bytes(), {"Content-Type": "application/rdf+xml"})
    body = THREE.replace(b'encoding="UTF-8"', b'encoding="windows-1252"').replace(b"Alpha qubits", "Alpha – “qubits” €".encode("cp1252"))
    http_server.routes["/cp1252"] = Reply(200, body, {"Content-Type": "application/rss+xml; charset=windows-1252"})
    reports, db = news(
        [
            {"name": "Brief", "url": http_server.url("/latin1"), "tag": "Investing"},
            {"name": "Win", "url": http_server.url("/cp1252"), "tag": "Science"},
        ]
    )
    assert reports["Brief"].counts["new"] == 21 and reports["Win"].status == "ok"
    titles = {row[2] for row in rows(db)}
    assert "Zürich photonics firm closes CHF 35m Series A" in titles
    assert "Alpha – “qubits” €" in titles


def test_relative_links_resolve_against_the_feed_url(http_server, news):
    http_server.routes["/feeds/rss"] = Reply(200, rss([entry("/posts/1?utm_campaign=x", "One", day(1)), entry("two.html", "Two", day(2))]))
    _, db = news([{"name": "T", "url": http_server.url("/feeds/rss"), "tag": "Science"}])
    assert sorted(row[1] for row in rows(db)) == [http_server.url("/feeds/two.html"), http_server.url("/posts/1")]


@pytest.mark.slow
def test_one_story_in_two_feeds_is_one_item_kept_by_the_first_source(http_server, news):
    story = "https://News.example.org/story/1"
    # The first source answers last: order of answers must not decide who keeps the story.
    http_server.routes["/first"] = Reply(200, rss([entry(story + "?utm_source=first", "Shared story", day(1)), entry("https://f.example/own", "Own", day(2))]), stall=0.2)
    http_server.routes["/second"] = Reply(200, rss([entry(story.replace(".org/", ".org:443/") + "?mc_cid=2", "Shared story (syndicated)", day(1))]))
    reports, db = news(
        [
            {"name": "First", "url": http_server.url("/first"), "tag": "Science"},
            {"name": "Second", "url": http_server.url("/second"), "tag": "Industry"},
        ]
    )
    shared = db.execute("SELECT source, title, tag FROM news WHERE url = ?", ["https://news.example.org/story/1"]).fetchall()
    assert [tuple(row) for row in shared] == [("First", "Shared story", "Science")]
    assert reports["Second"].counts["duplicates"] == 1 and reports["Second"].counts["new"] == 0
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == 2


def test_classification_rules_and_changing_them_retags(http_server, news):
    http_server.routes["/feed"] = lambda request: Reply(304) if request.headers.get("if-none-match") == '"v1"' else Reply(200, THREE, {"ETag": '"v1"'})
    rule = {"match": r"(?i)\b(raises|funding)\b", "tag": "Investing"}
    _, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Industry", "rules": [rule]}])
    assert dict(db.execute("SELECT title, tag FROM news").fetchall()) == {
        "Alpha qubits": "Industry",
        "Beta raises funding": "Investing",
        "Gamma gates": "Industry",
    }
    # Same bytes (and a 304 would be sent), but a new rule: the feed is read again and retagged.
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Industry", "rules": [rule, {"match": "(?i)gates", "tag": "Science"}]}])
    assert reports["T"].counts["updated"] == 1
    assert "if-none-match" not in http_server.requests[-1].headers
    assert db.execute("SELECT tag FROM news WHERE title = 'Gamma gates'").fetchone()[0] == "Science"


def test_future_and_missing_dates_become_first_seen(http_server, news):
    """On a feed's later reads: an entry first seen then appeared since the read before; those first seen together keep the feed's order."""
    http_server.routes["/feed"] = Reply(200, rss([entry("https://t.example/d0", "Already there", day(0))]))
    news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    http_server.routes["/feed"] = Reply(
        200, rss([entry("https://t.example/f", "From the future", "Mon, 07 Jan 2099 09:00:00 GMT"), entry("https://t.example/u", "Undated", None), entry("https://t.example/d", "Dated", day(0))])
    )
    before = datetime.now(timezone.utc).replace(microsecond=0)
    _, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    after = datetime.now(timezone.utc)
    dates = {row[0]: row[1:] for row in db.execute("SELECT title, published_at, first_seen_at FROM news")}
    for position, title in enumerate(("From the future", "Undated")):
        published, first_seen = dates[title]
        seen = datetime.strptime(first_seen, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert before <= seen <= after
        assert published == format_time(seen - timedelta(seconds=position))  # a second apart, newest first
    assert dates["Dated"][0] == "2025-03-01T08:00:00Z"


def test_a_first_read_dates_undated_entries_by_their_neighbours_and_dates_never_move(http_server, news):
    """Fresh start: a backlog's undated entries sort no newer than the dated ones around them; later dates do not move them."""
    feed = [entry("https://t.example/u1", "Undated top", None), entry("https://t.example/n", "Newest", day(3)),
            entry("https://t.example/u2", "Undated middle", None), entry("https://t.example/o", "Oldest", day(0))]
    http_server.routes["/feed"] = Reply(200, rss(feed))
    _, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    dates = dict(db.execute("SELECT title, published_at FROM news"))
    assert dates == {"Undated top": "2025-03-04T08:00:00Z", "Newest": "2025-03-04T08:00:00Z",
                     "Undated middle": "2025-03-01T08:00:00Z", "Oldest": "2025-03-01T08:00:00Z"}
    # the publisher adds the dates later: the items keep their place (a cursor walk never meets them twice)
    feed[0], feed[2] = entry("https://t.example/u1", "Undated top", day(1)), entry("https://t.example/u2", "Undated middle", day(2))
    http_server.routes["/feed"] = Reply(200, rss(feed))
    db.execute("UPDATE sources SET content_hash = NULL, next_fetch_at = NULL, etag = NULL, last_modified = NULL")
    reports, db = news()
    assert dict(db.execute("SELECT title, published_at FROM news")) == dates


def test_retention_prunes_old_items_and_does_not_insert_them(http_server, news):
    now = datetime.now(timezone.utc)
    recent = format_datetime(now - timedelta(days=2), usegmt=True)
    old = format_datetime(now - timedelta(days=40), usegmt=True)
    http_server.routes["/a"] = Reply(200, rss([entry("https://t.example/recent", "Recent", recent), entry("https://t.example/old", "Old", old)]))
    sources = [{"name": "A", "url": http_server.url("/a"), "tag": "Science"}]
    _, db = news(sources)
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == 2

    http_server.routes["/b"] = Reply(200, rss([entry("https://t.example/b-old", "B old", old), entry("https://t.example/b-new", "B new", recent)]))
    reports, db = news(sources + [{"name": "B", "url": http_server.url("/b"), "tag": "Industry"}], retention_days=30)
    assert reports["A"].status == "unchanged"
    assert reports["B"].counts["new"] == 1 and reports["B"].counts["skipped"] == 1
    assert sorted(row[0] for row in db.execute("SELECT title FROM news")) == ["B new", "Recent"]
    assert db.execute("SELECT count(*) FROM news_fts WHERE news_fts MATCH 'old'").fetchone()[0] == 0


def test_entries_without_a_link_are_skipped_and_counted_with_the_reason(http_server, news):
    # The channel's own link (the site's homepage) is never an item: the entry is skipped.
    http_server.routes["/feed"] = Reply(200, THREE.replace(b"<link>https://t.example/b</link>", b""))
    reports, db = news([{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}])
    assert reports["T"].counts["skipped"] == 1 and reports["T"].counts["skipped_no_link"] == 1
    assert reports["T"].counts["new"] == 2 and "skipped_no_link 1" in reports["T"].line()
    assert db.execute("SELECT count(*) FROM news WHERE url = 'https://t.example/'").fetchone()[0] == 0
    (audit,) = db.execute("SELECT counts FROM ingest_runs WHERE source = 'T'").fetchall()
    assert json.loads(audit[0])["skipped_no_link"] == 1


def test_empty_entries_are_no_stories_and_not_skipped_ones(news):
    """PCMag's feed (tests/data/realfeeds/pcmag-dvorak.rss) nests a stray ``<item />`` in each of its 10 items.

    feedparser yields 20 entries, 10 of them empty: reported as ``skipped 10, skipped_no_link 10`` before.
    """
    reports, db = news([{"name": "T", "url": str(REAL / "pcmag-dvorak.rss"), "tag": "Science"}])
    counts = reports["T"].counts
    assert counts["new"] == 10 and counts["skipped"] == 0 and "skipped_no_link" not in counts and counts["empty"] == 10
    assert reports["T"].line() == "news T: ok (new 10, updated 0, unchanged 0, skipped 0, duplicates 0, repeated 0, empty 10)"
    (audit,) = db.execute("SELECT counts FROM ingest_runs WHERE source = 'T'").fetchall()
    assert json.loads(audit[0])["empty"] == 10


#: A blog's Atom feed as its software writes it, with what feedparser reads as entries of empty content
#: (``type`` and ``base`` filled in all the same), an RSS feed with an item of empty elements (an enclosure
#: with no URL, a ``<link>`` with none: feedparser keeps ``rel``, ``type`` and ``length``), and one entry with
#: a story but no link of its own (its content is elsewhere, ``src``), which is skipped, not empty.
EMPTY_CONTENT_FEEDS = {
    "blog.atom": """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://blog.example/">
  <title>Blog</title><id>tag:blog.example,2026:feed</id><updated>2026-11-20T08:00:00Z</updated>
  <link rel="self" href="https://blog.example/feed.atom"/><link rel="alternate" href="https://blog.example/"/>
  <entry>
    <title>A post</title><id>tag:blog.example,2026:1</id><link rel="alternate" type="text/html" href="/posts/1"/>
    <updated>2026-11-20T08:00:00Z</updated><content type="html">&lt;p&gt;Its text.&lt;/p&gt;</content>
  </entry>
  <entry><content type="html"></content></entry>
  <entry><title type="html"></title><summary type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"></div></summary></entry>
  <entry><link rel="alternate" type="text/html" title="No address" length="1024"/></entry>
  <entry><title>Elsewhere</title><content type="text/html" src="https://cdn.example/elsewhere.html"/></entry>
</feed>""",
    "podcast.rss": """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Podcast</title><link>https://pod.example/</link><description>Episodes</description>
  <item><title>Episode 1</title><link>https://pod.example/1</link><enclosure url="https://pod.example/1.mp3" length="5" type="audio/mpeg"/></item>
  <item><title></title><link></link><description></description><enclosure url="" length="0" type="audio/mpeg"/><pubDate>Fri, 20 Nov 2026 08:00:00 GMT</pubDate></item>
</channel></rss>""",
}


def test_entries_whose_elements_are_empty_are_empty_whatever_feedparser_describes_them_with(news, tmp_path):
    """Only what holds a story counts (a content's value or ``src``, a link's address), not ``type``, ``base``, ``rel``."""
    sources = []
    for name, body in EMPTY_CONTENT_FEEDS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
        sources.append({"name": name, "url": str(tmp_path / name), "tag": "Science"})
    reports, _ = news(sources)
    counts = {name: reports[name].counts for name in EMPTY_CONTENT_FEEDS}
    assert (counts["blog.atom"]["new"], counts["blog.atom"]["skipped"], counts["blog.atom"]["empty"]) == (1, 1, 3)
    assert counts["blog.atom"]["skipped_no_link"] == 1
    assert (counts["podcast.rss"]["new"], counts["podcast.rss"]["skipped"], counts["podcast.rss"]["empty"]) == (1, 0, 1)


def test_process_pool_and_in_process_parsing_store_the_same(http_server, news):
    for name in ("lab-notes.xml", "industry-wire.atom", "capital-brief.rdf"):
        http_server.routes[f"/{name}"] = Reply(200, (FEEDS / name).read_bytes())
    sources = [
        {"name": "Lab", "url": http_server.url("/lab-notes.xml"), "tag": "Science"},
        {"name": "Wire", "url": http_server.url("/industry-wire.atom"), "tag": "Industry", "rules": [{"match": "(?i)spac|raises", "tag": "Investing"}]},
        {"name": "Brief", "url": http_server.url("/capital-brief.rdf"), "tag": "Investing"},
    ]
    _, db = news(sources, parse_workers=2)
    pooled = rows(db, "SELECT id, url, title, summary, source, tag FROM news ORDER BY id")
    db.execute("DELETE FROM news")
    db.execute("UPDATE sources SET etag = NULL, last_modified = NULL, content_hash = NULL")
    _, db = news(parse_workers=0)
    assert rows(db, "SELECT id, url, title, summary, source, tag FROM news ORDER BY id") == pooled
    assert len(pooled) == 63 and {row[5] for row in pooled} == {"Science", "Industry", "Investing"}


def test_ingest_runs_and_reports_per_source(http_server, news):
    http_server.routes["/ok"] = Reply(200, THREE)
    reports, db = news(
        [{"name": "Ok", "url": http_server.url("/ok"), "tag": "Science"}, {"name": "Missing", "url": http_server.url("/nope"), "tag": "Science"}]
    )
    runs = {row[0]: row[1:] for row in db.execute("SELECT source, status, counts, finished_at FROM ingest_runs WHERE kind = 'news'")}
    assert runs["Ok"][0] == "ok" and json.loads(runs["Ok"][1])["new"] == 3 and runs["Ok"][2]
    assert runs["Missing"][0] == "failed"
    assert reports["Ok"].line() == "news Ok: ok (new 3, updated 0, unchanged 0, skipped 0, duplicates 0, repeated 0)"


# --- the command line ---------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_exit_codes_and_lines(http_server, make_config, qsite):
    http_server.routes["/ok"] = Reply(200, THREE)
    good = {"name": "Good", "url": http_server.url("/ok"), "tag": "Science"}
    path = make_config(news={"sources": [good]})
    done = qsite("ingest", "news", "--config", str(path))
    assert done.returncode == 0, done.stderr
    assert "news Good: ok (new 3, updated 0, unchanged 0, skipped 0, duplicates 0, repeated 0)" in done.stdout

    path = make_config(news={"sources": [good, {"name": "Bad", "url": http_server.url("/missing"), "tag": "Industry"}]})
    done = qsite("ingest", "news", "--config", str(path))
    assert done.returncode == 1
    assert "news Good: unchanged" in done.stdout and "news Bad: failed" in done.stdout and "HTTP 404" in done.stdout

    path = make_config(news={"sources": [good]})
    done = qsite("ingest", "news", "--config", str(path), "--quiet")
    assert done.returncode == 0 and done.stdout == ""

    path = make_config(news={"sources": [{**good, "tag": "Gossip"}]})
    done = qsite("ingest", "news", "--config", str(path))
    assert done.returncode == 2 and "news.sources[0].tag" in done.stderr


@pytest.mark.slow
def test_cli_ingest_all_runs_site_then_news(http_server, make_config, qsite):
    http_server.routes["/ok"] = Reply(200, THREE)
    path = make_config(news={"sources": [{"name": "Good", "url": http_server.url("/ok"), "tag": "Science"}]})
    done = qsite("ingest", "all", "--config", str(path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("site ") and lines[1].startswith("news Good: ok")
    db = open_database(load_config(path).database_path)
    assert db.execute("SELECT count(*) FROM courses").fetchone()[0] > 0
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == 3

    http_server.routes["/ok"] = Reply(500, b"")
    db.execute("UPDATE sources SET etag = NULL, content_hash = NULL")
    done = qsite("ingest", "all", "--config", str(path), "--quiet")
    assert done.returncode == 1 and "news Good: failed" in done.stderr and done.stdout == ""
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == 3


@pytest.mark.slow
def test_a_url_httpx_refuses_fails_only_its_source(http_server, make_config, qsite):
    """A redirect to a port over 65535 passes config validation but httpx cannot request it (no httpx.HTTPError)."""
    http_server.routes["/ok"] = Reply(200, THREE)
    http_server.routes["/moved"] = Reply(302, headers={"Location": "http://127.0.0.1:99999/feed"})
    sources = [
        {"name": "Moved", "url": http_server.url("/moved"), "tag": "Science"},
        {"name": "Good", "url": http_server.url("/ok"), "tag": "Industry"},
    ]
    path = make_config(news={"sources": sources})
    done = qsite("ingest", "news", "--config", str(path))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "news Good: ok (new 3" in done.stdout
    assert "news Moved: failed" in done.stdout and "port must be 0-65535" in done.stdout
    db = open_database(load_config(path).database_path)
    assert db.execute("SELECT count(*) FROM news WHERE source = 'Good'").fetchone()[0] == 3
    assert source_row(db, "Moved")["last_status"] == "failed"


@pytest.mark.slow
def test_a_local_source_that_is_not_a_regular_file_fails_alone(tmp_path, make_config, qsite):
    """A FIFO used to be opened for reading and waited on for a writer for ever: no line, the writer lock held."""
    os.mkfifo(tmp_path / "fifo.xml")
    (tmp_path / "folder.xml").mkdir()
    (tmp_path / "good.xml").write_bytes(THREE)
    sources = [
        {"name": "Fifo", "url": str(tmp_path / "fifo.xml"), "tag": "Science"},
        {"name": "Zero", "url": "/dev/zero", "tag": "Science"},
        {"name": "Folder", "url": str(tmp_path / "folder.xml"), "tag": "Science"},
        {"name": "Good", "url": str(tmp_path / "good.xml"), "tag": "Industry"},
    ]
    done = qsite("ingest", "news", "--config", str(make_config(news={"sources": sources})), timeout=30)
    assert done.returncode == 1, done.stderr
    lines = {line.split(":")[0].removeprefix("news "): line for line in done.stdout.splitlines()}
    assert "fifo.xml: cannot read file: it is a FIFO, not a regular file" in lines["Fifo"]
    assert "/dev/zero: cannot read file: it is a character device, not a regular file" in lines["Zero"]
    assert "folder.xml: cannot read file: Is a directory" in lines["Folder"]
    assert lines["Good"].startswith("news Good: ok (new 3")


@pytest.mark.parametrize("url", ["http://[::1/feed", "http://xn--a.com/feed", "http://127.0.0.1:99999/feed"])
def test_fetch_turns_a_url_httpx_refuses_into_a_fetch_error(url):
    """Config validation refuses these; a URL that still slips through must fail as FetchError, never escape."""
    with pytest.raises(FetchError) as caught:
        fetch_one(url, connect_timeout=1.0, read_timeout=1.0)
    assert str(caught.value).startswith(f"{url}: cannot request this URL: ")
