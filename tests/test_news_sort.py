"""/api/v1/news?sort=: newest first (default) and oldest first, each a cursor walk that keeps its order."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest

from qsite.service.api.cursors import encode_cursor
from tests.support.api_client import shared_news_client
from tests.support.known_data import NEWS_START, SOURCES, news_items


def items() -> list[dict]:
    """40 items; many share a minute (and some a second), so a search's minute batches are exercised."""
    found = news_items(40)
    for i, item in enumerate(found):
        if i % 4:  # three of every four items in the same minute as a neighbour
            item["published_at"] = (NEWS_START - timedelta(hours=i // 4, seconds=i % 4 * 5 * (i % 2))).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
        if i % 3 == 0:
            item["title"] = f"Photonic qubit {i}"
    return found


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One API over :func:`items` for the module: every test only reads it."""
    with shared_news_client(tmp_path_factory, items()) as client:
        yield client


def walk(client, query: str) -> list[dict]:
    found, url = [], f"/api/v1/news?{query}"
    while url:
        page = client.get(url).json()
        found += page["results"]
        url = page["next"]
    return found


def key(row):
    return (row["published_at"], row["id"])


FILTERS = [
    "",
    "tag=Science",
    f"source={quote(SOURCES['Industry'])}&source={quote(SOURCES['Science'])}",
    f"source={quote(SOURCES['Industry'])}&tag=Industry",
    "q=photonic",
    "q=qubit&tag=Science",
    "since=2026-11-20T00:00:00Z",
    "until=2026-11-20T05:00:00Z&since=2026-11-19T23:00:00Z",
    "q=headline&since=2026-11-20T00:00:00Z&until=2026-11-20T07:00:00Z",
    # a word excluded, either of two words: the same minute batches, over another FTS5 expression
    "q=headline%20-photonic",
    "q=photonic%20OR%20headline%20-qubit&since=2026-11-19T00:00:00Z",
    "q=summary%20-headline&tag=Science",
]


@pytest.mark.parametrize("filters", FILTERS)
@pytest.mark.parametrize("limit", [1, 3, 7, 100])
def test_oldest_first_is_newest_first_reversed(client, filters, limit):
    newest = walk(client, f"{filters}&limit={limit}")
    oldest = walk(client, f"{filters}&limit={limit}&sort=published_at")
    assert newest, filters
    assert [key(row) for row in newest] == sorted((key(row) for row in newest), reverse=True)
    assert oldest == newest[::-1]
    assert walk(client, f"{filters}&limit={limit}&sort=-published_at") == newest


def test_next_keeps_sort_and_counts_agree(client):
    first = client.get("/api/v1/news?limit=5&sort=PUBLISHED_AT").json()
    assert "sort=published_at" in first["next"] and first["count"] == 40
    assert client.get("/api/v1/news?limit=5").json()["count"] == first["count"]


def test_a_cursor_is_refused_in_the_other_order(client):
    newest_next = client.get("/api/v1/news?limit=5").json()["next"]
    cursor = newest_next.partition("cursor=")[2]
    mixed = client.get(f"/api/v1/news?limit=5&sort=published_at&cursor={cursor}")
    assert mixed.status_code == 400
    assert mixed.json()["errors"] == [{"parameter": "cursor", "detail": mixed.json()["errors"][0]["detail"]}]
    assert "other order" in mixed.json()["errors"][0]["detail"]
    oldest_next = client.get("/api/v1/news?limit=5&sort=published_at").json()["next"]
    back = oldest_next.replace("sort=published_at", "sort=-published_at")
    assert client.get(back).status_code == 400
    assert client.get(oldest_next.replace("&sort=published_at", "")).status_code == 400  # default order is newest first


def test_a_newest_first_cursor_made_before_sort_existed_still_works(client):
    rows = walk(client, "limit=100")
    cursor = encode_cursor(rows[9]["published_at"], rows[9]["id"])
    assert client.get(f"/api/v1/news?limit=100&cursor={cursor}").json()["results"] == rows[10:]


def test_an_unknown_sort_is_a_400(client):
    response = client.get("/api/v1/news?sort=title")
    assert response.status_code == 400 and response.json()["errors"][0]["parameter"] == "sort"
