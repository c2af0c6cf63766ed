"""The API's reads (service/api/reader.py): inline on the event loop, never waiting there, never without end.

Real SQLite files, real locks, no mocks: a read that would wait for another
connection's lock goes to the API's threads (which wait for it), a read past
the time limit is interrupted and the next one works, and every build, a
news search too, runs inline.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from service.datasette.plugin import get_api
from service.api.reader import Reader
from tests.support.api_client import ApiClient, datasette_for_config


def thread_name(conn) -> str:
    conn.execute("SELECT 1").fetchone()
    return threading.current_thread().name


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "plain.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
    return path


def test_inline_reads_run_on_the_calling_thread(path):
    reader = Reader(path)
    try:
        assert asyncio.run(reader.inline(thread_name)) == threading.current_thread().name
        assert asyncio.run(reader.run(thread_name)).startswith("qsite-api")
    finally:
        reader.close()


def test_a_read_that_would_wait_for_a_lock_goes_to_the_threads(path):
    """A rollback-journal file under an exclusive lock: the inline read cannot wait, the thread does."""
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")
    released = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    reader = Reader(path)
    try:
        released.start()

        def read(conn):
            return threading.current_thread().name, conn.execute("SELECT x FROM t").fetchone()[0]

        name, value = asyncio.run(reader.inline(read))
        assert name.startswith("qsite-api") and value == 1
        assert asyncio.run(reader.inline(thread_name)) == threading.current_thread().name  # inline again
    finally:
        released.join()
        writer.close()
        reader.close()


def test_an_inline_read_past_the_time_limit_is_interrupted_and_the_next_one_works(path):
    reader = Reader(path, time_limit_ms=50)
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    try:
        with pytest.raises(sqlite3.OperationalError, match="interrupt"):
            asyncio.run(reader.inline(lambda conn: conn.execute(endless).fetchone()))
        assert asyncio.run(reader.inline(lambda conn: conn.execute("SELECT x FROM t").fetchone()[0])) == 1
    finally:
        reader.close()


def test_every_build_runs_inline_a_news_search_too(seeded_config):
    client = ApiClient(datasette_for_config(seeded_config))
    try:
        assert client.get("/api/v1/stats").status_code == 200  # the API is made
        api = get_api(client.datasette)
        used = []

        def recording(name, execute):
            async def execute_fn(fn):
                used.append(name)
                return await execute(fn)

            return execute_fn

        api.execute_fn = recording("inline", api.execute_fn)
        api.reader.run = recording("threads", api.reader.run)
        for path in ("/api/v1/news?tag=Science&since=2026-11-19T00:00:00Z", "/api/v1/glossary?q=qubit", "/api/v1/courses",
                     "/api/v1/news?q=headline&tag=Science"):
            assert client.get(path).status_code == 200
        assert used == ["inline"] * 4
    finally:
        client.close()
