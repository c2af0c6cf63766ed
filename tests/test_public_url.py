"""Absolute links to the instance: from ``api.public_url``, else from the request's Host with ``Vary: Host``.

The JSON Feed's ``feed_url`` and ``home_page_url`` and the OpenAPI document's terms are
absolute; a public, cacheable body built from the client's ``Host`` must say so to caches
(``Vary: Host``), and a configured public address takes the client's word out of it.
"""

from __future__ import annotations

import pytest

from qsite.config import ConfigError, load_config
from tests.support.api_client import news_client
from tests.support.config_files import write_config
from tests.support.known_data import news_items

ABSOLUTE = ("/api/v1/news.json", "/api/v1/openapi.json")


def vary(response) -> set[str]:
    return {part.strip().lower() for value in response.headers.get_list("vary") for part in value.split(",")}


def test_without_a_public_url_the_request_host_is_used_and_varied_on(make_config, tmp_path):
    with news_client(make_config, tmp_path / "site.db", news_items(3)) as client:
        feed = client.get("/api/v1/news.json", headers={"host": "news.example"})
        assert feed.json()["feed_url"].startswith("http://news.example/")
        for path in ABSOLUTE:
            answer = client.get(path, headers={"host": "news.example"})
            assert "host" in vary(answer) and answer.headers["cache-control"].startswith("public"), path
            conditional = client.get(path, headers={"host": "news.example", "if-none-match": answer.headers["etag"]})
            assert conditional.status_code == 304 and "host" in vary(conditional), path
        # bodies without the address do not vary on it
        assert "host" not in vary(client.get("/api/v1/news", headers={"host": "news.example"}))
        assert "host" not in vary(client.get("/api/v1/news.atom", headers={"host": "news.example"}))


def test_a_public_url_is_written_whatever_the_host(tmp_path):
    from tests.support.api_client import ApiClient, datasette_for_config
    from tests.support.known_data import seeded_database

    seeded_database(tmp_path / "site.db").close()
    path = write_config(tmp_path, api={"rate_limit": "off", "public_url": "https://data.example.org/qsite/"})
    with ApiClient(datasette_for_config(path)) as client:
        for host in ("evil.example", "localhost"):
            feed = client.get("/api/v1/news.json", headers={"host": host})
            assert feed.json()["home_page_url"] == "https://data.example.org/qsite/api/v1/docs"
            assert feed.json()["feed_url"].startswith("https://data.example.org/qsite/api/v1/news.json?")
            assert "host" not in vary(feed)
            openapi = client.get("/api/v1/openapi.json", headers={"host": host})
            assert openapi.json()["info"]["termsOfService"].startswith("https://data.example.org/qsite/api/v1/docs")
            assert "host" not in vary(openapi)


@pytest.mark.parametrize("bad", ["data.example.org", "ftp://data.example.org", "https://user:pw@data.example.org", "https://x.org/?a=1"])
def test_a_public_url_must_be_an_http_address(tmp_path, bad):
    path = write_config(tmp_path, api={"public_url": bad})
    with pytest.raises(ConfigError, match="public_url"):
        load_config(path)
