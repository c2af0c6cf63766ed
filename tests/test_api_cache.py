"""The response cache: built once per data version, byte-identical to an uncached answer, fresh after an ingest."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from qsite.db.model import utc_now
from qsite.pipeline.store import bump_version, bump_versions, end_on_own_second, open_database, transaction
from qsite.pipeline.store.runs import until_own_second
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.parameters import parse_params
from qsite.service.api.response_cache import ALIAS_SHARE, ResponseCache, alias_size
from qsite.service.api.responses import Conditions, Entry
from qsite.service.api.routing import cache_key
from qsite.service.datasette.plugin import get_api
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import NEWS_START, news_items, seed_news, seeded_database

PATHS = [
    "/api/v1",
    "/api/v1/openapi.json",
    "/api/v1/courses",
    "/api/v1/glossary",
    "/api/v1/glossary?q=qubit",
    "/api/v1/glossary/qubit",
    "/api/v1/news",
    "/api/v1/news?tag=Science&limit=30",
    "/api/v1/news?limit=5&since=2026-11-19T00:00:00Z",
    "/api/v1/stats",
]


def comparable(response):
    return response.status_code, sorted(response.headers.multi_items()), response.content


@pytest.fixture
def clients(seeded_config):
    made = []

    def make() -> ApiClient:
        client = ApiClient(datasette_for_config(seeded_config))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def test_cached_answers_equal_uncached_ones(clients):
    warm = clients()
    first = [comparable(warm.get(path)) for path in PATHS]
    repeat = [comparable(warm.get(path)) for path in PATHS]  # served by the ASGI fast path
    api = get_api(warm.datasette)
    # every answer but the OpenAPI document (made for the host asked) is kept and served by the fast path
    kept = [path for path in PATHS if not path.startswith("/api/v1/openapi.json")]
    assert all(api.cache.alias((path.split("?")[0].encode(), path.partition("?")[2].encode())) for path in kept)
    fresh = [comparable(clients().get(path)) for path in PATHS]  # a new process: nothing cached
    assert first == repeat == fresh  # bodies, ETags and every header


def test_repeats_run_no_sql(clients):
    client = clients()
    before = {path: client.get(path) for path in PATHS}
    api = get_api(client.datasette)

    async def no_sql(fn):
        raise AssertionError("SQL ran for a cached response")

    api.execute_fn = no_sql
    for path, response in before.items():
        again = client.get(path)
        assert again.status_code == 200 and again.content == response.content
    # equivalent requests share the built response: parameter order, tag case, default limit
    for path, same_as in [
        ("/api/v1/news?limit=30&tag=science", "/api/v1/news?tag=Science&limit=30"),
        ("/api/v1/news?limit=20", "/api/v1/news"),
        ("/api/v1/glossary?q=%20QUBIT%20", "/api/v1/glossary?q=qubit"),
    ]:
        assert client.get(path).content == before[same_as].content


def test_repeats_wait_for_no_thread_while_the_api_threads_are_busy(clients):
    """Cached answers need no SQL and no thread: they come while every API thread is stuck."""
    client = clients()
    before = {path: client.get(path).content for path in PATHS}
    api = get_api(client.datasette)
    stuck = asyncio.Event()  # never set
    client.run(api.cache.refresh(force=True))  # versions just read: the repeats below may be answered from memory

    async def busy(fn):
        await stuck.wait()

    api.execute_fn = api.cache.versions.run = busy

    async def repeats():
        return {path: (await client.datasette.client.get(path)).content for path in PATHS}

    # a hang (a repeat waiting for a thread) fails here instead of blocking the suite
    assert client.run(asyncio.wait_for(repeats(), timeout=30)) == before


def test_cookie_requests_get_the_same_bytes_through_datasettes_router(clients):
    client = clients()
    plain = client.get("/api/v1/stats")
    with_cookie = client.get("/api/v1/stats", headers={"Cookie": "ds_actor=x"})  # checked against the document too
    assert with_cookie.content == plain.content
    assert with_cookie.headers["etag"] == plain.headers["etag"]
    # Datasette's privacy rule for credentialed requests applies (not the fast path),
    # to 304s and errors as well; the document allows it
    assert with_cookie.headers["cache-control"] == "private, no-store"
    not_modified = client.get("/api/v1/stats", headers={"Cookie": "a=1", "If-None-Match": plain.headers["etag"]})
    assert not_modified.status_code == 304 and not_modified.headers["cache-control"] == "private, no-store"
    refused = client.get("/api/v1/stats?x=1", headers={"Authorization": "Bearer x"})
    assert refused.status_code == 400 and refused.headers["cache-control"] == "private, no-store"
    assert client.openapi.checked == 4


def test_new_ingest_is_visible_within_two_seconds_and_only_news_is_rebuilt(clients, tmp_path):
    client = clients()
    news = client.get("/api/v1/news?limit=5")
    stats = client.get("/api/v1/stats")
    courses = client.get("/api/v1/courses")
    api = get_api(client.datasette)
    courses_entry = api.cache.get(("courses", None))

    db = open_database(tmp_path / "site.db")
    with transaction(db):
        db.execute(
            "INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at) "
            "VALUES ('late', 'https://news.example/late', 'Late news', 'New', 'Lab Notes', 'Science', "
            "'2026-11-21T00:00:00Z', '2026-11-21T00:00:05Z', '2026-11-21T00:00:05Z')"
        )
        bump_version(db, "news", "2026-11-21T00:00:05Z")

    deadline = time.monotonic() + 2
    while True:  # polls for the event (the new row served), 2 s at most: the promise being tested
        fresh = client.get("/api/v1/news?limit=5")
        if fresh.json()["results"][0]["id"] == "late" or time.monotonic() > deadline:
            break
        time.sleep(0.05)  # polls for the event above
    assert fresh.json()["results"][0]["id"] == "late"
    assert fresh.json()["count"] == 46
    assert fresh.headers["etag"] != news.headers["etag"]
    assert fresh.headers["last-modified"] == "Sat, 21 Nov 2026 00:00:05 GMT"
    # the old ETag no longer revalidates
    assert client.get("/api/v1/news?limit=5", headers={"If-None-Match": news.headers["etag"]}).status_code == 200
    new_stats = client.get("/api/v1/stats")
    assert new_stats.json()["news_items"] == 46 and new_stats.content != stats.content
    # the catalog did not change: its response was kept, not rebuilt
    assert api.cache.get(("courses", None)) is courses_entry
    assert client.get("/api/v1/courses").headers["etag"] == courses.headers["etag"]
    # and what the cache serves now equals a fresh process's answer
    other = clients()
    for path in ("/api/v1/news?limit=5", "/api/v1/stats", "/api/v1/courses"):
        assert comparable(client.get(path)) == comparable(other.get(path))


def test_a_runs_last_version_has_a_last_modified_of_its_own(clients, tmp_path):
    """An ingest commits once per source, often within one second: its commits share a Last-Modified,
    and the run's last version has its own, so If-Modified-Since of anything shown before is a 200."""
    client = clients()
    db = open_database(tmp_path / "site.db")

    def add(item_id: str, at: str):
        with transaction(db):
            db.execute(
                "INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at) "
                "VALUES (?, ?, 'Late news', 'New', 'Lab Notes', 'Science', ?, ?, ?)",
                [item_id, f"https://news.example/{item_id}", at, at, at],
            )
            bump_version(db, "news", at)  # both within one second, as one sweep's commits

    def served_with(item_id: str, changed=lambda answer: True):
        deadline = time.monotonic() + 2
        while True:  # polls for the event (the new row served), 2 s at most
            answer = client.get("/api/v1/news?limit=1")
            if (answer.json()["results"][0]["id"] == item_id and changed(answer)) or time.monotonic() > deadline:
                return answer
            time.sleep(0.05)  # polls for the event above

    add("first", "2026-11-21T00:00:05Z")
    first = served_with("first")
    add("second", "2026-11-21T00:00:05Z")
    shared = served_with("second")
    assert shared.headers["last-modified"] == first.headers["last-modified"]  # one second: the ETag tells them apart
    assert shared.headers["etag"] != first.headers["etag"]
    end_on_own_second(db, ("news",))  # the run's end, as the news sweep and the site export end
    last = served_with("second", lambda answer: answer.headers["last-modified"] != first.headers["last-modified"])
    assert last.headers["last-modified"] != first.headers["last-modified"]
    revalidated = client.get("/api/v1/news?limit=1", headers={"If-Modified-Since": first.headers["last-modified"]})
    assert revalidated.status_code == 200 and revalidated.json()["results"][0]["id"] == "second"


def test_changed_at_never_goes_back_and_a_caller_that_waits_has_a_second_of_its_own(tmp_path):
    db = open_database(tmp_path / "fresh.db")
    with transaction(db):
        bump_version(db, "news", "2026-11-21T00:00:05Z")
    with transaction(db):
        bump_versions(db, ("catalog", "glossary"), "2026-11-20T00:00:00Z")  # an earlier time given: not back
    times = dict(db.execute("select dataset, changed_at from data_versions").fetchall())
    assert times["catalog"] == times["glossary"] == "2026-11-21T00:00:05Z"  # one transaction, one time
    with transaction(db):
        bump_version(db, "news")
    time.sleep(until_own_second(db))  # as a run waits for its last version
    with transaction(db):
        bump_version(db, "catalog")
    times = dict(db.execute("select dataset, changed_at from data_versions").fetchall())
    assert times["catalog"] > times["news"] and times["catalog"] <= utc_now()


def test_a_time_ahead_of_the_clock_is_no_last_modified():
    """The writer's clock ahead of a replica's: no Last-Modified after the answer's Date (RFC 9110 8.8.2.1)."""
    ahead = Entry(("news",), b"{}", ("news",), "2999-01-01T00:00:00Z", 300)
    assert b"last-modified" not in dict(ahead.headers)
    status, _headers, _body = ahead.answer(Conditions(None, "Fri, 01 Jan 2999 00:00:00 GMT", False))
    assert status == 200  # If-Modified-Since needs a Last-Modified to compare with (RFC 9110 13.1.3)
    past = Entry(("news",), b"{}", ("news",), "2026-11-20T08:00:00Z", 300)
    assert dict(past.headers)[b"last-modified"] == b"Fri, 20 Nov 2026 08:00:00 GMT"


def test_concurrent_misses_build_once(clients):
    client = clients()
    client.get("/api/v1")  # start up
    api = get_api(client.datasette)
    calls, arrived, everyone_asked = [], [], asyncio.Event()
    real, real_get_or_build = api.execute_fn, api.cache.get_or_build

    async def arriving(key, build):
        arrived.append(key)
        if len(arrived) == 20:
            everyone_asked.set()
        return await real_get_or_build(key, build)

    async def counting(fn):
        calls.append(1)
        await asyncio.wait_for(everyone_asked.wait(), 30)  # the build runs on once every request has asked the cache
        return await real(fn)

    api.execute_fn = counting
    api.cache.get_or_build = arriving

    async def many():
        return await asyncio.gather(*(client.datasette.client.get("/api/v1/news?tag=Industry") for _ in range(20)))

    responses = client.run(many())
    assert len(calls) == 1
    assert len({response.content for response in responses}) == 1
    assert all(response.status_code == 200 for response in responses)


def test_a_build_from_an_older_snapshot_is_served_but_not_kept(clients, tmp_path):
    client = clients()
    client.get("/api/v1/stats")
    api = get_api(client.datasette)
    current = dict(api.cache.versions.current)
    older = {**current, "news": (current["news"][0] - 1, current["news"][1])}
    assert client.run(api.cache.storable(current, ("totals", "news")))
    assert not client.run(api.cache.storable(older, ("totals", "news")))


def test_cache_is_bounded():
    cache = ResponseCache(max_entries=3, max_bytes=100_000, max_aliases=4)
    entries = [Entry(("e", i), b"x" * 100, ("news",), None, 60) for i in range(5)]
    for i, entry in enumerate(entries):
        cache.put(entry)
        cache.add_alias((b"/p", str(i).encode()), entry)
    assert len(cache) == 3
    assert [key for key in cache.entries] == [("e", 2), ("e", 3), ("e", 4)]
    assert len(cache.aliases) == 3  # aliases of evicted entries go too
    assert cache.alias_bytes == sum(alias_size(key) for key in cache.aliases)
    cache.drop({"news"})
    assert len(cache) == 0 and cache.size == 0 and not cache.aliases and cache.alias_bytes == 0

    one = Entry(("e", 0), b"x" * 100, ("news",), None, 60).size
    by_bytes = ResponseCache(max_entries=100, max_bytes=int(4.5 * one / (1 - ALIAS_SHARE)))  # room for 4 entries
    for i in range(6):
        by_bytes.put(Entry(("e", i), b"x" * 100, ("news",), None, 60))
    assert len(by_bytes) == 4 and by_bytes.size <= by_bytes.max_entry_bytes
    big = Entry(("big",), b"y" * (2 * one), ("news",), None, 60)  # over a quarter of the budget: not kept
    by_bytes.put(big)
    assert by_bytes.get(("big",)) is None and len(by_bytes) == 4


def test_every_byte_of_keys_and_aliases_counts():
    """A long key costs its length; long raw query strings fill the alias budget, not memory."""
    short = Entry(("news", None, 20, None, None), b"{}", ("news",), None, 60)
    long = Entry(("news", None, 20, None, "x" * 5000), b"{}", ("news",), None, 60)
    assert long.size - short.size >= 5000
    cache = ResponseCache(max_bytes=400_000)
    cache.put(short)
    for n in range(1000):  # the attack of issue 13: ever more "&", all one entry
        cache.add_alias((b"/api/v1/stats", b"&" * (n * 8)), short)
    assert cache.alias_bytes <= cache.max_alias_bytes == 100_000
    assert cache.alias_bytes == sum(alias_size(key) for key in cache.aliases)
    assert len(cache.aliases) < 100 and cache.alias((b"/api/v1/stats", b"&" * 7992)) is short  # the newest stay


def test_many_distinct_query_strings_stay_bounded(clients):
    client = clients()
    api = get_api(client.datasette)
    api.cache.max_entries = 10
    api.cache.max_aliases = 15
    for i in range(40):
        since = (NEWS_START - timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert client.get(f"/api/v1/news?since={since}", validate=False).status_code == 200
    assert len(api.cache) <= 10 and len(api.cache.aliases) <= 15


def test_glossary_change_drops_only_glossary(clients, tmp_path):
    client = clients()
    client.get("/api/v1/glossary")
    client.get("/api/v1/news")
    api = get_api(client.datasette)
    db = open_database(tmp_path / "site.db")
    with transaction(db):
        db.execute("UPDATE glossary SET definition = 'Changed.' WHERE id = 'qubit'")
        bump_version(db, "glossary", "2026-11-22T00:00:00Z")
    client.run(api.cache.refresh(force=True))
    assert ("glossary", None) not in api.cache.entries
    news_key = cache_key(ENDPOINTS["news"], None, parse_params(ENDPOINTS["news"].params, b"")[0])
    assert news_key in api.cache.entries
    body = client.get("/api/v1/glossary/qubit").json()
    assert body["definition"] == "Changed."


def test_news_feed_seeding_helper_keeps_versions_monotonic(tmp_path):
    # guards the helper the other tests rely on
    db = open_database(tmp_path / "other.db")
    seed_news(db, news_items(2))
    seed_news(db, news_items(1, prefix="b"), changed_at="2026-11-21T00:00:00Z")
    assert db.execute("select version, changed_at from data_versions where dataset = 'news'").fetchone() == (
        2,
        "2026-11-21T00:00:00Z",
    )


def test_fast_path_answers_still_count_against_the_rate_limit(make_config, tmp_path):
    seeded_database(tmp_path / "limited.db").close()
    path = make_config(database=str(tmp_path / "limited.db"), api={"rate_limit": "3/day"})  # a day's window: see tests/test_ratelimit.py, DAY_WINDOW
    with ApiClient(datasette_for_config(path), check=False) as client:
        statuses = [client.get("/api/v1/stats").status_code for _ in range(4)]
        api = get_api(client.datasette)
        assert api.cache.alias((b"/api/v1/stats", b"")) is not None  # repeats were fast-path hits
        assert statuses == [200, 200, 200, 429]
