"""Parsing fetched bytes: the bundled feeds, and the ways real feeds go wrong."""

import pytest

from qsite.pipeline.news.feeds import FeedError, FeedJob, parse, read_feed
from qsite.pipeline.news.normalise import SUMMARY_LIMIT
from tests.support.feeds import Entry, atom, rss
from tests.support.paths import FEEDS

SEEN = "2025-06-01T12:00:00Z"

RSS = rss(
    [
        Entry("https://t.example/1", "First story", "Mon, 03 Mar 2025 08:00:00 GMT"),
        Entry("https://t.example/2", "Second story", "Tue, 04 Mar 2025 08:00:00 GMT"),
        Entry("https://t.example/3", "Third story", "Wed, 05 Mar 2025 08:00:00 GMT"),
    ],
    title="T",
).encode()


def job(body: bytes, headers=None, location="https://t.example/feed.xml", tag="Science", rules=()) -> FeedJob:
    return FeedJob("Test", tag, tuple(rules), body, headers or {}, location, SEEN)


@pytest.mark.parametrize(
    "name, version, count", [("lab-notes.xml", "rss20", 22), ("industry-wire.atom", "atom10", 21), ("capital-brief.rdf", "rss10", 21)]
)
def test_bundled_feeds_parse_cleanly(name, version, count):
    body = (FEEDS / name).read_bytes()
    assert parse(body).version == version
    result = read_feed(job(body, location=str(FEEDS / name)))
    assert result.error is None and result.warning is None and result.skipped == 0
    assert len(result.items) == count
    for item in result.items:
        assert item.url.startswith("https://") and "utm_" not in item.url and "mc_cid" not in item.url
        assert "<" not in item.summary and "&amp;" not in item.summary and len(item.summary) <= SUMMARY_LIMIT
        assert item.published_at.endswith("Z")


def test_bundled_feeds_together_have_what_real_feeds_have():
    items = {}
    for name in ("lab-notes.xml", "industry-wire.atom", "capital-brief.rdf"):
        result = read_feed(job((FEEDS / name).read_bytes(), location=str(FEEDS / name)))
        items[name] = result.items
    urls = [{item.url for item in found} for found in items.values()]
    assert len(urls[0] & urls[1]) == 1  # one story in two feeds, spelled differently in each
    assert sum(len(found) for found in items.values()) >= 60
    lab = {item.title: item for item in items["lab-notes.xml"]}
    assert sum(item.published_at == SEEN for item in items["lab-notes.xml"]) == 2  # undated and 2099
    assert "Stabilised Schrödinger cat states" in lab["Cat qubits suppress bit flips for over ten minutes"].summary


def test_latin1_feed_is_decoded_from_its_declaration():
    body = (FEEDS / "capital-brief.rdf").read_bytes()
    assert "Zürich".encode("latin-1") in body  # real Latin-1 bytes, not UTF-8
    titles = {item.title for item in read_feed(job(body, location=str(FEEDS / "capital-brief.rdf"))).items}
    assert "Zürich photonics firm closes CHF 35m Series A" in titles
    assert "Sovereign fund anchors £250m quantum venture fund" in titles


def test_charset_declared_only_in_the_http_header():
    body = RSS.replace(b'encoding="UTF-8"', b"").replace(b"First story", "Première étude".encode("iso-8859-1"))
    result = read_feed(job(body, headers={"Content-Type": "application/rss+xml; charset=ISO-8859-1"}))
    assert result.error is None
    assert result.items[0].title == "Première étude"


def test_relative_links_resolve_against_xml_base_or_the_feed_location():
    based = atom([Entry("a.html?utm_source=x", "A")], title="W", base="https://w.example/stories/").encode()
    assert read_feed(job(based)).items[0].url == "https://w.example/stories/a.html"
    moved = RSS.replace(b"https://t.example/1", b"/posts/1")
    assert read_feed(job(moved, location="https://moved.example/feeds/rss")).items[0].url == "https://moved.example/posts/1"


def test_relative_links_of_a_feed_file_resolve_against_its_channel_link(tmp_path):
    # A file has no URL to resolve against: the channel's own <link> is the base.
    path = tmp_path / "feed.xml"
    path.write_bytes(RSS.replace(b"https://t.example/1", b"/posts/1?utm_source=rss").replace(b"https://t.example/2", b"2.html"))
    result = read_feed(job(path.read_bytes(), location=str(path)))
    assert result.skipped == 0
    assert [item.url for item in result.items] == ["https://t.example/posts/1", "https://t.example/2.html", "https://t.example/3"]
    # The fetched URL still comes first, and a relative channel link is no base at all.
    body = path.read_bytes()
    assert read_feed(job(body, location="https://m.example/f/rss")).items[0].url == "https://m.example/posts/1"
    result = read_feed(job(body.replace(b"<link>https://t.example/</link>", b"<link>/home</link>"), location=str(path)))
    assert result.skipped == 2 and [item.url for item in result.items] == ["https://t.example/3"]


def test_xml_base_beats_the_channel_link_of_a_feed_file(tmp_path):
    based = atom([Entry("a.html", "A")], title="W", link="https://home.example/", base="https://w.example/stories/").encode()
    assert read_feed(job(based, location=str(tmp_path / "w.atom"))).items[0].url == "https://w.example/stories/a.html"


def test_html_page_is_not_a_feed():
    page = b"<!doctype html><html><head><title>Welcome</title></head><body><p>Our news moved.</p></body></html>"
    result = read_feed(job(page, headers={"content-type": "text/html; charset=utf-8"}))
    assert result.items == [] and "not an RSS or Atom feed" in result.error and "text/html" in result.error


@pytest.mark.parametrize("body", [b"", b"\x00\x01\x02garbage", b"just some text", b"{\"json\": true}"])
def test_garbage_is_an_error_never_an_exception(body):
    result = read_feed(job(body))
    assert result.error and result.items == []


def test_bytes_naming_a_file_are_not_opened(tmp_path):
    secret = tmp_path / "secret.xml"
    secret.write_bytes(RSS)
    result = read_feed(job(str(secret).encode()))
    assert result.error and result.items == []


def test_truncated_feed_with_entries_is_a_warning_and_keeps_them():
    cut = RSS[: RSS.index(b"<item><title>Third")] + b"<item><title>Thi"
    result = read_feed(job(cut))
    assert result.error is None and "not well-formed" in result.warning
    assert [item.url for item in result.items[:2]] == ["https://t.example/1", "https://t.example/2"]


def test_truncated_feed_without_entries_is_an_error():
    with pytest.raises(FeedError, match="not a readable feed"):
        parse(RSS[:120])
    assert read_feed(job(RSS[:120])).error


def test_entries_without_a_link_of_their_own_are_skipped_and_counted():
    # The channel has a link of its own (https://t.example/): it is never an entry's url.
    body = RSS.replace(b"<link>https://t.example/2</link>", b"")
    result = read_feed(job(body))
    assert result.skipped == 1 and [item.url for item in result.items] == ["https://t.example/1", "https://t.example/3"]


def test_an_empty_href_is_no_link_the_entry_id_is_else_it_is_skipped():
    entries = [Entry("https://t.example/1", "One", "2025-03-03T08:00:00Z"), Entry("https://t.example/2", "Two", "2025-03-04T08:00:00Z")]
    body = atom(entries, base="https://t.example/wp-atom.php").encode()
    body = body.replace(b'href="https://t.example/1"', b'href=""').replace(b'href="https://t.example/2"', b'href=""')
    body = body.replace(b"<id>https://t.example/2</id>", b"<id>tag:t.example,2025:2</id>")
    # Fetched from elsewhere: the xml:base document is the feed's own all the same.
    result = read_feed(job(body, location="https://elsewhere.example/feed"))
    assert [item.url for item in result.items] == ["https://t.example/1"] and result.skipped == 1


