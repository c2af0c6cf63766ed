"""The /api/v1 contract (issue 4) through ``datasette.client``: shapes, parameters, errors, headers.

Every /api/v1 response these tests see is also validated against the
service's own OpenAPI 3.1 document (``tests/support/openapi_check.py``).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import pytest

from qsite.pipeline.store import open_database
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.search_language import MISPLACED_OR, NOTHING_INCLUDED
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.config_files import write_config
from tests.support.known_data import (
    CATALOG_AT,
    COURSES,
    GLOSSARY,
    NEWS_AT,
    NEWS_START,
    SECTIONS,
    TOTALS,
    news_id,
    news_items,
    seed_catalog,
    seed_news,
    seeded_database,
)
from tests.support.problems import EXPOSED, assert_problem
from tests.support.processes import wait_until

#: The fair-use limit is on (as by default) but far above what a test sends, so every
#: response carries RateLimit and RateLimit-Policy and is checked against the document with them.
HIGH_LIMIT = "100000/minute"


# the seeded data is days old: a bound of ten years keeps /api/v1/health a 200 (tests/test_health.py covers its 503s)
API_SETTINGS = {"cache_max_age": 300, "rate_limit": HIGH_LIMIT, "health_max_data_age": "3650d"}


@pytest.fixture
def config_path(make_config):
    return make_config(api=API_SETTINGS)


@pytest.fixture
def api(config_path, tmp_path):
    seeded_database(tmp_path / "site.db").close()
    with ApiClient(datasette_for_config(config_path)) as client:
        yield client


@pytest.fixture(scope="module")
def shared_api(tmp_path_factory):
    """One ``api`` for the parametrised tests that only read: a Datasette each cost 45 ms, about 80 times."""
    folder = tmp_path_factory.mktemp("api")
    seeded_database(folder / "site.db").close()
    with ApiClient(datasette_for_config(write_config(folder, api=API_SETTINGS))) as client:
        yield client


@pytest.fixture
def empty_api(config_path, tmp_path):
    open_database(tmp_path / "site.db").close()
    with ApiClient(datasette_for_config(config_path)) as client:
        yield client


def parse_http_date(value: str) -> datetime:
    return datetime.strptime(value, "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=timezone.utc)


def all_news(tag=None):
    items = news_items(45)
    items.sort(key=lambda item: (item["published_at"], item["id"]), reverse=True)
    return [
        {
            **{key: item[key] for key in ("id", "title", "url", "source", "summary", "tag", "published_at")},
            "image_url": None,
            "authors": [],
            "updated_at": item["updated_at"],
        }
        for item in items
        if tag is None or item["tag"] == tag
    ]


# -- shapes ------------------------------------------------------------------------


def test_courses_in_catalog_order_with_sections_and_no_quiz_content(api):
    response = api.get("/api/v1/courses")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    body = response.json()
    assert list(body) == ["count", "updated_at", "results"]
    assert body["count"] == 2 and body["updated_at"] == CATALOG_AT
    expected = []
    for course in COURSES:
        sections = [
            {key: section[key] for key in ("id", "title", "position", "slide_count", "url")}
            for section in SECTIONS
            if section["course_id"] == course["id"]
        ]
        expected.append({**course, "sections": sections})
    assert body["results"] == [
        {key: course[key] for key in ("id", "title", "summary", "level", "url", "position", "section_count",
                                      "slide_count", "sections")}
        for course in expected
    ]
    assert list(body["results"][0]) == ["id", "title", "summary", "level", "url", "position", "section_count",
                                       "slide_count", "sections"]
    assert "quiz" not in response.text.lower()


def test_glossary_ordered_by_term_ignoring_case(api):
    body = api.get("/api/v1/glossary").json()
    assert body["count"] == len(GLOSSARY)
    assert [entry["term"] for entry in body["results"]] == ["Amplitude", "bloch sphere", "Entanglement", "Qubit",
                                                            "Superposition"]
    assert body["results"][0] == {
        "id": "amplitude",
        "term": "Amplitude",
        "definition": "The complex number whose square gives a probability.",
        "lesson": {"title": "Qubits", "url": "https://academy.example/q/qubits"},
    }


@pytest.mark.parametrize(
    "q, ids",
    [
        ("qubit", ["bloch-sphere", "entanglement", "qubit", "superposition"]),  # porter: qubits, qubit's
        ("SPHERE", ["bloch-sphere"]),
        ("measured probability", []),
        ("  complex   number ", ["amplitude"]),
        ('"unbalanced AND (', []),  # FTS syntax is quoted away, never an error
        ("qubit -sphere", ["entanglement", "qubit", "superposition"]),  # a word after - must not occur
        ("qubit -superposition", ["bloch-sphere", "entanglement"]),
        ('qubit -"bloch sphere"', ["entanglement", "qubit", "superposition"]),  # nor all the words of a quoted term
        ("sphere OR amplitude", ["amplitude", "bloch-sphere"]),  # either
        ("measured OR correlated qubit", ["entanglement", "superposition"]),  # OR binds first: (measured OR correlated) qubit
        ("sphere NOT amplitude", []),  # NOT is the word not; or and and too
        ("sphere or amplitude", []),
        ("!!!", []),  # no words: nothing matches
        ("\x00qubit*", ["bloch-sphere", "entanglement", "qubit", "superposition"]),
        ("", ["amplitude", "bloch-sphere", "entanglement", "qubit", "superposition"]),
    ],
)
def test_glossary_full_text_search(shared_api, q, ids):
    response = shared_api.get("/api/v1/glossary", params={"q": q})
    assert response.status_code == 200
    body = response.json()
    assert [entry["id"] for entry in body["results"]] == ids
    assert body["count"] == len(ids)


def test_glossary_entry_and_unknown_entry(api):
    entry = api.get("/api/v1/glossary/bloch-sphere")
    assert entry.status_code == 200
    assert entry.json()["term"] == "bloch sphere"
    assert parse_http_date(entry.headers["last-modified"]).strftime("%Y-%m-%dT%H:%M:%SZ") == CATALOG_AT
    missing = api.get("/api/v1/glossary/no-such-term")
    body = assert_problem(missing, 404, "not-found")
    assert "no-such-term" in body["detail"]
    assert api.get("/api/v1/glossary/a%20b").status_code == 404


def test_stats(api):
    response = api.get("/api/v1/stats")
    assert response.json() == {
        "courses": TOTALS["courses"],
        "slides": TOTALS["slides"],
        "quizzes": TOTALS["quizzes"],
        "question_bank_size": TOTALS["question_bank_size"],
        "glossary_terms": TOTALS["glossary_terms"],
        "news_items": 45,
        "updated_at": NEWS_AT,  # the later of the totals and the news
    }


def test_news_defaults_newest_first(api):
    response = api.get("/api/v1/news")
    body = response.json()
    assert list(body) == ["count", "count_exact", "tag", "limit", "next", "updated_at", "results"]
    assert body["count"] == 45 and body["count_exact"] is True and body["tag"] is None and body["limit"] == 20
    assert body["updated_at"] == NEWS_AT
    assert body["results"] == all_news()[:20]
    # items 3 and 4 were published at the same time: id breaks the tie, descending
    ids = [item["id"] for item in body["results"]]
    tied = sorted([news_id(3), news_id(4)], reverse=True)
    assert ids[ids.index(tied[0]) + 1] == tied[1]
    assert body["next"].startswith("/api/v1/news?limit=20&cursor=")
    assert response.headers["link"] == f'<{body["next"]}>; rel="next"'


@pytest.mark.parametrize("given, canonical", [("Science", "Science"), ("science", "Science"), ("INVESTING", "Investing")])
def test_news_tag_matched_ignoring_case_and_echoed_canonical(shared_api, given, canonical):
    body = shared_api.get("/api/v1/news", params={"tag": given, "limit": "30"}).json()
    assert body["tag"] == canonical
    assert body["count"] == 15
    assert body["results"] == all_news(canonical)
    assert body["next"] is None


def test_news_paging_with_cursor_visits_every_item_once(api):
    seen = []
    path = "/api/v1/news?tag=Industry&limit=4"
    pages = 0
    while path:
        response = api.get(path)
        body = response.json()
        assert body["count"] == 15 and body["limit"] == 4 and body["tag"] == "Industry"
        seen.extend(item["id"] for item in body["results"])
        path = body["next"]
        assert ("link" in response.headers) == (path is not None)
        pages += 1
    assert pages == 4
    assert seen == [item["id"] for item in all_news("Industry")]


def test_news_paging_stays_right_while_new_items_arrive(api, tmp_path):
    """The page after a cursor stays the same while newer items arrive; the count takes them in within 2 s.

    Not at once: an answer may come from a read snapshot or a built response up to the
    data_versions poll's interval old (service/api/reader.py, HOLD; service/api/data_versions.py).
    """
    first = api.get("/api/v1/news?limit=10").json()
    db = open_database(tmp_path / "site.db")
    seed_news(db, news_items(3, start=NEWS_START + timedelta(days=1), prefix="fresh"), changed_at="2026-11-21T10:00:00Z")
    page_two = [item["id"] for item in all_news()[10:20]]

    def second_page_counting_the_new_items():
        body = api.get(first["next"]).json()
        assert [item["id"] for item in body["results"]] == page_two  # in every answer meanwhile
        return body if body["count"] == 48 else None

    assert wait_until(second_page_counting_the_new_items, timeout=2)


def test_news_since(api):
    body = api.get("/api/v1/news", params={"since": "2026-11-20T05:00:00Z", "limit": "100"}).json()
    # items 0..3 (09:00..06:00) and item 4 (06:00): strictly after 05:00
    assert {item["id"] for item in body["results"]} == {news_id(i) for i in range(5)}
    assert body["count"] == 5
    same = api.get("/api/v1/news", params={"since": "2026-11-20T07:00:00+02:00", "limit": "100"}).json()
    assert same["results"] == body["results"]
    fraction = api.get("/api/v1/news?since=2026-11-20T05:59:59.5Z&limit=100").json()
    assert {item["id"] for item in fraction["results"]} == {item["id"] for item in body["results"]}
    # an unencoded "+" arrives as a space; it is read as the "+" it was
    spaced = api.get("/api/v1/news?since=2026-11-20T07:00:00+02:00&limit=100").json()
    assert spaced["results"] == body["results"]


def test_news_until_with_a_fraction_keeps_the_whole_second_before_it(api):
    def ids(until: str) -> set[str]:
        return {item["id"] for item in api.get(f"/api/v1/news?until={until}&limit=100").json()["results"]}

    before_six = ids("2026-11-20T06:00:00Z")  # strictly before: items 3 and 4 (06:00) are not in it
    assert news_id(3) not in before_six and news_id(5) in before_six
    # 06:00:00 is before 06:00:00.5: a fraction counts up to the next second, never down
    assert ids("2026-11-20T06:00:00.5Z") == ids("2026-11-20T06:00:01Z") == before_six | {news_id(3), news_id(4)}
    assert ids("2026-11-20T06:00:00.000Z") == before_six  # no fraction at all, written out


def test_news_next_keeps_tag_since_and_limit(api):
    body = api.get("/api/v1/news?since=2026-11-19T00:00:00Z&tag=science&limit=2").json()
    query = parse_qs(urlsplit(body["next"]).query)
    assert query["tag"] == ["Science"] and query["limit"] == ["2"] and query["since"] == ["2026-11-19T00:00:00Z"]
    page_two = api.get(body["next"]).json()
    assert [item["id"] for item in page_two["results"]] == [item["id"] for item in all_news("Science")[2:4]]


# -- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, parameters",
    [
        ("tag=Sciense", ["tag"]),
        ("tag=", ["tag"]),
        ("limit=0", ["limit"]),
        ("limit=101", ["limit"]),
        ("limit=ten", ["limit"]),
        ("limit=-5", ["limit"]),
        ("limit=2.5", ["limit"]),
        ("limit=", ["limit"]),
        ("cursor=not-a-cursor", ["cursor"]),
        ("cursor=" + base64.urlsafe_b64encode(b'["yesterday","x"]').decode().rstrip("="), ["cursor"]),
        ("since=yesterday", ["since"]),
        ("since=2026-11-20", ["since"]),
        ("since=2026-11-20T08:00:00", ["since"]),  # no time zone
        ("since=2026-13-40T08:00:00Z", ["since"]),
        ("since=0001-01-01T00:00:00%2B01:00", ["since"]),  # before year 1 in UTC: refused, not a 500
        ("since=2026-11-20T08:00:00Z%0A", ["since"]),  # a line end after it ($ allowed one)
        ("since=2026-11-20T08:00:00.%D9%A5Z", ["since"]),  # an Arabic-Indic digit (\d took it)
        ("since=%D9%A2%D9%A0%D9%A2%D9%A6-11-20T08:00:00Z", ["since"]),
        ("tags=Science", ["tags"]),
        ("_=1700000000", ["_"]),
        ("limit=5&limit=5", ["limit"]),
        ("tag=Sciense&limit=500&since=x&cursor=y&extra=1", ["tag", "limit", "cursor", "since", "extra"]),
    ],
)
def test_news_bad_parameters_are_400_naming_each(shared_api, query, parameters):
    response = shared_api.get("/api/v1/news?" + query)
    body = assert_problem(response, 400, "invalid-parameters", parameters)
    assert all(error["detail"] for error in body["errors"])


def test_parameter_error_details(api):
    errors = api.get("/api/v1/news?limit=500&tag=x&tag=y").json()["errors"]
    assert errors == [
        {"parameter": "tag", "detail": "given more than once"},
        {"parameter": "limit", "detail": "must be an integer from 1 to 100"},
    ]


@pytest.mark.parametrize("path", ["/api/v1/courses?tag=Science", "/api/v1/stats?limit=1", "/api/v1/glossary?query=x",
                                  "/api/v1/glossary?q=a&q=b", "/api/v1/glossary/qubit?q=x", "/api/v1?x=1",
                                  "/api/v1/openapi.json?v=2"])
def test_other_endpoints_refuse_unknown_or_repeated_parameters(shared_api, path):
    assert_problem(shared_api.get(path), 400, "invalid-parameters")


def test_error_bodies_stay_small_whatever_is_sent(api):
    """Names are echoed cut to 64 characters, and at most 20 bad parameters are listed."""
    long_name = api.get("/api/v1/news", params={"x" * 7_000: "1"})
    body = assert_problem(long_name, 400, "invalid-parameters", ["x" * 64 + "\u2026"])
    assert len(long_name.content) < 1024
    assert body["detail"] == "invalid query parameters: " + "x" * 64 + "\u2026"

    many = api.get("/api/v1/news?" + "&".join(f"p{n}=1" for n in range(1000)) + "&limit=0")
    body = assert_problem(many, 400, "invalid-parameters", ["limit"] + [f"p{n}" for n in range(19)])
    assert len(many.content) < 4096
    assert body["detail"] == "invalid query parameters: limit, " + ", ".join(f"p{n}" for n in range(19)) + (
        " and 981 more not listed"
    )
    # exactly 20: all listed, nothing "more"
    twenty = assert_problem(api.get("/api/v1/stats?" + "&".join(f"p{n}=1" for n in range(20))), 400, "invalid-parameters")
    assert len(twenty["errors"]) == 20 and "more" not in twenty["detail"]

    missing = api.get("/api/v1/glossary/" + "y" * 7000)
    assert "y" * 64 + "\u2026" in assert_problem(missing, 404, "not-found")["detail"]
    assert len(missing.content) < 1024


def test_glossary_search_too_long(api):
    assert_problem(api.get("/api/v1/glossary", params={"q": "x" * 201}), 400, "invalid-parameters", ["q"])


@pytest.mark.parametrize("q", ["-qubit", "qubit OR", "OR qubit", "qubit OR -sphere"])
def test_a_glossary_search_with_nothing_to_include_or_a_misplaced_or_is_a_400(shared_api, q):
    body = assert_problem(shared_api.get("/api/v1/glossary", params={"q": q}), 400, "invalid-parameters", ["q"])
    assert body["errors"][0]["detail"] in (MISPLACED_OR, NOTHING_INCLUDED)


SINCE_HINT = "unknown parameter; qsite calls this since (an RFC 3339 date-time)"
UNTIL_HINT = "unknown parameter; qsite calls this until (an RFC 3339 date-time)"
CURSOR_HINT = "unknown parameter; qsite pages by cursor: follow the next link or the Link header"
LIMIT_HINT = "unknown parameter; qsite calls this limit (1\u2013100)"
KEY_HINT = "unknown parameter; qsite needs no key: leave it out"


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/api/v1/news?from=2026-11-20T00:00:00Z", SINCE_HINT),
        ("/api/v1/news.atom?from_date=2026-11-20", SINCE_HINT),
        ("/api/v1/news?from-date=2026-11-20", SINCE_HINT),  # the Guardian's
        ("/api/v1/news.json?start_date=2026-11-20", SINCE_HINT),
        ("/api/v1/news?published_after=2026-11-20", SINCE_HINT),
        ("/api/v1/news?to=2026-11-20T00:00:00Z", UNTIL_HINT),
        ("/api/v1/news?end_date=2026-11-20", UNTIL_HINT),
        ("/api/v1/news?published_before=2026-11-20", UNTIL_HINT),
        ("/api/v1/news?page=2", CURSOR_HINT),
        ("/api/v1/news/removed?offset=20", CURSOR_HINT),
        ("/api/v1/news?pageSize=50", LIMIT_HINT),
        ("/api/v1/news?page-size=50", LIMIT_HINT),
        ("/api/v1/news.atom?max=10", LIMIT_HINT),
        ("/api/v1/news/removed?per_page=10", LIMIT_HINT),
        ("/api/v1/news?hitsPerPage=10", LIMIT_HINT),
        ("/api/v1/news?size=10", LIMIT_HINT),
        ("/api/v1/news?sortBy=publishedAt", "unknown parameter; qsite calls this sort"),
        ("/api/v1/news?order-by=newest", "unknown parameter; qsite calls this sort"),
        ("/api/v1/news?category=science", "unknown parameter; qsite calls this tag"),
        ("/api/v1/news.json?topic=tech", "unknown parameter; qsite calls this tag"),
        ("/api/v1/news?sources=bbc-news", "unknown parameter; qsite calls this source, repeated once per publisher"),
        ("/api/v1/news?domains=bbc.co.uk", "unknown parameter; qsite calls this source, repeated once per publisher"),
        ("/api/v1/news?keywords=qubit", "unknown parameter; qsite calls this q"),
        ("/api/v1/glossary?query=qubit", "unknown parameter; qsite calls this q"),
        ("/api/v1/glossary?search=qubit", "unknown parameter; qsite calls this q"),
        ("/api/v1/news?apiKey=k", KEY_HINT),
        ("/api/v1/news?apikey=k", KEY_HINT),
        ("/api/v1/sources?access_key=k", KEY_HINT),  # no parameter at all, and still no key
        ("/api/v1/stats?token=k", KEY_HINT),
        ("/api/v1/glossary?api_key=k", KEY_HINT),
        # only where the endpoint takes the parameter the name stands for
        ("/api/v1/sources?from=2026-11-20T00:00:00Z", "unknown parameter; this endpoint takes none"),
        ("/api/v1/news.atom?page=2", "unknown parameter; this endpoint takes tag, limit, since, until, source, q"),
        ("/api/v1/news/removed?to=2026-11-20T00:00:00Z", "unknown parameter; this endpoint takes tag, limit, source, since, cursor"),
        ("/api/v1/glossary?category=x", "unknown parameter; this endpoint takes q"),
        ("/api/v1/courses?page=2", "unknown parameter; this endpoint takes none"),
    ],
)
def test_the_names_other_news_apis_give_a_parameter_say_what_qsite_calls_it(shared_api, path, detail):
    name = urlsplit(path).query.partition("=")[0]
    body = assert_problem(shared_api.get(path), 400, "invalid-parameters", [name])
    assert body["errors"] == [{"parameter": name, "detail": detail}]


@pytest.mark.parametrize("value", ["relevancy", "relevance", "Popularity"])
def test_a_sort_by_relevance_says_only_date_order_exists(shared_api, value):
    body = assert_problem(shared_api.get(f"/api/v1/news?sort={value}"), 400, "invalid-parameters", ["sort"])
    assert body["errors"][0]["detail"] == (
        "must be one of -published_at, published_at (any letter case); only date order exists"
    )


def test_every_name_of_other_apis_at_once_stays_a_small_error(shared_api):
    from qsite.service.api.parameters import KEY_NAMES

    names = [name for param in ENDPOINTS["news"].params for name in param.peers] + list(KEY_NAMES)
    response = shared_api.get("/api/v1/news?" + "&".join(f"{name}=1" for name in names))
    body = assert_problem(response, 400, "invalid-parameters")
    assert len(body["errors"]) == 20 and len(names) > 20 and len(response.content) < 4096


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/news/", "/api/v1/courses.json", "/api/v1/glossary/a/b",
                                  "/api/v1/problems/nope", "/api/v1/problems/not-found/x", "/api/v1//news"])
def test_unknown_paths_under_api_v1_are_problem_404(shared_api, path):
    assert_problem(shared_api.get(path), 404, "not-found")


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "TRACE"])
@pytest.mark.parametrize("path", ["/api/v1/news", "/api/v1/glossary/qubit", "/api/v1"])
def test_other_methods_are_405(api, tmp_path, method, path):
    response = api.request(method, path, content=b'{"title": "x"}')
    assert_problem(response, 405, "method-not-allowed")
    assert response.headers["allow"] == "GET, HEAD, OPTIONS"
    assert open_database(tmp_path / "site.db")["news"].count == 45


def test_other_methods_on_unknown_api_paths_are_404(api):
    assert_problem(api.request("POST", "/api/v1/nope"), 404, "not-found")


def test_every_counted_response_carries_documented_rate_limit_headers(api):
    """200, 304, 400, 404 and 405 all carry the limiter's headers, and the document describes them there."""
    etag = api.get("/api/v1/stats").headers["etag"]
    responses = [
        api.get("/api/v1/stats"),
        api.get("/api/v1/stats", headers={"If-None-Match": etag}),
        api.get("/api/v1/news?limit=0"),
        api.get("/api/v1/nope"),
        api.request("DELETE", "/api/v1/news"),
    ]
    assert [response.status_code for response in responses] == [200, 304, 400, 404, 405]
    for response in responses:
        assert response.headers["ratelimit-policy"] == '"default";q=100000;w=60'
        assert response.headers["ratelimit"].startswith('"default";r=')
    assert api.openapi.checked >= len(responses)  # each one validated, headers included
    headers = api.openapi.document["components"]["headers"]
    assert headers["RateLimit"]["schema"]["pattern"] == r'^"default";r=\d+;t=\d+$'
    assert headers["RateLimitPolicy"]["schema"]["pattern"] == r'^"default";q=\d+;w=\d+$'


def test_unreserved_percent_escapes_in_the_path_are_decoded(api):
    plain = api.get("/api/v1/news?limit=2")
    for path in ("/api/v1/new%73?limit=2", "/api/v1/%6Eews?limit=2", "/%61pi/v1/news?limit=2", "/api/v%31/news?limit=2"):
        response = api.get(path)
        assert response.request.url.raw_path.startswith(path.encode()), "sent as written"
        assert response.status_code == 200, path
        assert response.content == plain.content and response.headers["etag"] == plain.headers["etag"]
    # reserved and non-ASCII escapes keep their meaning: still no such endpoint
    assert_problem(api.get("/api/v1/news%2F"), 404, "not-found")
    assert_problem(api.get("/api/v1/glossary%2Fqubit"), 404, "not-found")


def test_options_is_a_cors_preflight(api):
    response = api.request(
        "OPTIONS",
        "/api/v1/news",
        headers={"Origin": "https://example.org", "Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "if-none-match"},
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "*"
    assert "GET" in response.headers["access-control-allow-methods"]
    assert response.headers["access-control-allow-headers"] == "*"
    assert response.content == b""


@pytest.mark.parametrize("path", ["/api/v1/courses", "/api/v1/glossary", "/api/v1/glossary/qubit", "/api/v1/news",
                                  "/api/v1/news?tag=Science", "/api/v1/stats"])
def test_no_data_yet_is_503_with_retry_after(empty_api, path):
    response = empty_api.get(path)
    assert_problem(response, 503, "no-data")
    assert int(response.headers["retry-after"]) > 0


def test_documents_are_served_before_any_data(empty_api):
    assert empty_api.get("/api/v1").status_code == 200
    assert empty_api.get("/api/v1/openapi.json").status_code == 200


def test_news_before_any_news_but_after_the_site(config_path, tmp_path):
    seed_catalog(open_database(tmp_path / "site.db"))
    with ApiClient(datasette_for_config(config_path)) as client:
        assert client.get("/api/v1/courses").status_code == 200
        assert client.get("/api/v1/stats").json()["news_items"] == 0
        assert_problem(client.get("/api/v1/news"), 503, "no-data")


def test_a_database_not_readable_yet_is_unavailable_not_empty(config_path, tmp_path):
    """A first read of ``data_versions`` that fails (here a lock held past the busy timeout) says
    nothing about what the database holds: the answer is "unavailable", and the data once it can be read
    (docs/invariants.md, "Reads and the writer")."""
    path = tmp_path / "site.db"
    seeded_database(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = DELETE")  # a rollback journal: an exclusive lock keeps readers out
    with ApiClient(datasette_for_config(config_path)) as client:
        writer.execute("BEGIN EXCLUSIVE")
        try:
            for locked in ("/api/v1/news", "/api/v1/stats"):
                response = client.get(locked)
                assert_problem(response, 503, "unavailable")
                assert int(response.headers["retry-after"]) > 0
        finally:
            writer.execute("COMMIT")
            writer.close()
        assert client.get("/api/v1/news").status_code == 200
        assert client.get("/api/v1/stats").json()["news_items"] > 0


# -- headers, conditional requests, HEAD ---------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/courses", "/api/v1/glossary", "/api/v1/glossary/qubit",
                                  "/api/v1/news?tag=Science&limit=30", "/api/v1/stats"])
def test_200_headers(shared_api, path):
    response = shared_api.get(path)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "public, max-age=300"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-expose-headers"] == EXPOSED
    etag = response.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
    assert int(response.headers["content-length"]) == len(response.content)
    body = response.json()
    updated = body.get("updated_at", CATALOG_AT)
    assert parse_http_date(response.headers["last-modified"]).strftime("%Y-%m-%dT%H:%M:%SZ") == updated


def test_cache_max_age_comes_from_config(make_config, tmp_path):
    path = make_config(api={"cache_max_age": 17, "rate_limit": "off"})
    seeded_database(tmp_path / "site.db").close()
    with ApiClient(datasette_for_config(path)) as client:
        assert client.get("/api/v1/stats").headers["cache-control"] == "public, max-age=17"
        assert client.get("/api/v1/openapi.json").json()["components"]["headers"]["CacheControl"]["schema"] == {
            "type": "string",
            "enum": ["public, max-age=17", "private, no-store"],
        }


@pytest.mark.parametrize("path", ["/api/v1/courses", "/api/v1/news?tag=Investing", "/api/v1/stats", "/api/v1/openapi.json"])
def test_if_none_match_gives_304(shared_api, path):
    first = shared_api.get(path)
    etag = first.headers["etag"]
    for value in (etag, f'"other", {etag}', f"W/{etag}", "*"):
        again = shared_api.get(path, headers={"If-None-Match": value})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["cache-control"] == "public, max-age=300"
        assert again.headers["access-control-allow-origin"] == "*"
    assert shared_api.get(path, headers={"If-None-Match": '"something-else"'}).status_code == 200


def test_if_modified_since(api):
    first = api.get("/api/v1/courses")
    last_modified = first.headers["last-modified"]
    assert api.get("/api/v1/courses", headers={"If-Modified-Since": last_modified}).status_code == 304
    assert api.get("/api/v1/courses", headers={"If-Modified-Since": "Sat, 21 Nov 2026 00:00:00 GMT"}).status_code == 304
    assert api.get("/api/v1/courses", headers={"If-Modified-Since": "Thu, 19 Nov 2026 00:00:00 GMT"}).status_code == 200
    assert api.get("/api/v1/courses", headers={"If-Modified-Since": "garbage"}).status_code == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110 13.1.3)
    both = api.get("/api/v1/courses", headers={"If-None-Match": '"nope"', "If-Modified-Since": last_modified})
    assert both.status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/courses", "/api/v1/news?limit=3", "/api/v1/nope", "/api/v1/news?limit=0",
                                  "/api/v1"])
def test_head_has_the_get_headers_and_no_body(shared_api, path):
    get = shared_api.get(path)
    head = shared_api.head(path)
    assert head.status_code == get.status_code
    assert head.content == b""
    for name in ("content-type", "content-length", "etag", "last-modified", "cache-control", "link",
                 "access-control-allow-origin"):
        assert head.headers.get(name) == get.headers.get(name)


def test_index_links_everything(api):
    for path in ("/api/v1", "/api/v1/"):
        body = api.get(path).json()
        assert body["documentation"] == "/api/v1/openapi.json"
        assert "education and research" in body["terms"]
        for link in body["endpoints"].values():
            if "{" not in link:
                assert api.get(link).status_code == 200


def test_errors_have_cors_even_outside_a_match(api):
    response = api.get("/api/v1/news?limit=0", headers={"Origin": "https://example.org"})
    assert response.headers["access-control-allow-origin"] == "*"


def test_openapi_checked_every_response(api):
    for path in ("/api/v1/courses", "/api/v1/news?limit=1", "/api/v1/nope"):
        api.get(path)
    assert api.openapi.checked >= 3
    json.dumps(api.openapi.document)  # JSON-serialisable


def test_database_errors_are_503_and_faults_500_without_internals(api):
    from qsite.service.datasette.plugin import get_api
    import sqlite3

    api.get("/api/v1")
    service = get_api(api.datasette)

    async def locked(fn):
        raise sqlite3.OperationalError("database is locked: /srv/secret/site.db SELECT * FROM news")

    service.execute_fn = locked
    response = api.get("/api/v1/news?limit=7")
    assert_problem(response, 503, "unavailable")
    assert int(response.headers["retry-after"]) > 0

    async def broken(fn):
        raise RuntimeError("Traceback: /srv/secret/site.db")

    service.execute_fn = broken
    assert_problem(api.get("/api/v1/news?limit=8"), 500, "internal-error")
    assert "secret" not in api.get("/api/v1/news?limit=8").text
