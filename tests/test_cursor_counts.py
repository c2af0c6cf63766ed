"""Counts carried in cursors: a later page takes its listing's count from its cursor when the seal holds.

A ``next`` link's cursor carries the count the page before it read, sealed
with a key from the instance's Datasette secret over the count query, its
parameters and the data versions (:mod:`qsite.service.api.cursors`). A page counts
again whenever the seal does not hold: the data changed, the filters are not
the ones counted, the count was altered, another secret wrote it, or the
cursor carries no count at all.
"""

from __future__ import annotations

import sqlite3

import httpx
import pytest
from datasette.app import Datasette

from qsite.pipeline.store import open_database
from qsite.service.api.bodies import Build
from qsite.service.api.cursors import _CURSOR_MAX, COUNT_MAX, Position, count_seal, decode_cursor, encode_cursor
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.news_bodies import news
from qsite.service.api.parameters import parse_params
from qsite.service.datasette.metadata import configured_queries, query_sql
from qsite.service.datasette.state import cursor_key
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient, shared_news_client
from tests.support.known_data import news_items, seed_catalog, seed_news
from tests.support.processes import qsite_serve, worker_pids

KEY = cursor_key(Datasette(memory=True, secret="one secret"))
SQL = query_sql(configured_queries())
COUNT_STARTS = SQL["news_count"][:30]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    path = tmp_path_factory.mktemp("counts") / "site.db"
    db = open_database(path)
    seed_catalog(db)
    seed_news(db, news_items(30))
    db.close()
    return path


@pytest.fixture
def conn(database):
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    yield connection
    connection.close()


def page(conn, query: str, key: bytes = KEY, versions=None) -> tuple[dict, int]:
    """The /news body for ``query`` built on ``conn``, and how many count queries it ran."""
    endpoint = ENDPOINTS["news"]
    values, errors = parse_params(endpoint.params, query.encode())
    assert not errors, errors
    ran: list[str] = []
    conn.set_trace_callback(ran.append)
    payload, _ = news(Build(endpoint, values, None, conn, SQL, versions or read_versions(conn), key))
    conn.set_trace_callback(None)
    return payload, sum(statement.startswith(COUNT_STARTS) for statement in ran)


def cursor_of(link: str) -> str:
    return link.partition("cursor=")[2].partition("&")[0]


def test_later_pages_take_the_count_from_their_cursor(conn):
    first, counted = page(conn, "limit=3&tag=Science")
    assert (first["count"], counted) == (10, 1)
    carried = decode_cursor(cursor_of(first["next"]))
    assert carried.count == 10 and carried.seal
    second, counted = page(conn, f"limit=3&tag=Science&cursor={cursor_of(first['next'])}")
    assert (second["count"], counted) == (10, 0)
    assert [row["tag"] for row in second["results"]] == ["Science"] * 3
    assert decode_cursor(cursor_of(second["next"])).count == 10  # and on it goes
    oldest, _ = page(conn, "limit=5&sort=published_at&q=headline")
    later, counted = page(conn, f"limit=5&sort=published_at&q=headline&cursor={cursor_of(oldest['next'])}")
    assert (later["count"], counted) == (oldest["count"], 0)


def test_a_cursor_whose_count_was_altered_counts_again(conn):
    first, _ = page(conn, "limit=3&tag=Science")
    carried = decode_cursor(cursor_of(first["next"]))
    altered = encode_cursor(carried.at, carried.item_id, False, 999_999, carried.seal)
    second, counted = page(conn, f"limit=3&tag=Science&cursor={altered}")
    assert (second["count"], counted) == (10, 1)
    # and its next link carries the count read, sealed
    assert decode_cursor(cursor_of(second["next"])).count == 10


def test_a_cursor_used_with_other_filters_counts_again(conn):
    first, _ = page(conn, "limit=3&tag=Science")
    other, counted = page(conn, f"limit=5&tag=Industry&cursor={cursor_of(first['next'])}")
    assert (other["count"], counted) == (10, 1)
    everything, counted = page(conn, f"limit=5&cursor={cursor_of(first['next'])}")
    assert (everything["count"], counted) == (30, 1)


def test_a_cursor_from_before_the_data_changed_counts_again(conn):
    versions = read_versions(conn)
    first, _ = page(conn, "limit=3&tag=Science", versions=versions)
    version, changed_at = versions["news"]
    _, counted = page(conn, f"limit=3&tag=Science&cursor={cursor_of(first['next'])}", versions={**versions, "news": (version + 1, changed_at)})
    assert counted == 1
    # only the news version counts for /news: the catalog changing leaves the count standing
    catalog = {**versions, "catalog": (versions["catalog"][0] + 1, versions["catalog"][1])}
    _, counted = page(conn, f"limit=3&tag=Science&cursor={cursor_of(first['next'])}", versions=catalog)
    assert counted == 0


def test_another_key_or_none_counts_again(conn):
    first, _ = page(conn, "limit=5")
    other_key = cursor_key(Datasette(memory=True, secret="another secret"))
    assert other_key != KEY
    _, counted = page(conn, f"limit=5&cursor={cursor_of(first['next'])}", key=other_key)
    assert counted == 1
    unsealed, counted = page(conn, f"limit=5&cursor={cursor_of(first['next'])}", key=b"")
    assert counted == 1
    # without a key, next links carry no count: the cursor is the position alone, as before counts rode along
    assert decode_cursor(cursor_of(unsealed["next"])).count is None
    plain = encode_cursor(*decode_cursor(cursor_of(first["next"]))[:2])
    _, counted = page(conn, f"limit=5&cursor={plain}")
    assert counted == 1


def test_one_secret_makes_one_key():
    assert cursor_key(Datasette(memory=True, secret="one secret")) == KEY
    # a Datasette without a secret draws its own at random
    assert cursor_key(Datasette(memory=True)) != cursor_key(Datasette(memory=True))


def test_make_datasette_takes_the_secret_from_the_environment(monkeypatch, make_config, tmp_path):
    from qsite.config import load_config

    monkeypatch.setenv("DATASETTE_SECRET", "one secret")
    assert cursor_key(make_datasette(load_config(make_config()))) == KEY


def test_the_longest_cursor_decodes():
    longest = encode_cursor("2026-11-20T09:00:00Z#" + "9" * 9, "f" * 32, True, COUNT_MAX, "A" * 12)
    assert len(longest) <= _CURSOR_MAX
    assert decode_cursor(longest) == Position("2026-11-20T09:00:00Z#" + "9" * 9, "f" * 32, True, COUNT_MAX, "A" * 12)


@pytest.mark.parametrize(
    "parts",
    [
        ["2026-11-20T09:00:00Z", "f" * 32, -1, "A" * 12],  # a negative count
        ["2026-11-20T09:00:00Z", "f" * 32, COUNT_MAX + 1, "A" * 12],
        ["2026-11-20T09:00:00Z", "f" * 32, 1.0, "A" * 12],  # not an integer
        ["2026-11-20T09:00:00Z", "f" * 32, True, "A" * 12],
        ["2026-11-20T09:00:00Z", "f" * 32, 5, "A" * 11],  # a seal of another length
        ["2026-11-20T09:00:00Z", "f" * 32, 5, "A" * 11 + "="],
        ["2026-11-20T09:00:00Z", "f" * 32, 5],  # a count without its seal
        ["2026-11-20T09:00:00Z", "f" * 32, "asc", 5],
        ["2026-11-20T09:00:00Z", "f" * 32, 5, "A" * 12, "asc"],  # the direction after the count
        ["2026-11-20T09:00:00Z", "f" * 32, "desc", 5, "A" * 12],
    ],
)
def test_a_cursor_with_a_count_of_another_shape_is_refused(parts):
    import base64

    import orjson

    assert decode_cursor(base64.urlsafe_b64encode(orjson.dumps(parts)).rstrip(b"=").decode()) is None


def test_a_seal_covers_the_query_its_parameters_the_versions_and_the_count():
    params = {"tag": "Science", "count_limit": 1001}
    sealed = count_seal(KEY, "news_count", params, [[3, "2026-11-20T09:00:00Z"]], 10)
    assert sealed == count_seal(KEY, "news_count", dict(reversed(params.items())), [[3, "2026-11-20T09:00:00Z"]], 10)
    for other in (
        count_seal(KEY, "news_changes_count", params, [[3, "2026-11-20T09:00:00Z"]], 10),
        count_seal(KEY, "news_count", {**params, "tag": "Industry"}, [[3, "2026-11-20T09:00:00Z"]], 10),
        count_seal(KEY, "news_count", params, [[4, "2026-11-20T09:00:00Z"]], 10),
        count_seal(KEY, "news_count", params, [[3, "2026-11-20T10:00:00Z"]], 10),  # a database made again from scratch
        count_seal(KEY, "news_count", params, [[3, "2026-11-20T09:00:00Z"]], 11),
        count_seal(b"another key", "news_count", params, [[3, "2026-11-20T09:00:00Z"]], 10),
    ):
        assert other != sealed


# -- through the API -------------------------------------------------------------


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # with the change keys the pipeline gives items (db/news_sync.py), so that the sync walk sees them
    items = [{**item, "change_key": f"2026-11-20T09:00:00Z#{n:09d}"} for n, item in enumerate(news_items(30))]
    with shared_news_client(tmp_path_factory, items) as client:
        yield client


def test_a_walk_answers_the_same_count_on_every_page(client):
    url, counts, seen = "/api/v1/news?limit=4&tag=Industry", [], []
    while url:
        body = client.get(url).json()
        counts.append(body["count"])
        seen += [row["id"] for row in body["results"]]
        if body["next"]:
            assert decode_cursor(cursor_of(body["next"])).count == 10
        url = body["next"]
    assert counts == [10] * 3 and len(seen) == len(set(seen)) == 10


def test_a_forged_count_is_not_served(client):
    first = client.get("/api/v1/news?limit=4&tag=Industry").json()
    carried = decode_cursor(cursor_of(first["next"]))
    forged = encode_cursor(carried.at, carried.item_id, False, 0, "A" * 12)
    body = client.get(f"/api/v1/news?limit=4&tag=Industry&cursor={forged}").json()
    assert body["count"] == 10 and len(body["results"]) == 4


@pytest.mark.parametrize("path", ["/api/v1/news?updated_since=2020-01-01T00:00:00Z&cursor=", "/api/v1/news/removed?cursor="])
def test_an_oldest_first_news_cursor_is_refused_by_the_walks_of_changes(client, path):
    """It once ended in a 500: the walks of changes took every cursor to be a pair."""
    oldest = client.get("/api/v1/news?limit=4&sort=published_at").json()
    response = client.get(path + cursor_of(oldest["next"]))
    assert response.status_code == 400
    assert [error["parameter"] for error in response.json()["errors"]] == ["cursor"]


def test_a_sync_walk_carries_its_count_too(client):
    first = client.get("/api/v1/news?updated_since=1970-01-01T00:00:00Z&limit=7").json()
    carried = decode_cursor(cursor_of(first["next"]))
    assert carried.count == first["count"] == 30
    second = client.get(first["next"]).json()
    assert second["count"] == 30 and decode_cursor(cursor_of(second["next"])).count == 30


def test_instances_with_one_secret_take_each_others_counts(monkeypatch, make_config, tmp_path):
    """The same link answered by another instance (worker, replica) with the same secret: the same body."""
    from qsite.config import load_config

    db = open_database(tmp_path / "site.db")
    seed_catalog(db)
    seed_news(db, news_items(12))
    db.close()
    config = load_config(make_config(api={"rate_limit": "off"}))
    monkeypatch.setenv("DATASETTE_SECRET", "shared")
    with ApiClient(make_datasette(config)) as one, ApiClient(make_datasette(config)) as two:
        link = one.get("/api/v1/news?limit=5").json()["next"]
        assert one.get(link).content == two.get(link).content
    # each instance with a secret of its own: the counts its next links carry are sealed apart
    monkeypatch.delenv("DATASETTE_SECRET")
    with ApiClient(make_datasette(config)) as one, ApiClient(make_datasette(config)) as two:
        link = one.get("/api/v1/news?limit=5").json()["next"]
        assert one.get(link).json()["count"] == two.get(link).json()["count"] == 12
        assert one.get(link).json()["next"] != two.get(link).json()["next"]


@pytest.mark.slow
def test_the_workers_of_qsite_serve_share_one_secret(seeded_config, monkeypatch, tmp_path):
    """Without DATASETTE_SECRET, ``qsite serve`` draws one for all its workers (each would draw its own).

    Each request on a new connection, so the kernel spreads them over both
    workers: the later page's bytes, its next link's sealed count included, are
    the same whichever worker answers.
    """
    monkeypatch.delenv("DATASETTE_SECRET")
    with qsite_serve(seeded_config, tmp_path / "serve.log", args=["--workers", "2"]) as server:
        assert len(worker_pids(server.process.pid)) == 2
        link = httpx.get(server.url("/api/v1/news?limit=5"), timeout=5).json()["next"]
        bodies = {httpx.get(server.url(link), timeout=5).content for _ in range(30)}  # a new connection each time
    assert len(bodies) == 1
