"""/api/v1/sources: every publisher, its tag, its feed without credentials, its item count, its last good fetch."""

from __future__ import annotations

import pytest

from qsite.pipeline.store import open_database, transaction
from qsite.pipeline.store.runs import finish_run, start_run
from qsite.service.datasette.plugin import get_api
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import NEWS_AT, SOURCES, news_items, seed_catalog, seed_news

SECRET_FEED = "https://reader:hunter2@feeds.example:8443/rss?apikey=k3y&page=2&X-Amz-Signature=s1g"


@pytest.fixture
def database(tmp_path):
    db = open_database(tmp_path / "site.db")
    seed_catalog(db)
    db["sources"].insert({"name": "Secret Feed", "url": SECRET_FEED, "tag": "Industry"})
    db["sources"].insert({"name": "Local Feed", "url": "/srv/private/feeds/local.xml", "tag": "Science"})
    seed_news(db, news_items(12))
    return db


@pytest.fixture
def client(database, make_config):
    client = ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"})))
    yield client
    client.close()


def by_name(client) -> dict:
    return {source["name"]: source for source in client.get("/api/v1/sources").json()["results"]}


def test_every_publisher_with_its_tag_and_item_count(client):
    body = client.get("/api/v1/sources").json()
    names = [source["name"] for source in body["results"]]
    assert names == sorted(names) == sorted([*SOURCES.values(), "Secret Feed", "Local Feed"])
    assert body["count"] == 5
    sources = by_name(client)
    for tag, name in SOURCES.items():
        assert sources[name]["tag"] == tag and sources[name]["item_count"] == 4
    assert sources["Secret Feed"]["item_count"] == 0 and sources["Secret Feed"]["tag"] == "Industry"
    # the names are exactly what source= takes
    for name, source in sources.items():
        news = client.get("/api/v1/news", params={"source": name}).json()
        assert news["count"] == source["item_count"]


def test_feed_addresses_show_no_credentials_or_local_paths(client):
    sources = by_name(client)
    assert sources["Secret Feed"]["feed_url"] == (
        "https://feeds.example:8443/rss?apikey=REDACTED&page=2&X-Amz-Signature=REDACTED"
    )
    assert sources["Local Feed"]["feed_url"] == "local.xml"
    text = client.get("/api/v1/sources").text
    for secret in ("reader", "hunter2", "k3y", "s1g", "/srv/private"):
        assert secret not in text


def test_last_success_is_the_last_good_fetch(client, database):
    name = SOURCES["Science"]
    assert by_name(client)[name]["last_success_at"] is None  # seeded, never fetched
    with transaction(database):
        run = start_run(database, "news", name)
        finish_run(database, run, "ok", {"new": 0})
    good = by_name(client)[name]["last_success_at"]
    assert good is not None
    with transaction(database):
        run = start_run(database, "news", name)
        finish_run(database, run, "failed", {}, "HTTP 500")
        unchanged = start_run(database, "news", SOURCES["Industry"])
        finish_run(database, unchanged, "unchanged", {})
    # no data_versions bump for either: the answer is built for every request, so it is current
    sources = by_name(client)
    assert sources[name]["last_success_at"] == good
    assert sources[SOURCES["Industry"]]["last_success_at"] is not None
    assert not any(key[0] == "sources" for key in get_api(client.datasette).cache.entries)


def test_conditional_requests_and_strict_parameters(client):
    first = client.get("/api/v1/sources")
    assert first.headers["etag"]
    again = client.get("/api/v1/sources", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304
    assert client.get("/api/v1/sources?tag=Science").status_code == 400
    assert client.head("/api/v1/sources").headers["etag"] == first.headers["etag"]


def test_a_fetch_that_changed_no_item_is_a_change_of_the_answer(client, database):
    first = client.get("/api/v1/sources")
    assert first.json()["updated_at"] == NEWS_AT  # the news' own change: no fetch yet
    with transaction(database):
        unchanged = start_run(database, "news", SOURCES["Industry"])
        finish_run(database, unchanged, "unchanged", {})  # no data_versions bump
    # no Last-Modified: two fetches can end within one second, so If-Modified-Since could not tell
    # their answers apart; it is ignored (RFC 9110 13.1.3), and the ETag revalidates
    assert "last-modified" not in first.headers
    again = client.get("/api/v1/sources", headers={"if-modified-since": "Fri, 01 Jan 2100 00:00:00 GMT",
                                                   "if-none-match": first.headers["etag"]})
    assert again.status_code == 200
    fetched = by_name(client)[SOURCES["Industry"]]["last_success_at"]
    assert again.json()["updated_at"] == fetched > first.json()["updated_at"]
    assert client.get("/api/v1/sources", headers={"if-none-match": again.headers["etag"]}).status_code == 304
    assert client.get("/api/v1/sources", headers={"if-modified-since": "Fri, 01 Jan 2100 00:00:00 GMT"}).status_code == 200


def test_no_news_yet_is_503(make_config, tmp_path):
    db = open_database(tmp_path / "site.db")
    seed_catalog(db)
    db.close()
    client = ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"})))
    try:
        assert client.get("/api/v1/sources").status_code == 503
    finally:
        client.close()
