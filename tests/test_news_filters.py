"""/api/v1/news filters: until, source (repeated, names with commas), q (full text); cursors under every filter."""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qsl, quote

import pytest

from qsite.pipeline.store import open_database
from qsite.service.api.bodies import Build, Invalid
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.kinds import ZONE_NEEDED, DateTime
from qsite.service.api.parameter_table import SOURCE_MAX, SOURCES_MAX
from qsite.service.api.parameters import parse_params
from qsite.service.api.search_language import MISPLACED_OR
from qsite.service.datasette.metadata import configured_queries, query_sql
from tests.support.api_client import news_client
from tests.support.problems import assert_problem
from tests.support.known_data import NEWS_START, SOURCES, news_items, seed_news

COMMA = "Smith, Jones & Co"


def items() -> list[dict]:
    found = news_items(30)
    for i, item in enumerate(found[:6]):
        item["source"] = COMMA  # a publisher whose name has a comma in it
        item["title"] = f"Trapped ion record {i}" if i % 2 else f"Photonic chip {i}"
    found[7]["summary"] = "Photonic interconnects for trapped ions"
    for item in found:  # as the pipeline stores them: a sync walk (updated_since) finds them
        item["change_key"] = item["updated_at"] + "#000000000"
    return found


@pytest.fixture
def client(make_config, tmp_path):
    def comma_source(db):
        db["sources"].insert({"name": COMMA, "url": "https://user:secret@smith.example/feed?token=t0k3n", "tag": "Science"})

    with news_client(make_config, tmp_path / "site.db", items(), prepare=comma_source) as client:
        yield client


def everything(client, query: str) -> list[dict]:
    """Every item of a filtered listing, following next page by page."""
    found, url = [], f"/api/v1/news?{query}"
    first = client.get(url).json()
    while url:
        page = client.get(url).json()
        assert page["count"] == first["count"]
        found += page["results"]
        url = page["next"]
        if url:  # every filter survives into next (in its canonical form), each source too
            kept = [name for name, _ in parse_qsl(url.partition("?")[2], keep_blank_values=True) if name != "cursor"]
            asked = [name for name, _ in parse_qsl(query, keep_blank_values=True)]
            assert set(kept) == set(asked) | {"limit"}
            assert kept.count("source") == len({v for n, v in parse_qsl(query) if n == "source"})
    assert len(found) == first["count"]
    return found


def ids(rows) -> list[str]:
    return [row["id"] for row in rows]


def newest_first(rows) -> bool:
    keys = [(row["published_at"], row["id"]) for row in rows]
    return keys == sorted(keys, reverse=True) and len(set(keys)) == len(keys)


def test_until_keeps_items_published_before(client):
    until = "2026-11-19T20:00:00Z"
    rows = everything(client, f"until={until}&limit=4")
    assert rows and all(row["published_at"] < until for row in rows) and newest_first(rows)
    all_rows = everything(client, "limit=100")
    assert ids(rows) == [row["id"] for row in all_rows if row["published_at"] < until]
    window = everything(client, "since=2026-11-19T18:00:00Z&until=2026-11-20T03:00:00%2B00:00&limit=3")
    assert ids(window) == [r["id"] for r in all_rows if "2026-11-19T18:00:00Z" < r["published_at"] < "2026-11-20T03:00:00Z"]
    assert client.get("/api/v1/news?until=yesterday").status_code == 400


def test_source_takes_exact_names_repeated(client):
    all_rows = everything(client, "limit=100")
    lab = everything(client, f"source={quote(SOURCES['Science'])}&limit=2")
    assert ids(lab) == [r["id"] for r in all_rows if r["source"] == SOURCES["Science"]]
    both = everything(client, f"source={quote(COMMA)}&source={quote(SOURCES['Industry'])}&limit=4")
    assert ids(both) == [r["id"] for r in all_rows if r["source"] in (COMMA, SOURCES["Industry"])]
    assert {row["source"] for row in both} == {COMMA, SOURCES["Industry"]}
    # a name is never split at its comma, and a comma-separated list is one (unknown) name
    smith = client.get(f"/api/v1/news?source={quote(COMMA)}").json()
    assert smith["count"] == 6
    assert client.get("/api/v1/news?source=Smith").status_code == 400
    listed = quote(f"{SOURCES['Science']},{SOURCES['Industry']}")
    assert client.get(f"/api/v1/news?source={listed}").status_code == 400
    # exact: letter case matters (the name meant is only suggested: below)
    assert client.get(f"/api/v1/news?source={quote(SOURCES['Science'].upper())}").status_code == 400


def no_publisher(name: str, *meant: str) -> str:
    """The detail of a ``source`` no publisher is named, suggesting ``meant``."""
    guess = " (did you mean " + " or ".join(repr(one) for one in meant) + "?)" if meant else ""
    return f"no publisher is named {name!r}{guess}; /api/v1/sources lists them"


#: A sync walk from before every item: it takes source as /news does.
WALK = "updated_since=2020-01-01T00:00:00Z&"
NEWS_PATHS = ("/api/v1/news?", f"/api/v1/news?{WALK}", "/api/v1/news.atom?", "/api/v1/news.json?")


@pytest.mark.parametrize(
    ("query", "details"),
    [
        # letter case is part of a name: the one meant is suggested, never taken
        ("source=lab%20notes", [no_publisher("lab notes", SOURCES["Science"])]),
        (f"source={quote(SOURCES['Science'].upper())}", [no_publisher(SOURCES["Science"].upper(), SOURCES["Science"])]),
        # a slug, as other APIs' source ids are; words in another order; a part of a name
        ("source=lab-notes", [no_publisher("lab-notes", SOURCES["Science"])]),
        ("source=Brief%20Capital", [no_publisher("Brief Capital", SOURCES["Investing"])]),
        ("source=Smith", [no_publisher("Smith", COMMA)]),
        ("source=Wire%20RSS", [no_publisher("Wire RSS")]),
        ("source=Industry%20Wire%20RSS", [no_publisher("Industry Wire RSS", SOURCES["Industry"])]),
        ("source=nobody", [no_publisher("nobody")]),
        # a comma-separated list (NewsAPI's sources=) of publishers' names
        (
            f"source={quote(SOURCES['Science'] + ',' + SOURCES['Industry'])}",
            [f"no publisher is named {SOURCES['Science'] + ',' + SOURCES['Industry']!r}, though each name between its "
             "commas is one; write source= once per publisher"],
        ),
        (f"source={quote(SOURCES['Science'] + ', ' + COMMA)}", [
            f"no publisher is named {SOURCES['Science'] + ', ' + COMMA!r}, though each name between its commas is one; "
            "write source= once per publisher"]),
        # one error for each name no publisher has (in their canonical order), none for the others
        ("source=zz&source=lab%20notes&source=Lab%20Notes&tag=Industry",
         [no_publisher("lab notes", SOURCES["Science"]), no_publisher("zz")]),
        # several publishers meant
        ("source=Notes%20Wire", [no_publisher("Notes Wire")]),
    ],
)
def test_a_source_no_publisher_has_is_a_400_suggesting_the_one_meant(client, query, details):
    """A name no publisher has can match nothing, now or later (publishers are only ever added): not an empty 200."""
    for path in NEWS_PATHS:
        body = assert_problem(client.get(path + query), 400, "invalid-parameters")
        assert body["detail"] == "invalid query parameters: source"
        assert body["errors"] == [{"parameter": "source", "detail": detail} for detail in details], path


def test_publishers_that_match_nothing_are_an_empty_200(client):
    """Only a name no publisher has is refused: a publisher with no item in the range, tag or search is an empty answer."""
    for query in (f"source={quote(SOURCES['Science'])}&tag=Industry", f"source={quote(COMMA)}&q=nowhere",
                  f"source={quote(COMMA)}&source={quote(SOURCES['Science'])}&since=2030-01-01T00:00:00Z"):
        assert client.get(f"/api/v1/news?{query}").json()["count"] == 0, query
        assert client.get(f"/api/v1/news.json?{query}").json()["items"] == [], query
        assert client.get(f"/api/v1/news.atom?{query}").status_code == 200, query
    walk = client.get(f"/api/v1/news?updated_since=2030-01-01T00:00:00Z&source={quote(COMMA)}").json()
    assert walk["count"] == 0 and walk["results"] == []


def test_the_publishers_are_looked_up_only_for_an_empty_answer(client, tmp_path):
    """An answer with items runs no query but its own: only an empty one asks which names are publishers'."""
    sql = query_sql(configured_queries())
    conn = sqlite3.connect(f"file:{tmp_path / 'site.db'}?mode=ro", uri=True)

    def looked_up(endpoint: str, query: str) -> bool:
        values, errors = parse_params(ENDPOINTS[endpoint].params, query.encode())
        assert not errors, errors
        ran: list[str] = []
        conn.set_trace_callback(ran.append)
        try:
            ENDPOINTS[endpoint].build(Build(ENDPOINTS[endpoint], values, None, conn, sql, read_versions(conn)))
        except Invalid:
            pass
        finally:
            conn.set_trace_callback(None)
        # the statements as run, parameters filled in: the query's text up to its first one
        return any(statement.startswith(sql["source_names"].partition(":")[0]) for statement in ran)

    lab = quote(SOURCES["Science"])
    for endpoint in ("news", "news_atom", "news_json"):
        assert not looked_up(endpoint, f"source={lab}&limit=1")
        assert not looked_up(endpoint, f"source={lab}&source=nobody")  # items: the unknown name is not looked at
        assert not looked_up(endpoint, "tag=Industry&q=nowhere")  # empty, but no source asked
        assert looked_up(endpoint, f"source={lab}&tag=Industry")
    assert not looked_up("news", f"{WALK}source={lab}")
    assert looked_up("news", f"updated_since=2030-01-01T00:00:00Z&source={lab}")
    conn.close()


def test_the_errors_of_unknown_sources_stay_small(client):
    """At most 20 names, each quoted cut to 64 characters, as are the publishers meant."""
    names = [f"{n:02d}{',' * 60}lab notes {'x' * 120}" for n in range(SOURCES_MAX)]
    response = client.get("/api/v1/news", params={"source": names})
    body = assert_problem(response, 400, "invalid-parameters", ["source"] * SOURCES_MAX)
    for n, (name, error) in enumerate(zip(names, body["errors"])):
        meant = [SOURCES["Science"]] if n < 3 else []  # suggestions for the first three only
        assert error["detail"] == no_publisher(name[:64] + "\u2026", *meant)
    assert len(response.content) < 4096


def test_unknown_sources_with_long_suggestions_stay_small(make_config, tmp_path):
    """20 near misses of publishers with long names: only three of the names get suggestions."""
    long_names = [f"Quokka Digest {letter * 70}" for letter in "xyz"]

    def long_publishers(db):
        for name in [COMMA, *long_names]:
            db["sources"].insert({"name": name, "url": f"https://{name[-1]}.example/feed", "tag": "Science"})

    asked = ["quokka" + "-" * n + "digest" for n in range(1, SOURCES_MAX + 1)]  # each one's words are in all three
    with news_client(make_config, tmp_path / "site.db", items(), prepare=long_publishers) as client:
        response = client.get("/api/v1/news", params={"source": asked})
    body = assert_problem(response, 400, "invalid-parameters", ["source"] * SOURCES_MAX)
    meant = [name[:64] + "\u2026" for name in long_names]
    suggested = {no_publisher(name, *meant) for name in asked}
    plain = {no_publisher(name) for name in asked}
    details = [error["detail"] for error in body["errors"]]
    assert len([d for d in details if d in suggested]) == 3 and len([d for d in details if d in plain]) == SOURCES_MAX - 3
    assert len(response.content) < 4096


def test_equivalent_source_lists_are_one_answer(client):
    a, b = quote(COMMA), quote(SOURCES["Industry"])
    first = client.get(f"/api/v1/news?source={a}&source={b}")
    for query in (f"source={b}&source={a}", f"source={a}&source={b}&source={a}"):
        again = client.get(f"/api/v1/news?{query}")
        assert again.content == first.content and again.headers["etag"] == first.headers["etag"]


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("source=", "source"),
        ("source=" + "x" * (SOURCE_MAX + 1), "source"),
        ("&".join(f"source=s{i}" for i in range(SOURCES_MAX + 1)), "source"),
        ("until=2026-13-01T00:00:00Z", "until"),
        ("q=" + "w" * 201, "q"),
        ("sources=x", "sources"),
        ("q=a&q=b", "q"),
    ],
)
def test_bad_filters_are_problems(client, query, parameter):
    response = client.get(f"/api/v1/news?{query}")
    assert response.status_code == 400
    assert parameter in [error["parameter"] for error in response.json()["errors"]]


def test_q_searches_title_and_summary(client):
    all_rows = everything(client, "limit=100")
    photonic = everything(client, "q=photonic&limit=2")
    assert set(ids(photonic)) == {r["id"] for r in all_rows if "photonic" in (r["title"] + r["summary"]).lower()}
    assert len(photonic) == 4  # three titles and one summary
    assert newest_first(photonic)
    both = client.get("/api/v1/news?q=TRAPPED%20ions").json()  # every word must occur; stemmed, any case
    assert {row["id"] for row in both["results"]} == {r["id"] for r in all_rows if "trapped" in (r["title"] + r["summary"]).lower()}
    assert client.get("/api/v1/news?q=photonic%20nothing").json()["count"] == 0
    assert client.get('/api/v1/news?q=%22%20AND%20(*%20NEAR').json()["count"] == 0  # FTS syntax is text (and, near: words)
    assert client.get("/api/v1/news?q=%20").json()["count"] == len(all_rows)  # blank: no filter


def test_q_excludes_a_word_after_a_minus_and_takes_either_word_of_an_or(client):
    """``-word`` must not occur, ``a OR b`` takes either, OR binding tighter than the words' AND; in every
    listing of a search (pages, oldest first, the feeds) and its next links."""
    all_rows = everything(client, "limit=100")

    def having(*words: str) -> set[str]:
        return {r["id"] for r in all_rows if all(word in (r["title"] + " " + r["summary"]).lower() for word in words)}

    photonic, trapped = having("photonic"), having("trapped")
    assert len(photonic) == 4 and len(trapped) == 4 and len(photonic & trapped) == 1  # the summary of item 7
    excluded = everything(client, "q=photonic%20-trapped&limit=2")
    assert set(ids(excluded)) == photonic - trapped and newest_first(excluded)
    either = everything(client, "q=photonic%20OR%20trapped&limit=2")
    assert set(ids(either)) == photonic | trapped and newest_first(either)
    oldest = everything(client, "q=photonic%20OR%20trapped&sort=published_at&limit=3")
    assert ids(oldest) == ids(either)[::-1]
    # (record OR chip) AND NOT trapped: OR binds first, the exclusion applies to the whole
    assert set(ids(everything(client, "q=record%20OR%20chip%20-trapped&limit=2"))) == photonic - trapped
    # ions is stemmed as ion: item 7's summary and the three titles "Trapped ion record" are left out
    assert set(ids(everything(client, "q=headline%20OR%20trapped%20-ions"))) == having("headline") - having("ion")
    # a quoted phrase is its words, in any order; a hyphen inside a word separates two words, both needed
    assert set(ids(everything(client, "q=%22chip%20photonic%22"))) == having("photonic", "chip") == photonic - trapped
    assert set(ids(everything(client, "q=Photonic-chip"))) == having("photonic", "chip")
    # an excluded term of several words excludes the items that have them all
    assert set(ids(everything(client, "q=photonic%20-%22trapped%20ions%22"))) == photonic - trapped
    assert set(ids(everything(client, "q=photonic%20-trapped-nowhere"))) == photonic
    # lower-case or, and, not, and upper-case NOT, are words like any other
    for words in ("photonic%20or%20trapped", "photonic%20NOT%20trapped", "photonic%20and%20trapped"):
        assert client.get(f"/api/v1/news?q={words}").json()["count"] == 0, words
    # one canonical text: in next links, and for the cache
    first = client.get("/api/v1/news?q=-TRAPPED%20%20Photonic&limit=1").json()
    assert dict(parse_qsl(first["next"].partition("?")[2]))["q"] == "photonic -trapped"
    assert client.get("/api/v1/news?q=photonic%20-trapped").json()["count"] == first["count"] == 3
    feed = client.get("/api/v1/news.json?q=photonic%20-trapped").json()
    assert feed["title"] == "qsite news: \u201cphotonic -trapped\u201d"
    assert [item["url"] for item in feed["items"]] == [r["url"] for r in excluded]
    atom = client.get("/api/v1/news.atom?q=photonic%20OR%20trapped&limit=100")
    assert atom.status_code == 200 and atom.text.count("<entry>") == len(either)


@pytest.mark.parametrize(
    ("q", "detail"),
    [
        ("-photonic", "needs at least one word to include: a word after - is only excluded"),
        ("-photonic -trapped", "needs at least one word to include: a word after - is only excluded"),
        ('-"photonic chip"', "needs at least one word to include: a word after - is only excluded"),
        ("OR", MISPLACED_OR),
        ("OR photonic", MISPLACED_OR),
        ("photonic OR", MISPLACED_OR),
        ("photonic OR OR trapped", MISPLACED_OR),
        ("photonic OR -trapped", MISPLACED_OR),
        ("-photonic OR trapped", MISPLACED_OR),
        ('" OR *', MISPLACED_OR),  # no word on either side: punctuation is not a word
    ],
)
def test_a_search_that_leaves_nothing_to_match_is_a_400_naming_q(client, q, detail):
    for path in ("/api/v1/news", "/api/v1/news.atom", "/api/v1/news.json"):
        response = client.get(path, params={"q": q})
        assert response.status_code == 400, (path, q)
        assert response.json()["errors"] == [{"parameter": "q", "detail": detail}]


@pytest.mark.parametrize(
    ("since", "until"),
    [
        ("2025-03-10T00:00:00Z", "2025-03-01T00:00:00Z"),  # swapped
        ("2025-03-10T00:00:00Z", "2025-03-10T00:00:00Z"),  # equal: both ends exclusive, no item between
        ("2025-03-10T02:00:00+02:00", "2025-03-10T00:00:00Z"),  # equal in UTC
        ("2025-03-10T00:00:00.5Z", "2025-03-10T00:00:00.5Z"),  # equal to the fraction
        ("2025-03-10T00:00:00.7Z", "2025-03-10T00:00:00.5Z"),  # since's second is before until's rounded up
    ],
)
def test_since_at_or_after_until_is_a_400(client, since, until):
    for path in ("/api/v1/news", "/api/v1/news.atom", "/api/v1/news.json"):
        response = client.get(path, params={"since": since, "until": until})
        assert response.status_code == 400, (path, since, until)
        assert response.json()["errors"] == [{"parameter": "since", "detail": "must be before until"}]


def test_since_before_until_by_less_than_a_second_is_an_empty_answer(client):
    """Stored times are whole seconds: a range between two of them, or within one, holds no item, and is no error."""
    for since, until in (("2026-11-20T08:00:00Z", "2026-11-20T08:00:01Z"), ("2026-11-20T08:00:00.5Z", "2026-11-20T08:00:00.6Z")):
        body = client.get("/api/v1/news", params={"since": since, "until": until}).json()
        assert (body["count"], body["results"]) == (0, [])
    around = client.get("/api/v1/news", params={"since": "2026-11-20T07:59:59Z", "until": "2026-11-20T08:00:01Z"}).json()
    assert [r["published_at"] for r in around["results"]] == ["2026-11-20T08:00:00Z"]


def test_every_filter_at_once_pages_without_gaps_or_repeats(client):
    query = f"tag=Science&source={quote(COMMA)}&source={quote(SOURCES['Science'])}&since=2026-11-18T00:00:00Z" \
            f"&until={quote('2026-11-20T09:00:00+00:00')}&q=headline&limit=1"
    rows = everything(client, query)
    all_rows = everything(client, "limit=100")
    expected = [
        r for r in all_rows
        if r["tag"] == "Science" and r["source"] in (COMMA, SOURCES["Science"])
        and "2026-11-18T00:00:00Z" < r["published_at"] < "2026-11-20T09:00:00Z" and "headline" in r["title"].lower()
    ]
    assert rows and ids(rows) == ids(expected) and newest_first(rows)


def test_the_cursor_keeps_working_while_items_arrive(client, tmp_path):
    query = f"source={quote(COMMA)}&limit=2"
    first = client.get(f"/api/v1/news?{query}").json()
    db = open_database(tmp_path / "site.db")
    newer = news_items(3, start=NEWS_START.replace(year=2027), prefix="new")
    for item in newer:
        item["source"] = COMMA
    seed_news(db, newer, changed_at="2026-11-21T00:00:00Z")
    db.close()
    client.run(__import__("qsite.service.datasette.plugin", fromlist=["get_api"]).get_api(client.datasette).cache.refresh(force=True))
    rest, url = [], first["next"]
    while url:
        page = client.get(url).json()
        rest += page["results"]
        url = page["next"]
    expected = sorted((r for r in items() if r["source"] == COMMA), key=lambda r: (r["published_at"], r["id"]), reverse=True)
    assert ids(first["results"]) + ids(rest) == ids(expected)


#: The 400's detail for a time that is no RFC 3339 date-time and no near miss of one.
NOT_A_TIME = DateTime.detail


@pytest.mark.parametrize(
    ("given", "detail"),
    [
        ("2025-03-01", f"{ZONE_NEEDED}; a date alone is not one: its start in UTC is 2025-03-01T00:00:00Z"),
        ("2025-03-01T08:30", f"{ZONE_NEEDED}; add one: in UTC, 2025-03-01T08:30:00Z"),
        ("2025-03-01 08:30:15.25", f"{ZONE_NEEDED}; add one: in UTC, 2025-03-01T08:30:15.25Z"),
        ("2025-02-30", NOT_A_TIME),  # no such day: no time to suggest
        ("2025-03-01T24:30", NOT_A_TIME),
        ("yesterday", NOT_A_TIME),
    ],
)
def test_a_time_without_its_zone_is_a_400_that_writes_it_in_utc(client, given, detail):
    """A date alone or a time with no zone names its parameter and says what to send; what it says is taken."""
    for path, name in (("/api/v1/news", "since"), ("/api/v1/news", "until"), ("/api/v1/news", "updated_since"),
                       ("/api/v1/news.atom", "since"), ("/api/v1/news/removed", "since")):
        response = client.get(path, params={name: given})
        assert response.status_code == 400, (path, name, given)
        assert response.json()["errors"] == [{"parameter": name, "detail": detail}], (path, name)
        if detail != NOT_A_TIME:
            suggested = detail.rpartition(" ")[2]
            assert client.get(path, params={name: suggested}).status_code == 200, (path, name, suggested)
