"""The Python of an uncached news request, stage by stage, timed in this process at a million items.

Each request of a list is taken through the stages the API takes it through,
each timed apart: reading its query string (:func:`~qsite.service.api.parameters.parse_params`),
its SQL (the statements alone, as :mod:`bench.sql_timing` times them), building the
body around the rows (:func:`~qsite.service.api.news_bodies.news` less its SQL; the ``next``
link, :meth:`~qsite.service.api.endpoint.Endpoint.next_link`, is timed apart within
it), and serialising it (:func:`~qsite.service.api.responses.dumps`, the ETag). What is
left of a request's time under ``qsite serve`` beyond these is the server's and the
event loop's (routing, the response cache, the limiter, granian).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from bench.harness import bench_cursor_key
from bench.sql_timing import SERVED_MMAP_SIZE, _Fetched
from qsite.service.api.bodies import Build
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.news_bodies import news
from qsite.service.api.parameters import parse_params
from qsite.service.api.reader import connect_read_only
from qsite.service.api.responses import dumps, etag_for
from qsite.service.datasette.metadata import configured_queries, query_sql

STAGES = ("parse_params", "sql", "body less sql", "next_link", "dumps and etag")


class _TimedSql:
    """A read connection whose statements are timed whole (``execute`` and ``fetchall``), and nothing else."""

    def __init__(self, conn):
        self.conn, self.spent = conn, 0.0

    def execute(self, sql: str, params: dict) -> _Fetched:
        started = time.perf_counter()
        cursor = self.conn.execute(sql, params)
        rows = cursor.fetchall()
        self.spent += time.perf_counter() - started
        return _Fetched(cursor.description, rows)


class _TimedLinks:
    """An endpoint whose ``next_link`` is timed; everything else is the endpoint's own."""

    def __init__(self, endpoint):
        self._endpoint, self.spent = endpoint, 0.0

    def __getattr__(self, name):
        return getattr(self._endpoint, name)

    def next_link(self, values, after):
        started = time.perf_counter()
        link = self._endpoint.next_link(values, after)
        self.spent += time.perf_counter() - started
        return link


def time_stages(db: Path, api_file: Path, count: int = 2000, warm: int = 500) -> dict:
    """Mean and median µs of each of :data:`STAGES` over ``count`` requests of ``api_file`` (after ``warm`` others)."""
    endpoint = ENDPOINTS["news"]
    url = endpoint.url + "?"
    lines = [line for line in api_file.read_text(encoding="utf-8").splitlines() if line.startswith(url)][: warm + count]
    sql, key = query_sql(configured_queries()), bench_cursor_key()
    conn = connect_read_only(db, mmap_size=SERVED_MMAP_SIZE)
    found: dict[str, list[float]] = {stage: [] for stage in STAGES}
    try:
        timed, versions = _TimedSql(conn), read_versions(conn)
        linked = _TimedLinks(endpoint)
        for n, line in enumerate(lines):
            query = line.partition("?")[2].encode()
            started = time.perf_counter()
            values, errors = parse_params(endpoint.params, query)
            parsed = time.perf_counter() - started
            if errors:
                raise SystemExit(f"bench: {line} is not a valid news request: {errors}")
            timed.spent = linked.spent = 0.0
            started = time.perf_counter()
            payload, _ = news(Build(linked, values, None, timed, sql, versions, key))
            built = time.perf_counter() - started
            started = time.perf_counter()
            etag_for(dumps(payload))
            serialised = time.perf_counter() - started
            if n >= warm:
                for stage, seconds in zip(STAGES, (parsed, timed.spent, built - timed.spent - linked.spent,
                                                   linked.spent, serialised)):
                    found[stage].append(seconds * 1e6)
    finally:
        conn.close()
    return {stage: {"mean_us": round(statistics.fmean(us), 1), "p50_us": round(statistics.median(us), 1)}
            for stage, us in found.items()}
