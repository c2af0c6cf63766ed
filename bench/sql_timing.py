"""The SQL of uncached news requests, timed alone: the timing guard of issue 27.

Each news request of the bench's lists is read as the API reads it
(:func:`~service.api.parameters.parse_params`, :func:`~service.api.bodies.news_filters`)
and its two canned queries, the page (``api_news``) and the count
(``api_news_count``), run on a read-only connection opened as the API opens its
own (:func:`~service.api.reader.connect_read_only`: temporary tables in memory,
which each page's sorts use) in this process, with no
server and no Python of the API around them: what a request's SQL costs at a
million items, pages (no ``q``) apart from searches. Both queries are timed
even where the API skips one (:func:`service.api.bodies.news`), so this is a
request's SQL at its most.
"""

from __future__ import annotations

import time
from pathlib import Path

from service.api.bodies import SEARCH_COUNT_MAX, news_filters
from service.api.endpoints import ENDPOINTS
from service.api.parameters import parse_params
from service.api.reader import connect_read_only
from service.datasette.metadata import configured_queries, query_sql

#: The 99th percentile of a request's SQL (page and count) each kind must stay within, in ms (issue 27).
LIMITS_MS = {"pages": 0.5, "searches": 5.0}


def time_news_sql(db: Path, api_files: list[Path], per_file: int = 2000, slowest: int = 5) -> dict:
    """p50, p99 and max of each request's SQL (ms), by kind, with the slowest requests, from ``api_files``."""
    endpoint = ENDPOINTS["news"]
    sql = query_sql(configured_queries())
    conn = connect_read_only(db)
    timed: dict[str, list[tuple[float, str]]] = {"pages": [], "searches": []}
    try:
        for file in api_files:
            lines = [line for line in file.read_text(encoding="utf-8").splitlines() if line.startswith(endpoint.url + "?")]
            for line in lines[:per_file]:
                values, errors = parse_params(endpoint.params, line.partition("?")[2].encode())
                if errors:
                    raise SystemExit(f"bench: {file}: {line} is not a valid news request: {errors}")
                filters = news_filters(values)
                before, before_id = values["cursor"] or ("", "")
                page = {**filters, "before": before, "before_id": before_id, "limit": values["limit"] + 1}
                started = time.perf_counter()
                conn.execute(sql["news"], page).fetchall()
                conn.execute(sql["news_count"], {**filters, "count_limit": SEARCH_COUNT_MAX + 1}).fetchall()
                elapsed = (time.perf_counter() - started) * 1000
                timed["searches" if values["q"] is not None else "pages"].append((elapsed, line))
    finally:
        conn.close()
    summary = {}
    for kind, found in timed.items():
        if not found:
            continue
        ms = sorted(t for t, _ in found)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        summary[kind] = {
            "requests": len(ms),
            "p50_ms": round(ms[len(ms) // 2], 3),
            "p99_ms": round(p99, 3),
            "max_ms": round(ms[-1], 3),
            "limit_p99_ms": LIMITS_MS[kind],
            "slowest": [[round(t, 2), line] for t, line in sorted(found, reverse=True)[:slowest]],
        }
    return summary
