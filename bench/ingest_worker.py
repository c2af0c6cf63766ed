"""Timed ingestion work, each kind in a fresh process of its own.

``bench/run.py`` starts this module once per measurement so that one
measurement's warm caches or leftover threads never help or hurt the next.
It prints one JSON object on its last line of output.

- ``feedparser FOLDER``: ``feedparser.parse`` over every feed body written by
  :mod:`bench.feeds`, one after another in this one process (the reference).
- ``fetch URL...``: fetch every URL with the pipeline's own fetcher,
  concurrently, and throw the bodies away (what the loopback server costs).
- ``ingest CONFIG DB``: the real :func:`qsite.pipeline.news.ingest.ingest_news` into a new
  database, then again unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path


def time_feedparser(folder: Path, repeats: int) -> dict:
    import feedparser

    from bench.feeds import content_type

    records = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    docs = [(Path(r["file"]).read_bytes(), {"content-type": content_type(r["format"])}) for r in records]
    runs, entries = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        entries = 0
        for body, headers in docs:
            entries += len(feedparser.parse(body, response_headers=headers).entries)
        runs.append(time.perf_counter() - started)
    return {
        "seconds": statistics.median(runs),
        "runs": runs,
        "feeds": len(docs),
        "entries": entries,
        "bytes": sum(len(body) for body, _ in docs),
    }


def time_fetch(urls: list[str]) -> dict:
    from qsite.pipeline.fetch import fetch, make_client

    async def run():
        async with make_client() as client:
            return await asyncio.gather(*(fetch(client, url) for url in urls))

    started = time.perf_counter()
    results = asyncio.run(run())
    return {"seconds": time.perf_counter() - started, "bytes": sum(len(r.body or b"") for r in results)}


def _statuses(reports) -> dict:
    return dict(Counter(report.status for report in reports))


def _counts(reports) -> dict:
    total = Counter()
    for report in reports:
        total.update({k: v for k, v in report.counts.items() if isinstance(v, int)})
    return dict(total)


def time_ingest(config_path: str, db_path: str, runs: int = 2) -> dict:
    from qsite.config import load_config
    from qsite.pipeline.news.ingest import ingest_news
    from qsite.pipeline.store import open_database

    config = load_config(config_path, database=db_path)
    db = open_database(config.database_path)
    results = []
    for _ in range(runs):
        started = time.perf_counter()
        reports = ingest_news(db, config)
        seconds = time.perf_counter() - started
        failed = [report.line() for report in reports if report.failed][:3]
        results.append({"seconds": seconds, "statuses": _statuses(reports), "counts": _counts(reports), "failed": failed})
    news = db.execute("SELECT count(*) FROM news").fetchone()[0]
    return {"runs": results, "news_rows": news}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_worker")
    commands = parser.add_subparsers(dest="command", required=True)
    fp = commands.add_parser("feedparser")
    fp.add_argument("folder", type=Path)
    fp.add_argument("--repeats", type=int, default=1)
    fe = commands.add_parser("fetch")
    fe.add_argument("urls", nargs="+")
    ing = commands.add_parser("ingest")
    ing.add_argument("config")
    ing.add_argument("db")
    ing.add_argument("--runs", type=int, default=2, help="the first is the full run, the rest unchanged runs")
    args = parser.parse_args(argv)
    if args.command == "feedparser":
        result = time_feedparser(args.folder, args.repeats)
    elif args.command == "fetch":
        result = time_fetch(args.urls)
    else:
        result = time_ingest(args.config, args.db, args.runs)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
