"""What a bigger page costs: the uncached /api/v1/news body at limit 100 and at limit 500.

Issue 26 asked whether ``limit`` may go up to 500 (the Spaceflight News API's
maximum): only if a page of 500 costs no more than twice the p99 of a page of 100.
This builds a news database (:mod:`bench.newsdb`), then builds /news bodies the
way the service does on a cache miss (the canned query ``api_news``, then
:func:`qsite.service.api.news_bodies.news` and the JSON serialisation), each from a random
position (a cursor), so none repeats, and reports p50 and p99 per mix. HTTP is
left out: it costs the same at both sizes, so leaving it out makes the ratio
larger, never smaller.

    .venv-test/bin/python -m bench.limit_cost --items 200000 --requests 400
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from bench import newsdb
from qsite.service.api.bodies import Build
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.responses import dumps
from qsite.service.datasette.metadata import QUERY_PREFIX, read_metadata_file

MIXES = {
    "newest": {},
    "tag": {"tag": "Science"},
    "source": {"source": (newsdb.SOURCES[0][0], newsdb.SOURCES[5][0])},
    "search": {"q": "qubit"},
}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(conn: sqlite3.Connection, sql: dict, limit: int, mix: dict, positions: list, requests: int, rng) -> list[float]:
    endpoint = ENDPOINTS["news"]
    versions = read_versions(conn)
    took = []
    for _ in range(requests):
        values = {param.name: param.default for param in endpoint.params}
        values.update(mix, limit=limit, cursor=rng.choice(positions))
        started = time.perf_counter()
        payload, _ = endpoint.build(Build(endpoint, values, None, conn, sql, versions))
        dumps(payload)
        took.append((time.perf_counter() - started) * 1000)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(26)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "site.db"
        newsdb.build(path, args.items)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        (entry,) = read_metadata_file()["databases"].values()
        sql = {name.removeprefix(QUERY_PREFIX): query["sql"] for name, query in entry["queries"].items()}
        # cursors anywhere in the newest four fifths, so every page is full
        positions = [tuple(row) for row in conn.execute("SELECT published_at, id FROM news ORDER BY random() LIMIT 5000")]
        positions.sort(reverse=True)
        positions = positions[: len(positions) * 4 // 5]
        results = {}
        for name, mix in MIXES.items():
            for limit in (100, 500):
                measure(conn, sql, limit, mix, positions, 20, rng)  # warm the page cache
                took = measure(conn, sql, limit, mix, positions, args.requests, rng)
                results[f"{name} limit={limit}"] = {"p50_ms": round(statistics.median(took), 3), "p99_ms": round(percentile(took, 0.99), 3)}
            ratio = results[f"{name} limit=500"]["p99_ms"] / results[f"{name} limit=100"]["p99_ms"]
            results[f"{name} p99 ratio"] = round(ratio, 2)
        conn.close()
    report = {"items": args.items, "requests": args.requests, "results": results}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
