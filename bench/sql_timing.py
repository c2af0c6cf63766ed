"""The SQL of uncached news requests, timed alone: the timing guard of issue 27.

Each news request of the bench's lists is read as the API reads it
(:func:`~qsite.service.api.parameters.parse_params`) and built by the API's own
:func:`~qsite.service.api.news_bodies.news` on a read-only connection opened as the API
opens its own (:func:`~qsite.service.api.reader.connect_read_only`: temporary tables
in memory, which each page's sorts use; the file mapped, as ``api.mmap_size`` has it
by default), in this process, with no server
around it. Only the statements are timed (each one's ``execute`` and
``fetchall``), none of the Python that builds the body: what a request's SQL
costs at a million items, pages (no ``q``) apart from searches. So a request
runs the queries the API runs for it, no more: a first page that is not full
is its own count, and a later page takes its count from its cursor
(:mod:`qsite.service.api.cursors`; the bench's cursors are sealed as the servers'
next links are, :class:`bench.uncached.CarriedCounts`).

The connection is first used for as many other requests of the same list, as
a server's connection has served others before: on a new connection every
page of the b-trees is a first read (a p99 of 0.6 to 0.7 ms against 0.5 ms,
fresh against warm, for the same pages at a million items). Both figures are
kept: ``as served`` is the one the bound is for, and ``page and count`` runs
both queries for every request on a connection of its own, warmed the same way,
as this guard did before counts rode along in cursors: a request's SQL at its most.
The two time different requests of the same list (:func:`_slices`), each a first pass.

A first pass on this bench's VM also read from the disk pages the VM had dropped from the
page cache, which was most of what the guard's p99 missed by (0.75 to 0.89 ms, against 0.29
to 0.38 ms with the file held): ``make bench`` holds the database in the page cache
(:func:`bench.harness.hold_resident`), and each request's reads from the disk are counted.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bench.harness import bench_cursor_key, disk_read_bytes
from qsite.config.model import ApiConfig
from qsite.service.api.bodies import Build
from qsite.service.api.cursors import keyset
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.news_bodies import news, news_filters, with_count_limit
from qsite.service.api.parameters import parse_params
from qsite.service.api.reader import connect_read_only
from qsite.service.datasette.metadata import configured_queries, query_sql

#: The file's map of a served API's read connections (``api.mmap_size``'s default), which the timed ones have too.
SERVED_MMAP_SIZE = ApiConfig().mmap_size
#: The 99th percentile of a request's SQL each kind must stay within, in ms (issue 27).
LIMITS_MS = {"pages": 0.5, "searches": 5.0}


class _Fetched:
    """What :meth:`qsite.service.api.bodies.Build.rows` reads of a cursor, its rows already fetched."""

    def __init__(self, description, rows: list):
        self.description, self.rows = description, rows

    def fetchall(self) -> list:
        return self.rows


class TimedConnection:
    """A read connection whose statements are timed whole, ``execute`` and ``fetchall``: a build's SQL alone.

    What they read from the disk, not the page cache, is counted beside (outside the time): a
    statement that did was timing the disk (:func:`bench.harness.hold_resident`).
    """

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.spent = 0.0
        self.read = 0

    def execute(self, sql: str, params: dict) -> _Fetched:
        read_before = disk_read_bytes()
        started = time.perf_counter()
        cursor = self.conn.execute(sql, params)
        rows = cursor.fetchall()
        self.spent += time.perf_counter() - started
        self.read += disk_read_bytes() - read_before
        return _Fetched(cursor.description, rows)


def _as_served(build: Build) -> None:
    news(build)


def _page_and_count(build: Build) -> None:
    values = build.values
    filters = news_filters(values)
    before, before_id = keyset(values["cursor"])
    build.rows("news", {**filters, "before": before, "before_id": before_id, "limit": values["limit"] + 1})
    build.rows("news_count", with_count_limit(filters))


def _timed(db: Path, lines: list[str], warm: list[str], run) -> list[tuple[float, str, str, int]]:
    """Each request of ``lines`` run by ``run`` on a new connection, after the requests of ``warm``.

    Each as (ms, line, kind, bytes its statements read from the disk).
    """
    endpoint = ENDPOINTS["news"]
    sql = query_sql(configured_queries())
    key = bench_cursor_key()
    conn = connect_read_only(db, mmap_size=SERVED_MMAP_SIZE)
    try:
        timed = TimedConnection(conn)
        versions = read_versions(conn)
        found = []
        for line in [*warm, *lines]:
            values, errors = parse_params(endpoint.params, line.partition("?")[2].encode())
            if errors:
                raise SystemExit(f"bench: {line} is not a valid news request: {errors}")
            timed.spent, timed.read = 0.0, 0
            run(Build(endpoint, values, None, timed, sql, versions, key))
            found.append((timed.spent * 1000, line, "searches" if values["q"] is not None else "pages", timed.read))
        return found[len(warm):]
    finally:
        conn.close()


def _summary(found: list[tuple[float, str, int]], slowest: int) -> dict:
    """p50, p99 and max of ``found`` (ms, line, bytes read from the disk), its slowest, and what read the disk."""
    ms = sorted(t for t, _, _ in found)
    return {
        "requests": len(ms),
        "p50_ms": round(ms[len(ms) // 2], 3),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        "p999_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.999))], 3),
        "max_ms": round(ms[-1], 3),
        "times_ms": [round(t, 3) for t in ms],  # for a mix of kinds by their shares (bench.report.user_mix)
        "slowest": [[round(t, 2), line] for t, line, _ in sorted(found, reverse=True)[:slowest]],
        "read_from_disk": {"requests": sum(1 for *_, read in found if read), "kb": sum(read for *_, read in found) // 1024},
    }


#: The two ways requests are run: as the API builds them (the bound is for this one), and their page and count both.
_RUNS = {"as served": _as_served, "page and count": _page_and_count}
#: Requests listed for each one timed: each run's own, and as many before them (:func:`_slices`).
LISTED_PER_TIMED = 2 * len(_RUNS)


def _slices(listed: list[str], count: int) -> dict[str, tuple[list[str], list[str]]]:
    """Each run's requests and the requests before them on its connection: ``count`` of each, none shared.

    Each run times requests of its own, a first pass over them as a server's distinct URLs are:
    the same requests run again find their pages in the caches the first run left, the page
    cache among them (at a million items, 2,000 pages, the file not held: p99 0.33 to 0.42 ms
    the second time, 0.45 to 1.16 ms the first), which
    made the run timed second look cheaper than it was. A list shorter than both runs need is
    shared out evenly.
    """
    count = min(count, len(listed) // LISTED_PER_TIMED)
    return {name: (listed[2 * i * count:(2 * i + 1) * count], listed[(2 * i + 1) * count:(2 * i + 2) * count])
            for i, name in enumerate(_RUNS)}


def _judged(timed: dict[str, list], limit_ms: float, slowest: int) -> dict:
    """One kind's summary as served, its bound, and its summary with page and count both (``timed`` by run name)."""
    return {
        **_summary(timed["as served"], slowest),
        "limit_p99_ms": limit_ms,
        "page_and_count": _summary(timed["page and count"], slowest),
    }


def time_news_sql(db: Path, api_files: list[Path], per_file: int = 2000, slowest: int = 5) -> dict:
    """p50, p99 and max of each request's SQL (ms), by kind, as served and page and count both, from ``api_files``."""
    url = ENDPOINTS["news"].url + "?"
    timed: dict[str, dict[str, list]] = {kind: {name: [] for name in _RUNS} for kind in ("pages", "searches")}
    for file in api_files:
        listed = [line for line in file.read_text(encoding="utf-8").splitlines() if line.startswith(url)]
        for name, (lines, warm) in _slices(listed, per_file).items():
            for elapsed, line, kind, read in _timed(db, lines, warm, _RUNS[name]):
                timed[kind][name].append((elapsed, line, read))
    return {kind: _judged(runs, LIMITS_MS[kind], slowest) for kind, runs in timed.items() if runs["as served"]}


def time_search_kinds(db: Path, files: dict[str, Path], per_kind: int = 1000, slowest: int = 3,
                      limit_ms: float = LIMITS_MS["searches"]) -> dict:
    """:func:`time_news_sql` for each kind of search apart (``{kind: file}``, :data:`bench.uncached.SEARCH_KINDS`
    or :func:`bench.user_searches.kinds`).

    Each kind's requests run after as many others of the same kind on the same
    connection; each kind has the bound ``limit_ms`` (issue 27's for any ``q``, 5 ms, by default).
    """
    found = {}
    for kind, file in files.items():
        listed = file.read_text(encoding="utf-8").splitlines()
        timed = {name: [(ms, line, read) for ms, line, _, read in _timed(db, lines, warm, _RUNS[name])]
                 for name, (lines, warm) in _slices(listed, per_kind).items()}
        found[kind] = _judged(timed, limit_ms, slowest)
    return found
