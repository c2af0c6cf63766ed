"""Does a read at the time limit leave other requests their usual latency? Side by side, in one run.

``tests/test_slow_reads.py`` shows the order of events (the slow read is interrupted,
others are answered while it runs); how much latency it adds is measured here, where a
busy machine makes a figure noisy rather than a test red. One ``qsite serve`` worker over
:data:`ITEMS` items with ``api.sql_time_limit_ms`` of :data:`TIME_LIMIT_MS`; one client
repeats a search that takes two to three times the limit unbounded (words in every item,
and two never together), while another sends uncached and cached requests, in blocks
alternating with blocks where the slow client is idle, so that the machine's other work
falls on both alike. The figures: each kind's median and p99, idle and busy, and the
p99 added (the old reader held the loop for the whole limit: 200 ms and more).

    .venv-test/bin/python -m bench.slow_reads [--items 250000] [--blocks 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import shutil
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import httpx
import yaml

from bench.harness import ROOT, SAMPLE_EXPORT, SERVE_BIN, Processes, free_port, qsite, wait_http
from qsite.db.model import NEWS, format_time
from qsite.pipeline.store import bump_version, open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import sources as sources_store
from qsite.pipeline.store.records import Item

ITEMS = 250_000
TIME_LIMIT_MS = 200
#: Found in every item, and two words never found together: 190 characters (q is at most 200).
SLOW_Q = " ".join(["a b c d e"] * 18) + " alpha beta"
SOURCE = "Slow Reads Wire"


def build(path: Path, count: int) -> None:
    """``count`` items of one publisher, a second apart, each with ``alpha`` or ``beta`` (never both) in its title."""
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    seen = format_time(datetime.now(timezone.utc).replace(microsecond=0))

    def items():
        for n in range(count):
            word = ("alpha", "beta")[n % 2]
            item = Item(f"filler-{n}", f"https://news.example/filler/{n}", f"{word} headline {n}", "a b c d e", "Science",
                        format_time(start + timedelta(seconds=n)), True)
            yield SOURCE, f"filler-{n:06d}", item

    db = open_database(path)
    try:
        with transaction(db):
            sources_store.add_source(db, SOURCE, "https://news.example/feed.xml", "Science")
            news_store.bulk_insert_items(db, items(), seen)
            bump_version(db, NEWS, seen)
    finally:
        db.close()


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[98]


def measure(base: str, blocks: int, per_block: int, slow_per_block: int) -> dict:
    asked = itertools.count()
    kinds = {state: {"uncached": [], "cached": []} for state in ("idle", "busy")}
    slow_times: list[float] = []

    def block(client: httpx.Client, state: str, enough=lambda: True) -> None:
        sent = 0
        while sent < per_block or not enough():
            n = next(asked)
            since = format_time(datetime(2020, 1, 2, tzinfo=timezone.utc) + timedelta(minutes=n))
            for kind, url in (("uncached", f"/api/v1/news?since={since}&limit={1 + n % 50}"), ("cached", "/api/v1/stats")):
                started = time.perf_counter()
                client.get(base + url).raise_for_status()
                kinds[state][kind].append(time.perf_counter() - started)
            sent += 1

    with httpx.Client(timeout=30) as client:
        block(client, "idle")  # warm
        kinds["idle"] = {"uncached": [], "cached": []}
        for _ in range(blocks):
            block(client, "idle")
            stop, answers = threading.Event(), []

            def slow():
                with httpx.Client(timeout=30) as own:
                    while not stop.is_set():
                        started = time.perf_counter()
                        own.get(f"{base}/api/v1/news?q={quote(SLOW_Q)}")
                        answers.append(time.perf_counter() - started)

            thread = threading.Thread(target=slow, daemon=True)
            thread.start()
            block(client, "busy", lambda: len(answers) >= slow_per_block)
            stop.set()
            thread.join(30)
            slow_times += answers
    figures = {
        f"{state}_{kind}_{stat}_ms": round(f(times) * 1000, 1)
        for state, by_kind in kinds.items()
        for kind, times in by_kind.items()
        for stat, f in (("median", statistics.median), ("p99", p99))
    }
    for kind in ("uncached", "cached"):
        figures[f"{kind}_p99_added_ms"] = round(figures[f"busy_{kind}_p99_ms"] - figures[f"idle_{kind}_p99_ms"], 1)
    figures["slow_median_ms"] = round(statistics.median(slow_times) * 1000, 1)
    figures["slow_requests"] = len(slow_times)
    return figures


def run(work: Path, procs: Processes, items: int = ITEMS, blocks: int = 3, per_block: int = 60, slow_per_block: int = 3) -> dict:
    """Build the database in ``work``, serve it with one worker, measure; the figures as a dict."""
    db = work / "slow-reads.db"
    started = time.perf_counter()
    build(db, items)
    config = work / "slow-reads.yml"
    config.write_text(yaml.safe_dump({
        "database": str(db),
        "site_export": {"source": str(SAMPLE_EXPORT)},
        "api": {"rate_limit": "off", "sql_time_limit_ms": TIME_LIMIT_MS, "workers": 1},
    }), encoding="utf-8")
    qsite("ingest", "site", "--config", str(config))
    built_s = time.perf_counter() - started
    port = free_port()
    server = procs.start([str(SERVE_BIN / "qsite"), "serve", "--config", str(config), "--port", str(port)], work / "serve-slow-reads.log", cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/api/v1/stats", server)
    return {"items": items, "time_limit_ms": TIME_LIMIT_MS, "built_s": round(built_s, 1),
            **measure(base, blocks, per_block, slow_per_block)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.slow_reads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=ITEMS)
    parser.add_argument("--blocks", type=int, default=3)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="qsite-slow-reads-"))
    procs = Processes()
    try:
        figures = run(work, procs, args.items, args.blocks)
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
