"""The endpoint table (service/api/endpoints.py): consistent with itself, the data model and metadata.yml.

Routing, validation, cache keys, next links, the index and the OpenAPI
document are all derived from the table; these tests hold the table to what
it claims, and the texts typed outside it (metadata.yml) to its values.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import sqlite_utils

from qsite.db.migrations import migrations
from qsite.db.model import DATASETS, TAGS
from qsite.service.api.cursors import Position
from qsite.service.api.endpoint import HTML
from qsite.service.api.endpoints import ENDPOINTS, index_document
from qsite.service.api.parameter_table import LIMIT_DEFAULT, PARAMETERS
from qsite.service.datasette.metadata import QUERY_NAMES, QUERY_PREFIX, read_metadata_file, configured_queries
from qsite.service.api.parameters import parse_params
from qsite.service.http.problems import API_PREFIX
from qsite.service.api.routing import cache_key, resolve


def test_every_parameter_names_endpoints_of_the_table():
    for param in PARAMETERS:
        assert param.on and set(param.on) <= set(ENDPOINTS), param.name
        assert param.where in ("query", "path")
    refs = [param.ref for param in PARAMETERS]
    assert len(refs) == len(set(refs))  # the OpenAPI document's components/parameters
    for endpoint in ENDPOINTS.values():
        names = [param.name for param in endpoint.params]
        assert len(names) == len(set(names)), endpoint.name


def test_every_endpoint_names_real_datasets_and_canned_queries():
    queries = configured_queries()
    for endpoint in ENDPOINTS.values():
        assert set(endpoint.datasets) <= set(DATASETS), endpoint.name
        if endpoint.build is None and endpoint.media_type == HTML:  # the page: made of the other answers
            assert set(endpoint.datasets) == set(DATASETS) and endpoint.required is None and not endpoint.queries
        elif endpoint.name == "health":  # answered apart (never kept): ingest_runs and data_versions
            assert endpoint.fresh and endpoint.queries == ("health",) and endpoint.required is None
            assert {QUERY_PREFIX + name for name in endpoint.queries} <= set(queries)
        elif endpoint.build is None:  # a document: no data behind it
            assert not endpoint.datasets and endpoint.required is None and not endpoint.queries
        else:
            assert endpoint.required in endpoint.datasets
            assert endpoint.queries and set(endpoint.queries) <= set(QUERY_NAMES)
            assert {QUERY_PREFIX + name for name in endpoint.queries} <= set(queries)


def test_path_parameters_match_the_paths():
    for endpoint in ENDPOINTS.values():
        template = re.findall(r"\{(\w+)\}", endpoint.path)
        assert template == ([endpoint.path_param.name] if endpoint.path_param else []), endpoint.name
        if template:
            assert endpoint.path.endswith("}"), "a path parameter is the last segment"


def test_every_endpoint_is_routed_and_listed_in_the_index():
    listed = index_document()["endpoints"]
    following = index_document(following=True)["endpoints"]
    for endpoint in ENDPOINTS.values():
        url = re.sub(r"\{\w+\}", "qubit", endpoint.url)
        assert resolve(url) == (endpoint, "qubit" if endpoint.path_param else None)
        if endpoint.name != "index":
            assert following[endpoint.name] == endpoint.url
            assert listed.get(endpoint.name) == (None if endpoint.following else endpoint.url)
    assert resolve(API_PREFIX + "/") == (ENDPOINTS["index"], None)
    for unknown in (API_PREFIX + "/news/", API_PREFIX + "/glossary/", API_PREFIX + "/glossary/a/b", API_PREFIX + "/glossary/%FF", "/news"):
        assert resolve(unknown) is None, unknown


def test_cache_keys_tell_apart_what_differs_and_only_that():
    news = ENDPOINTS["news"]

    def key(query: str) -> tuple:
        values, errors = parse_params(news.params, query.encode())
        assert not errors
        return cache_key(news, None, values)

    assert key("") == key(f"limit={LIMIT_DEFAULT}")
    assert key("tag=science&limit=5") == key("limit=5&tag=Science")
    assert key("since=2026-11-20T10:00:00%2B01:00") == key("since=2026-11-20T09:00:00Z")
    distinct = ["", "tag=Science", "limit=5", "since=2026-11-20T09:00:00Z", "tag=Industry", "limit=6"]
    assert len({key(query) for query in distinct}) == len(distinct)
    # a search: one key however it is written, another for every other meaning
    assert key("q=funding%20-series") == key("q=-Series++Funding") == key("q=%22funding%22%20-series")
    assert key("q=Wi-Fi") == key("q=wi%20fi") == key("q=%22WI%20fi%22")
    searches = ["q=a%20b", "q=a%20-b", "q=a%20OR%20b", "q=a%20or%20b", "q=a-b%20OR%20c", "q=a%20b%20OR%20c", "q=a%20-b-c"]
    assert len({key(query) for query in searches}) == len(searches)
    entry = ENDPOINTS["glossary_entry"]
    assert cache_key(entry, "a", {}) != cache_key(entry, "b", {})


def test_next_link_repeats_the_query_with_the_new_cursor():
    news = ENDPOINTS["news"]
    values, _ = parse_params(news.params, b"since=2026-11-19T00:00:00Z&tag=investing")
    link = news.next_link(values, ("2026-11-20T08:00:00Z", "0f" * 16))
    assert link.startswith(f"{news.url}?tag=Investing&limit={LIMIT_DEFAULT}&since=")
    again, errors = parse_params(news.params, urlsplit(link).query.encode())
    assert not errors
    assert again == {**values, "cursor": Position("2026-11-20T08:00:00Z", "0f" * 16)}


def test_next_link_keeps_a_search_as_its_canonical_text():
    news = ENDPOINTS["news"]
    values, errors = parse_params(news.params, b"q=quantum+Funding+OR+%22seed+round%22+-Series+-%22Wi-Fi+6%22")
    assert not errors and values["q"] == "quantum funding OR seed-round -series -wi-fi-6"
    link = news.next_link(values, ("2026-11-20T08:00:00Z", "0f" * 16))
    again, errors = parse_params(news.params, urlsplit(link).query.encode())
    assert not errors and again["q"] == values["q"]


def test_the_names_of_other_apis_are_no_parameter_of_the_endpoints_they_are_hints_on():
    """A peer name is never a parameter of an endpoint its hint is given on, nor the peer of two parameters of one."""
    from qsite.service.api.parameters import KEY_NAMES, peer_key

    for endpoint in ENDPOINTS.values():
        names = {peer_key(param.name) for param in endpoint.params}
        peers = [peer_key(name) for param in endpoint.params for name in {peer_key(peer) for peer in param.peers}]
        peers += {peer_key(name) for name in KEY_NAMES}
        assert not names & set(peers) and len(peers) == len(set(peers)), endpoint.name


@pytest.fixture(scope="module")
def canned():
    """The canned queries of metadata.yml over an in-memory database with the real schema."""
    db = sqlite_utils.Database(memory=True)
    migrations.apply(db)
    db["news"].insert_all(
        {
            "id": f"item-{i:03d}",
            "url": f"https://news.example/{i}",
            "title": f"Headline {i}",
            "summary": "",
            "source": "Lab Notes",
            "tag": TAGS[i % len(TAGS)],
            "published_at": f"2026-11-{10 + i % 10:02d}T00:00:{i:02d}Z",
            "first_seen_at": "2026-11-20T00:00:00Z",
            "updated_at": "2026-11-20T00:00:00Z",
        }
        for i in range(LIMIT_DEFAULT + 10)
    )
    queries = configured_queries()
    return db.conn, queries


def test_the_canned_news_query_defaults_to_the_api_page_size(canned):
    """A researcher running api_news without a limit gets the page the API gives without one."""
    conn, queries = canned
    empty = {"tag": "", "since": "", "until": "", "sources": "", "q": "", "before": "", "before_id": "", "limit": ""}
    assert len(conn.execute(queries["api_news"]["sql"], empty).fetchall()) == LIMIT_DEFAULT
    assert f"limit defaults to {LIMIT_DEFAULT}" in " ".join(queries["api_news"]["description"].split())


def test_metadata_texts_name_the_tags_and_datasets_of_the_data_model():
    metadata = read_metadata_file()
    (database,) = metadata["databases"].values()
    news_query = " ".join(configured_queries()["api_news"]["description"].split())
    assert "tag is " + ", ".join(TAGS[:-1]) + " or " + TAGS[-1] + ";" in news_query
    assert database["tables"]["news"]["columns"]["tag"].endswith("one of " + ", ".join(TAGS))
    assert database["tables"]["data_versions"]["columns"]["dataset"] == "One of " + ", ".join(DATASETS)
