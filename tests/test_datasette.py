"""Datasette for researchers: metadata, facets, search, canned queries, CSV, and no way to write."""

from __future__ import annotations

import csv
import io
import json

import pytest
import yaml
from datasette.utils.asgi import NotFound, Request

from qsite.pipeline.store import open_database
from qsite.service.datasette.errors import error_response
from qsite.service.datasette.metadata import METADATA_PATH, QUERY_NAMES, QUERY_PREFIX, load_metadata
from qsite.service.compat import canned_query_sql, datasette_1
from qsite.service.datasette.plugin import get_api
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import news_id, seeded_database
from tests.support.snapshot import snapshot


@pytest.fixture
def client(seeded_config):
    with ApiClient(datasette_for_config(seeded_config)) as made:
        yield made


def test_instance_metadata_has_title_and_usage_terms(client):
    metadata = client.get("/-/metadata.json").json()
    assert metadata["title"] == "qsite"
    text = (metadata["description"] + " " + metadata["license"]).lower()
    for phrase in ("fair use", "attribution", "publishers", "education and research", "not investment advice"):
        assert phrase in text


def test_every_table_and_column_is_described(tmp_path):
    db = open_database(tmp_path / "schema.db")
    described = yaml.safe_load(METADATA_PATH.read_text(encoding="utf-8"))["databases"]["site"]["tables"]
    fts = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'")]
    fts_shadow = {f"{name}_{part}" for name in fts for part in ("data", "idx", "docsize", "config", "content")}
    for table in db.table_names():
        if table.endswith("_fts") or table in fts_shadow or table == "sqlite_sequence":
            continue
        assert table in described, f"metadata.yml does not describe table {table}"
        if described[table].get("hidden"):
            continue
        assert described[table].get("description"), table
        columns = described[table].get("columns", {})
        for column in db[table].columns_dict:
            assert columns.get(column), f"metadata.yml does not describe {table}.{column}"


def test_no_table_holds_quiz_content_or_user_data(tmp_path):
    db = open_database(tmp_path / "schema.db")
    for table in db.table_names():
        for column in db[table].columns_dict:
            name = column.lower()
            assert not any(word in name for word in ("answer", "explanation", "email", "password", "user"))
            assert "question" not in name or name == "question_bank_size"


def listed_queries(client, database: str) -> dict[str, str]:
    """``{name: sql}`` of the canned queries Datasette has for ``database``, asked through its public API."""
    names = [QUERY_PREFIX + name for name in QUERY_NAMES] + ["elsewhere"]
    return client.run(canned_query_sql(client.datasette, database, names))


def test_metadata_is_bound_to_the_served_database_name(make_config, tmp_path):
    seeded_database(tmp_path / "research.db").close()
    path = make_config(database=str(tmp_path / "research.db"), api={"rate_limit": "off"})
    with ApiClient(datasette_for_config(path)) as other:
        assert other.get("/api/v1/courses").json()["count"] == 2
        assert set(listed_queries(other, "research")) == {QUERY_PREFIX + name for name in QUERY_NAMES}
    assert load_metadata("research")["databases"].keys() == {"research"}


def test_news_opens_with_facets_on_tag_and_source(client):
    # the page as it opens, no facet asked for (Datasette 1.0 sends them with _extra only; 0.65 ignores it)
    body = client.get("/site/news.json?_extra=facet_results").json()
    facets = body["facet_results"]
    facets = facets.get("results", facets)  # Datasette 1.0: {"results": {...}, "timed_out": [...]}
    assert {"tag", "source"} <= set(facets)
    tags = {row["value"]: row["count"] for row in facets["tag"]["results"]}
    assert tags == {"Science": 15, "Industry": 15, "Investing": 15}


@pytest.mark.parametrize("table, term, expected", [("news", "Headline 7", news_id(7)), ("glossary", "sphere", "bloch-sphere")])
def test_full_text_search_on_news_and_glossary(client, table, term, expected):
    rows = client.get(f"/site/{table}.json", params={"_search": f'"{term}"', "_shape": "array"}).json()
    assert expected in [row["id"] for row in rows]


def test_canned_queries_are_listed_and_are_what_the_api_runs(client):
    listed = listed_queries(client, "site")
    client.get("/api/v1")
    api = get_api(client.datasette)
    for name in QUERY_NAMES:
        assert api.sql[name] == listed[QUERY_PREFIX + name]
    # researchers running the canned query see exactly the rows the API serves
    rows = client.get("/site/api_news.json", params={"tag": "Science", "limit": "5", "_shape": "array"}).json()
    api_items = client.get("/api/v1/news?tag=Science&limit=5").json()["results"]
    # the same rows; authors are stored (and so shown to researchers) as the JSON array the API sends
    assert [{**row, "authors": json.loads(row["authors"])} for row in rows] == api_items


def test_csv_export(client):
    response = client.get("/site/news.csv", params={"_size": "max"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain") or "csv" in response.headers["content-type"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == 45 and {"id", "title", "url", "source", "summary", "tag", "published_at"} <= set(rows[0])
    canned = list(csv.DictReader(io.StringIO(client.get("/site/api_courses.csv").text)))
    assert [row["id"] for row in canned] == ["quantum-basics", "algorithms"]


@pytest.mark.parametrize(
    "path",
    [
        "/site.csv?sql=select+nope",
        "/site.csv?sql=select+randomblob(2000000)",
        "/site/api_news.csv?limit=abc",
        "/site/api_news.csv?sources=notjson",
        "/site.csv?sql=select+nope&_stream=on",
        "/site.csv?sql=select+nope&_header=off",
    ],
)
@pytest.mark.skipif(datasette_1(), reason="1.0 answers these itself (400 pages at /site/-/query.csv), unchanged by qsite")
def test_a_csv_export_of_sql_that_fails_is_a_400(client, path):
    """Datasette 0.65 answers these 200 with an empty body (simonw/datasette#2129); the .json forms are 400s."""
    response = client.get(path)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"]
    assert client.head(path).status_code == 400


@pytest.mark.skipif(datasette_1(), reason="1.0 redirects /site.csv?sql= to /site/-/query.csv")
def test_a_csv_export_that_runs_is_untouched(client):
    assert client.get("/site.csv?sql=select+1+as+a+where+0&_header=off").text == ""  # no rows, no header
    empty = client.get("/site.csv?sql=select+1+as+a+where+0")
    assert empty.status_code == 200 and empty.text == "a\r\n"
    unnamed = client.get("/site.csv", params={"sql": 'select 1 as ""'})
    assert unnamed.status_code == 200 and unnamed.text == '""\r\n1\r\n'
    streamed = client.get("/site/news.csv?_stream=on")
    assert streamed.status_code == 200 and len(list(csv.DictReader(io.StringIO(streamed.text)))) == 45


@pytest.mark.parametrize(
    "sql",
    [
        "update news set title = 'defaced'",
        "delete from courses",
        "insert into glossary (id, term, definition, lesson_title, lesson_url) values ('x', 'x', 'x', 'x', 'x')",
        "drop table news",
        "pragma writable_schema = 1",
        "attach database 'evil.db' as evil",
        "with x as (select 1) delete from news",
        "select 1; delete from news",
    ],
)
def test_arbitrary_sql_cannot_write(client, tmp_path, sql):
    before = snapshot(tmp_path / "site.db")
    response = client.get("/site.json", params={"sql": sql}, follow_redirects=True)
    assert response.status_code in (400, 403)
    assert snapshot(tmp_path / "site.db") == before


@pytest.mark.parametrize(
    "params",
    [
        {"sql": "select length(randomblob(50000000)) from news"},  # 8 s, one step at a time past the time limit
        {"sql": "select randomblob(1000000000)"},  # 3 GB
        {"sql": "select " + ", ".join(["randomblob(900000)"] * 120)},  # 108 MB in values under the cap
    ],
)
def test_a_query_that_makes_a_huge_value_fails_at_once(client, params):
    response = client.get("/site.json", params=params, follow_redirects=True)
    assert response.status_code == 400
    assert "too big" in response.json()["error"] or "too many columns" in response.json()["error"]


def test_printf_past_the_cap_makes_nothing(client):
    sql = "select length(printf('%.*c', 1000000000, 'x')) as made"  # 4.9 GB and 38 s before the cap
    response = client.get("/site.json", params={"sql": sql, "_shape": "array"}, follow_redirects=True)
    # SQLite 3.40 answers NULL past the cap; later versions refuse the value as too big (the SQLite
    # `make test` runs on, tools/build-sqlite.sh). Either way nothing is made, and no 5xx.
    if response.status_code == 200:
        assert response.json() == [{"made": None}]
    else:
        assert response.status_code == 400
        assert "too big" in response.json()["error"]


def test_a_table_filter_that_makes_a_huge_value_fails_at_once(client):
    response = client.get("/site/news.json", params={"_where": "randomblob(1000000000)"})  # ran for 15 minutes and more
    assert response.status_code == 400


@pytest.mark.parametrize(
    "query",
    [
        "_timelimit=x",
        "_through=x",
        "_through=1",
        "id__in=[1,2",
        "id__notin=[1,2",
        "_facet=%00",
        "_facet_array=%00",
        "_facet_date={x",
        "_facet_size={x",
        "_where=%00",
        "_where=1;drop table news",
        "_sort=%00",
        "_search=%00",
        "_through=%7B%22table%22:%22x%22%7D",  # a JSON object without the keys Datasette reads: KeyError
        "rowid__gt=99999999999999999999999",  # past SQLite's 64-bit integers: OverflowError
    ],
)
def test_a_table_page_answers_what_it_cannot_read_as_a_400(client, tmp_path, caplog, query):
    before = snapshot(tmp_path / "site.db")
    for path in ("/site/news.json", "/site/news"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400, (path, response.text[:300])
    assert not [record for record in caplog.records if record.levelname == "ERROR"]
    assert snapshot(tmp_path / "site.db") == before


def test_sql_past_the_time_limit_is_a_400_in_csv_too(client, caplog):
    """Datasette's JSON answers it as a 400 "SQL Interrupted"; its CSV raised QueryInterrupted, a 500."""
    endless = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"
    for path in ("/site.json", "/site.csv"):
        response = client.get(path, params={"sql": endless}, follow_redirects=True)
        assert response.status_code == 400, (path, response.text[:300])
    assert not [record for record in caplog.records if record.levelname == "ERROR"]


def test_a_canned_query_csv_with_a_parameter_of_the_wrong_type_is_a_400(client, caplog):
    """limit=abc: "datatype mismatch" (an IntegrityError on 1.0, where its CSV raised it as a 500)."""
    response = client.get("/site/api_news.csv", params={"limit": "abc"}, follow_redirects=True)
    assert response.status_code == 400, response.text[:300]
    assert not [record for record in caplog.records if record.levelname == "ERROR"]


def test_sql_never_shows_the_database_file_path(client, tmp_path):
    for sql in ("select * from pragma_database_list", "select file from pragma_database_list()"):
        response = client.get("/site.json", params={"sql": sql, "_shape": "array"}, follow_redirects=True)
        assert response.status_code == 200
        assert str(tmp_path) not in response.text
        assert [row["file"] for row in response.json()] == [None]


def test_canned_queries_cannot_write(client, tmp_path):
    before = snapshot(tmp_path / "site.db")
    # a canned query ignores a sql parameter, and none of them accepts a write
    for path in ("/site/api_courses.json", "/site/api_news.json", "/site/api_stats.json"):
        response = client.get(path, params={"sql": "delete from courses", "_shape": "array"})
        assert response.status_code == 200
    assert snapshot(tmp_path / "site.db") == before
    assert client.get("/api/v1/news").json()["count"] == 45


@pytest.mark.parametrize("path", ["/api/v1/news", "/api/v1"])
def test_the_api_refuses_every_method_but_get_head_options(client, path):
    for method in ("POST", "PUT", "PATCH", "DELETE", "TRACE"):
        response = client.request(method, path, data={"tag": "Science"})
        assert response.status_code == 405, method
        assert response.headers["allow"] == "GET, HEAD, OPTIONS"
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"] == "/api/v1/problems/method-not-allowed"


@pytest.mark.parametrize(
    "path", ["/site/api_news", "/site/api_courses.json", "/site", "/site/news", "/-/logout", "/", "/nowhere"]
)
def test_other_methods_outside_the_api_reach_datasette_and_never_write_or_fail(client, tmp_path, path):
    """Datasette answers them (its POST routes, other plugins'); a read-only instance stays unchanged, never a 5xx."""
    before = snapshot(tmp_path / "site.db")
    for method in ("POST", "PUT", "PATCH", "DELETE", "TRACE"):
        response = client.request(method, path, data={"sql": "delete from news", "tag": "Science", "limit": "5"})
        assert response.status_code < 500, (method, response.status_code, response.text[:200])
    assert snapshot(tmp_path / "site.db") == before
    assert client.get(path).status_code in (200, 302, 404)  # reads still reach Datasette


@pytest.mark.slow
def test_arbitrary_sql_has_a_time_limit(client):
    runaway = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"
    response = client.get("/site.json", params={"sql": runaway}, follow_redirects=True)
    assert response.status_code == 400
    assert "too long" in response.text.lower() or "interrupted" in response.text.lower()


@pytest.mark.parametrize(
    "path",
    [
        "/site/nothing.json",  # Datasette's 404s, which a shared cache may keep on its own reckoning (Varnish: 120 s)
        "/site/nothing",
        "/site/news/no-such-row",
        "/a/b/c/d/e/f/g",
        "/-/static/nothing.css",
        "/site/news.json?_sort=nope",  # its 400s
        "/site.json?sql=select+nope",
        "/site.csv?sql=select+nope",
    ],
)
def test_datasettes_errors_are_never_stored(client, path):
    """As the API's errors (docs/api.md, "Errors"): the next request may succeed."""
    response = client.get(path, follow_redirects=True)
    assert 400 <= response.status_code < 500, response.text[:300]
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["access-control-allow-origin"] == "*"


def test_datasettes_pages_keep_their_own_cache_control(client):
    assert client.get("/site/news.json?_size=1").headers["cache-control"] == "max-age=5"


def test_the_error_answer_says_no_store_on_the_apis_paths_too(client):
    """Where the plugin's wrapper leaves the answer to the API (/api/v1), the error answer says it itself."""
    for path in ("/api/v1/x.json", "/api/v1/x"):
        response = client.run(error_response(client.datasette, Request.fake(path), NotFound("nothing here")))
        assert response.status == 404 and response.headers["cache-control"] == "no-store"
