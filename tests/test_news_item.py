"""GET /api/v1/news/{id}: one item, conditional like every endpoint, 404/400, and ids that stay put."""

from __future__ import annotations

import pytest

from qsite.config import load_config
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import open_database
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import news_items, seed_catalog, seed_news
from tests.support.paths import ROOT

REALFEEDS = ROOT / "tests" / "data" / "realfeeds"


@pytest.fixture
def client(make_config, tmp_path):
    db = open_database(tmp_path / "site.db")
    seed_catalog(db)
    seed_news(db, news_items(12))
    db.close()
    client = ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"})))
    yield client
    client.close()


def test_each_listed_item_is_served_alone_with_the_same_fields(client):
    for listed in client.get("/api/v1/news?limit=100").json()["results"]:
        response = client.get(f"/api/v1/news/{listed['id']}")
        assert response.status_code == 200
        assert response.json() == listed
        assert response.headers["etag"] and response.headers["last-modified"]


def test_conditional_requests_get_304(client):
    item = client.get("/api/v1/news?limit=1").json()["results"][0]
    first = client.get(f"/api/v1/news/{item['id']}")
    again = client.get(f"/api/v1/news/{item['id']}", headers={"if-none-match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    since = client.get(f"/api/v1/news/{item['id']}", headers={"if-modified-since": first.headers["last-modified"]})
    assert since.status_code == 304
    assert client.head(f"/api/v1/news/{item['id']}").headers["etag"] == first.headers["etag"]


def test_an_unknown_id_is_a_404_problem(client):
    response = client.get("/api/v1/news/" + "0" * 32)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "no news item with id '" + "0" * 32 + "'"


@pytest.mark.parametrize("bad", ["abc", "0" * 31, "0" * 33, "G" * 32, "A" * 32, "%E2%80%A6", "x" * 3000, "%FF", "0" * 31 + "%FF"])
def test_a_malformed_id_is_a_400_naming_id(client, bad):
    response = client.get(f"/api/v1/news/{bad}")
    assert response.status_code == 400
    problem = response.json()
    assert problem["type"].endswith("invalid-parameters")
    assert problem["errors"][0]["parameter"] == "id" and "hex digits" in problem["errors"][0]["detail"]


def test_not_an_item_path(client):
    assert client.get("/api/v1/news/").status_code == 404
    assert client.get("/api/v1/news/" + "0" * 32 + "/x").status_code == 404
    assert client.get("/api/v1/news/" + "0" * 32 + "?x=1").status_code == 400  # takes no query parameter


def test_ids_survive_reingests(make_config):
    """A real publisher's feed ingested and its ids served; read again in full (not skipped as unchanged): the same ids."""
    config_path = make_config(news={"sources": [{"name": "BBC", "url": str(REALFEEDS / "bbc-news.rss"), "tag": "Science"}]})
    config = load_config(config_path)
    db = open_database(config.database_path)
    ingest_news(db, config)
    before = {row[0]: row for row in db.execute("SELECT id, url, title FROM news")}
    db.execute("UPDATE sources SET content_hash = NULL, next_fetch_at = NULL")
    ingest_news(db, config)
    after = {row[0]: row for row in db.execute("SELECT id, url, title FROM news")}
    db.close()
    assert before and before == after
    with ApiClient(datasette_for_config(config_path)) as client:
        for item_id, url, title in before.values():
            got = client.get(f"/api/v1/news/{item_id}").json()
            assert (got["id"], got["url"], got["title"]) == (item_id, url, title)
