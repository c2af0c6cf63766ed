"""The byte budget of one SQL answer on qsite's database, and the SQL functions no query may call.

In-process (``datasette.client`` through the plugin's wrappers): an answer past
``api.sql_answer_max_bytes`` is a 400 problem naming the budget and its key, for
``?sql=`` and ``_where=``, JSON and CSV (a page: Datasette's error page saying the
same), and is refused as its rows are fetched, so the memory a request takes stays
near the budget whatever the query would make; ``fts3_tokenizer`` is refused in both
its forms on Datasette's connections of the database.
"""

from __future__ import annotations

import sqlite3
import tracemalloc
from urllib.parse import quote

import pytest

from qsite.service.datasette import connections
from qsite.service.datasette.answer_budget import CONFIG_KEY, CELL_BYTES, AnswerTooLarge, count_answers, row_bytes
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import seeded_database

#: The budget of the small config here: 64 KB, the least the config takes.
BUDGET = 65_536


def wide(columns: int, width: int, rows: int) -> str:
    """SQL answering ``rows`` rows of ``columns`` values of ``width`` characters each."""
    values = ", ".join(f"printf('%.*c', {width}, 'x') c{n}" for n in range(columns))
    return f"with recursive r(n) as (select 1 union all select n + 1 from r where n < {rows}) select {values} from r"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from tests.support.config_files import write_config

    folder = tmp_path_factory.mktemp("budget")
    seeded_database(folder / "site.db").close()
    config = write_config(folder, api={"rate_limit": "off", "sql_answer_max_bytes": BUDGET, "sql_time_limit_ms": 20_000})
    with ApiClient(datasette_for_config(config), check=False) as made:
        yield made


def get(client, path: str):
    """``path`` through the plugin, following Datasette 1.0's redirect of ``/site.json?sql=`` to ``/site/-/query.json``."""
    return client.get(path, follow_redirects=True)


def assert_refused(response, budget: int = BUDGET) -> dict:
    assert response.status_code == 400, response.text[:300]
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["access-control-allow-origin"] == "*"
    body = response.json()
    assert body["type"] == "/api/v1/problems/bad-request" and body["status"] == 400
    assert f"{budget:,} bytes" in body["detail"] and CONFIG_KEY in body["detail"], body
    assert body["ok"] is False and body["error"] == body["detail"]
    return body


@pytest.mark.parametrize("path", ["/site.json", "/site.csv", "/site.json?_shape=array&x=1"])
def test_sql_answer_past_the_budget_is_a_problem_naming_it(client, path):
    joiner = "&" if "?" in path else "?"
    assert_refused(get(client, f"{path}{joiner}sql=" + quote(wide(4, 10_000, 5))))  # 200 KB


def test_an_answer_within_the_budget_is_whole(client):
    rows = 5
    width = (BUDGET // rows - 2 * CELL_BYTES) // 2 - 10  # two values a row, just under the budget in all
    response = get(client, "/site.json?_shape=array&sql=" + quote(wide(2, width, rows)))
    assert response.status_code == 200, response.text[:300]
    assert len(response.json()) == rows and all(len(row["c1"]) == width for row in response.json())
    response = get(client, "/site.json?_shape=array&sql=" + quote(wide(2, width + 200, rows)))
    assert_refused(response)


def test_datasettes_own_pages_of_the_data_are_within_the_budget(client):
    for path in ("/site/news.json?_size=max", "/site/news.csv?_size=max", "/site/news?_where=" + quote("1 = 1"), "/site/courses.json", "/site/glossary.json?_search=a"):
        response = get(client, path)
        assert response.status_code == 200, (path, response.text[:300])


def test_a_page_past_the_budget_is_datasettes_error_page(client):
    response = get(client, "/site?sql=" + quote(wide(4, 10_000, 5)))
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert f"{BUDGET:,} bytes" in response.text and CONFIG_KEY in response.text


def assert_refused_holding_little(client, sql: str) -> None:
    """``sql`` is refused for the budget while Python's allocations peak below 20 MB."""
    tracemalloc.start()
    try:
        response = get(client, "/site.json?sql=" + quote(sql))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_refused(response)
    assert peak < 20_000_000, peak


def test_an_answer_of_hundreds_of_megabytes_is_refused_before_it_is_built(client):
    """200 MB of values (200 rows of a megabyte): Python never holds more than a few megabytes of them."""
    assert_refused_holding_little(client, wide(1, 999_000, 200))


def test_one_row_of_a_hundred_large_values_is_refused_before_python_holds_it(client):
    """100 values of a megabyte in one row: the texts are counted as they are decoded, not once the row is whole."""
    assert_refused_holding_little(client, wide(100, 999_000, 1))


def test_the_count_starts_again_for_each_query():
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    count_answers(conn, 100_000)
    for _ in range(5):  # each 60 KB: only together past the budget
        rows = conn.execute("select printf('%.*c', 30000, 'x') a, printf('%.*c', 30000, 'y') b").fetchall()
        assert rows[0]["b"][0] == "y"  # still Datasette's row factory
    with pytest.raises(AnswerTooLarge):
        conn.execute(wide(2, 30_000, 2)).fetchall()
    assert row_bytes((1, None, "abc", b"de")) == 4 * CELL_BYTES + 5


@pytest.mark.parametrize(
    "sql",
    [
        "select hex(fts3_tokenizer('simple'))",
        "select fts3_tokenizer('mine', x'4141414141414141')",
        "select FTS3_TOKENIZER('porter') as p",
        "select load_extension('/tmp/nothing')",
    ],
)
def test_functions_exposing_pointers_or_changing_the_connection_are_refused(client, sql):
    # the SQLite here has them: an unbounded connection answers the pointer
    plain = sqlite3.connect(":memory:")
    if "fts3_tokenizer('simple')" in sql:
        assert len(plain.execute(sql).fetchone()[0]) in (8, 16)
    bounded = sqlite3.connect(":memory:")
    connections.bound(bounded)
    with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
        bounded.execute(sql)
    response = get(client, "/site.json?sql=" + quote(sql))
    assert response.status_code == 400 and "not authorized" in response.json()["error"], response.text[:300]
