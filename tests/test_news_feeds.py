"""/api/v1/news.atom and /api/v1/news.json: feeds with /news's filters that round-trip through feedparser."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from urllib.parse import quote

import feedparser
import jsonschema
import pytest

from tests.support.api_client import news_client, shared_news_client
from tests.support.known_data import SOURCES, news_items
from tests.support.paths import ROOT

#: JSON Schema for JSON Feed 1.1 by Jakob Krigovsky (ISC), github.com/sonicdoe/jsonfeed-schema at bba8eaa, unchanged.
JSON_FEED_SCHEMA = json.loads((ROOT / "tests" / "data" / "jsonfeed" / "schema-v1.1.json").read_text(encoding="utf-8"))


def items() -> list[dict]:
    found = news_items(15)
    found[0]["title"] = "Qubits & <b>gates</b>: “quoted” — 量子"  # markup-like text stays text
    found[0]["summary"] = "A summary with <angle brackets> & ampersands"
    found[1]["summary"] = ""
    found[2]["image_url"] = "https://news.example/images/2.png"  # an item's own image: carried by both feeds
    return found


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One API over :func:`items` for the module: every test only reads it."""
    with shared_news_client(tmp_path_factory, items()) as client:
        yield client


def stamp(parsed) -> str:
    return datetime(*parsed[:6], tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


QUERIES = ["limit=100", "tag=Science&limit=100", f"source={quote(SOURCES['Industry'])}", "q=headline&limit=3", "since=2026-11-20T03:00:00Z"]


@pytest.mark.parametrize("query", QUERIES)
def test_atom_round_trips_through_feedparser_with_every_field(client, query):
    listed = client.get(f"/api/v1/news?{query}").json()["results"]
    response = client.get(f"/api/v1/news.atom?{query}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    parsed = feedparser.parse(response.content)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    assert parsed.feed.id.startswith("tag:qsite,2026:") and parsed.feed.updated
    assert any(link.rel == "self" for link in parsed.feed.links)
    assert len(parsed.entries) == len(listed) and listed
    for entry, item in zip(parsed.entries, listed):
        assert entry.title == item["title"]
        assert entry.link == item["url"]
        assert entry.get("summary", "") == item["summary"]
        assert stamp(entry.published_parsed) == item["published_at"]
        assert stamp(entry.updated_parsed) == item["updated_at"]  # when qsite last changed it: edits reach readers
        assert entry.author == item["source"]  # the publisher, credited
        assert entry.source.title == item["source"]
        assert entry.tags[0].term == item["tag"]
        assert entry.id == f"tag:qsite,2026:news/{item['id']}"
        images = entry.get("media_content", [])  # Media RSS, as feeds carry an item's image
        assert [image["url"] for image in images] == ([item["image_url"]] if item["image_url"] else [])
        assert all(image["medium"] == "image" and image["type"] == "image/png" for image in images)
    assert any(item["image_url"] for item in listed) or query != "limit=100"


@pytest.mark.parametrize("query", QUERIES)
def test_json_feed_is_valid_json_feed_1_1_and_round_trips(client, query):
    listed = client.get(f"/api/v1/news?{query}").json()["results"]
    response = client.get(f"/api/v1/news.json?{query}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/feed+json; charset=utf-8"
    document = response.json()
    jsonschema.validate(document, JSON_FEED_SCHEMA, format_checker=jsonschema.FormatChecker())
    assert document["version"] == "https://jsonfeed.org/version/1.1"
    # feedparser 6.0 (the lock's) reads no JSON Feed: the schema above and the fields below are the check
    assert len(document["items"]) == len(listed) and listed
    for item, listed_item in zip(document["items"], listed):
        assert item["_qsite"]["id"] == listed_item["id"] and item["id"] == f"tag:qsite,2026:news/{listed_item['id']}"
        assert item["title"] == listed_item["title"] and item["url"] == listed_item["url"]
        assert item["summary"] == item["content_text"] == listed_item["summary"]
        assert item["date_published"] == listed_item["published_at"]
        assert item["date_modified"] == listed_item["updated_at"]
        assert item["authors"] == [{"name": listed_item["source"], "url": listed_item["url"]}]
        assert item["_qsite"]["source"] == listed_item["source"]
        assert item["tags"] == [listed_item["tag"]]
        assert item.get("image") == listed_item["image_url"]


def test_feeds_answer_conditionally_and_refuse_what_news_refuses(client):
    for path in ("/api/v1/news.atom", "/api/v1/news.json"):
        first = client.get(path)
        assert first.headers["etag"] and first.headers["last-modified"]
        assert client.get(path, headers={"if-none-match": first.headers["etag"]}).status_code == 304
        for bad in ("tag=nope", "limit=0", "cursor=x", "sort=published_at", "since=yesterday"):
            assert client.get(f"{path}?{bad}").status_code == 400, (path, bad)


def test_the_feed_title_says_the_filters(client):
    parsed = feedparser.parse(client.get(f"/api/v1/news.atom?tag=science&source={quote(SOURCES['Science'])}").content)
    assert parsed.feed.title == f"qsite news: Science · {SOURCES['Science']}"
    assert client.get("/api/v1/news.json?q=qubits").json()["title"] == "qsite news: “qubits”"


def test_a_search_of_no_words_links_to_itself_not_to_every_item(client):
    """Punctuation only is no words, which matches nothing: the feeds' links say so (``q=""``), and list nothing."""
    feed = client.get("/api/v1/news.json?q=!!!").json()
    assert feed["items"] == [] and feed["_qsite"]["api"].endswith("&q=%22%22")
    assert client.get(feed["_qsite"]["api"]).json()["count"] == 0
    atom = feedparser.parse(client.get("/api/v1/news.atom?q=%3F%21").content)
    (self_link,) = [link.href for link in atom.feed.links if link.rel == "self"]
    assert atom.entries == [] and self_link.endswith("&q=%22%22")
    assert feedparser.parse(client.get(self_link).content).entries == []


def test_an_empty_feed_is_still_valid(client):
    parsed = feedparser.parse(client.get("/api/v1/news.atom?q=nothingmatchesthis").content)
    assert not parsed.bozo and parsed.entries == [] and parsed.feed.title
    jsonschema.validate(client.get("/api/v1/news.json?q=nothingmatchesthis").json(), JSON_FEED_SCHEMA)


ATOM_NS = {"a": "http://www.w3.org/2005/Atom"}
RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(Z|[+-]\d{2}:\d{2})$"


def test_atom_keeps_the_rules_the_w3c_validator_checks(client):
    """RFC 4287's MUSTs as the W3C feed validator reports them: one id (an absolute IRI), title and updated
    per feed and entry, an author for every entry, dates in RFC 3339, a self link and an alternate per entry."""
    import re

    from lxml import etree

    feed = etree.fromstring(client.get("/api/v1/news.atom?limit=100").content)
    assert feed.tag == "{http://www.w3.org/2005/Atom}feed"
    for element in [feed, *feed.findall("a:entry", ATOM_NS)]:
        for name in ("id", "title", "updated"):
            assert len(element.findall(f"a:{name}", ATOM_NS)) == 1, name
        assert re.match(r"^[a-z][a-z0-9+.-]*:", element.findtext("a:id", namespaces=ATOM_NS))  # absolute
        assert re.match(RFC3339, element.findtext("a:updated", namespaces=ATOM_NS))
        assert element.find("a:author/a:name", ATOM_NS).text
    assert feed.find("a:link[@rel='self']", ATOM_NS).get("type") == "application/atom+xml"
    entries = feed.findall("a:entry", ATOM_NS)
    assert len({entry.findtext("a:id", namespaces=ATOM_NS) for entry in entries}) == len(entries) == 15
    for entry in entries:
        # a link without rel is rel="alternate" (RFC 4287 4.2.7.2): the original article
        assert [link.get("rel", "alternate") for link in entry.findall("a:link", ATOM_NS)] == ["alternate"]
        assert re.match(RFC3339, entry.findtext("a:published", namespaces=ATOM_NS))
        assert entry.find("a:source/a:title", ATOM_NS).text == entry.find("a:author/a:name", ATOM_NS).text


def test_text_xml_cannot_hold_is_left_out_not_a_500(make_config, tmp_path):
    odd = "\x01Odd\x1f Lab"  # a publisher's name as a deployer may configure it: only its length is checked

    def odd_publisher(db):
        db["sources"].insert({"name": odd, "url": "https://odd.example/feed", "tag": "Science"})

    found = news_items(3)
    found[0]["source"] = odd
    with news_client(make_config, tmp_path / "site.db", found, prepare=odd_publisher) as client:
        response = client.get(f"/api/v1/news.atom?source={quote(odd)}&q=headline%0B")
        assert response.status_code == 200, response.text
        assert not feedparser.parse(response.content).bozo
        parsed = feedparser.parse(response.content)
        assert parsed.feed.title == "qsite news: Odd Lab · “headline”"
        assert [entry.author for entry in parsed.entries] == ["Odd Lab"]


def test_the_json_feed_says_its_own_address_and_the_page_to_open(client):
    """JSON Feed 1.1's feed_url (the feed as asked, canonical, as Atom's self link) and home_page_url
    (the documentation page): absolute, at the address the request was made to, as JSON Feed has no base."""
    science = quote(SOURCES["Science"])
    feed = client.get(f"/api/v1/news.json?source={science}&tag=science&limit=5").json()
    assert feed["feed_url"] == f"http://localhost/api/v1/news.json?tag=Science&limit=5&source={science}"
    assert feed["home_page_url"] == "http://localhost/api/v1/docs"
    atom = feedparser.parse(client.get(f"/api/v1/news.atom?source={science}&tag=science&limit=5").content)
    (self_link,) = [link.href for link in atom.feed.links if link.rel == "self"]
    assert feed["feed_url"] == "http://localhost" + self_link.replace(".atom", ".json")
    assert client.get(feed["feed_url"].removeprefix("http://localhost")).json() == feed
    # another address, another body and ETag; the same address, the same (and a 304)
    elsewhere = client.get("/api/v1/news.json", headers={"host": "news.example:8443"})
    assert elsewhere.json()["feed_url"] == "http://news.example:8443/api/v1/news.json?limit=20"
    assert elsewhere.json()["home_page_url"] == "http://news.example:8443/api/v1/docs"
    here = client.get("/api/v1/news.json")
    assert here.json()["feed_url"] == "http://localhost/api/v1/news.json?limit=20"
    assert here.headers["etag"] != elsewhere.headers["etag"] and len(here.content) == int(here.headers["content-length"])
    again = client.get("/api/v1/news.json", headers={"host": "news.example:8443", "if-none-match": elsewhere.headers["etag"]})
    assert again.status_code == 304
    assert client.get("/api/v1/news.json", headers={"if-none-match": elsewhere.headers["etag"]}).status_code == 200
    # a Host that is no host name: the same stand-in as the OpenAPI document's
    assert client.get("/api/v1/news.json", headers={"host": "bad host/"}).json()["feed_url"].startswith("http://localhost/")


def test_a_publishers_text_never_becomes_the_address(make_config, tmp_path):
    """Only the feed's own two links are given the address: an item holding the stand-in's text keeps it."""
    from qsite.service.api.responses import BASE_URL_PLACEHOLDER

    found = news_items(2)
    found[0]["title"] = f"See {BASE_URL_PLACEHOLDER}/api/v1/docs"
    with news_client(make_config, tmp_path / "site.db", found) as client:
        feed = client.get("/api/v1/news.json", headers={"host": "news.example"}).json()
    assert feed["home_page_url"] == "http://news.example/api/v1/docs"
    assert feed["items"][0]["title"] == f"See {BASE_URL_PLACEHOLDER}/api/v1/docs"


def test_the_atom_feed_id_is_the_same_at_every_limit(client):
    """The id names the feed (RFC 4287 4.2.6: permanent), whatever number of its items is shown: written with
    limit at its default, as ids were written before it was left out of them, so a reader at the default keeps its id."""
    def feed_id(query: str) -> str:
        return feedparser.parse(client.get(f"/api/v1/news.atom?{query}").content).feed.id

    science = quote(SOURCES["Science"])
    assert feed_id("") == feed_id("limit=20") == feed_id("limit=3") == feed_id("limit=100") == "tag:qsite,2026:/api/v1/news.atom?limit=20"
    filtered = feed_id(f"tag=science&source={science}&limit=7")
    assert filtered == feed_id(f"source={science}&tag=Science") == f"tag:qsite,2026:/api/v1/news.atom?tag=Science&limit=20&source={science}"
    assert feed_id("tag=Industry") != feed_id("") != feed_id("q=qubits")  # other filters, another feed
    # the self link is still the feed as asked
    parsed = feedparser.parse(client.get("/api/v1/news.atom?limit=3").content)
    assert [link.href for link in parsed.feed.links if link.rel == "self"] == ["/api/v1/news.atom?limit=3"]
