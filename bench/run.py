"""``make bench``: the API, its references, ingestion and memory, side by side.

One run on this machine, in this order:

1. feeds: 100 feeds of 50 items (the ingestion set) and 400 more (to build a
   database of 20,000 news items), written by :mod:`bench.feeds` and served
   over loopback by a separate server process;
2. ingestion: ``feedparser.parse`` alone over the 100 bodies in one process
   (the reference), the pipeline's fetcher alone over loopback, and the real
   ``ingest_news`` into a new database, full then unchanged, each repeat of the
   reference followed by one of the ingest;
3. the 20,000-item database, built the real way: ``qsite ingest site`` on the
   bundled export, then ``qsite ingest news`` over the 400 loopback feeds;
4. serving (:func:`bench_serving`): ``qsite serve`` (granian, one worker,
   limiter on) pinned to core 0; on the same core, ``bench/raw_asgi.py``
   replaying the bytes the real API returned under granian, uvicorn with h11
   and uvicorn with httptools and uvloop (:mod:`bench.servers`); the same
   service with the limiter off; ``wrk`` (one thread) on core 1 drives each
   target in turn, round after round, so drift on the machine hits every
   target alike. Then the same service unpinned on 1 and on 2 workers, with
   wrk on 2 threads and not pinned either (it shares both cores with the
   workers), and where the CPU went meanwhile (:mod:`bench.cpu`);
5. peak memory (``VmHWM``) of the serving process, and how long a new ingest
   takes to show through the API;
6. the uncached path at a million items (:mod:`bench.uncached`, ``--skip
   uncached`` leaves it out): distinct requests that each miss the response
   cache, against granian raw run in the same rounds and Datasette's own table
   JSON for the same queries, the rate
   after the server was stopped now and then against the rate before
   (:mod:`bench.stalls`, ``--skip stalls``), and the serving process's memory
   at that size;
7. other requests' latency while a read runs to ``api.sql_time_limit_ms``, against the
   same requests with the slow client idle (:mod:`bench.slow_reads`, ``--skip slow-reads``).

Prints a table (:mod:`bench.report`) and writes ``bench/results/bench-<time>.json``
(and ``latest.json``). ``--profile`` adds py-spy profiles of the serving
process under load and of an ingest (:mod:`bench.profiling`, ``bench/profile.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx

from bench.feeds import write_feeds
from bench.harness import NEWS, Processes, free_port, memory_kb, news_config, qsite, qsite_environment, start_qsite, start_raw, wait_http
from bench.metrics_cost import METRICS_PAIRS, METRICS_ROUNDS, bench_metrics_cost, overhead_us
from bench.open_loop import k6_binary
from bench.profiling import profile_serving, py_spy_record, shown, summarise_profile
from bench.report import RAW_SERVERS, ratios, table, verdicts
from bench.servers import bench_api, log, record_responses
from bench.uncached import bench_uncached
from bench import slow_reads

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"

COURSES = "/api/v1/courses"
STATS = "/api/v1/stats"
#: wrk for the 1 vs 2 workers comparison: as many threads as cores, on any core.
WORKERS_WRK = {"wrk_threads": 2, "wrk_pinned": False}












# -- ingestion ---------------------------------------------------------------




def worker(*args: str, profile: Path | None = None) -> dict:
    command = [sys.executable, "-m", "bench.ingest_worker", *args]
    if profile is not None:
        command = py_spy_record(profile, ["--subprocesses", "--", *command])
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(args[:1])} worker failed:\n{done.stderr[-3000:]}")
    # py-spy writes its own lines to stdout too; the worker's answer is its last JSON line.
    return json.loads(next(l for l in reversed(done.stdout.splitlines()) if l.startswith("{")))


def feed_stats(base: str, reset: bool = False) -> dict:
    return httpx.get(base + ("/_reset" if reset else "/_stats"), timeout=5).json()


def bench_ingestion(args, work: Path, feed_base: str, feeds: list[dict]) -> dict:
    """The pipeline's full and unchanged ingest against ``feedparser.parse`` alone, side by side.

    Each repeat runs the reference and then the ingest, one after the other; the ratios are
    the median of the repeats' own (the neighbours' load moves between minutes: with the
    reference's repeats all run first, full ingest against it went from 0.65x to 1.14x run to run).
    """
    sources = [{"name": f"Bench Wire {i:03d}", "url": feed_base + f["path"], "tag": f["tag"]} for i, f in enumerate(feeds)]
    fetch_only = worker("fetch", *[s["url"] for s in sources])
    references, runs = [], []
    for repeat in range(args.ingest_repeats):
        reference = worker("feedparser", str(work / "ingest-feeds"), "--repeats", "1")
        db = work / f"ingest-{repeat}.db"
        config = news_config(work / f"ingest-{repeat}.yml", db, sources)
        feed_stats(feed_base, reset=True)
        result = worker("ingest", str(config), str(db), "--runs", "2")
        served = feed_stats(feed_base)
        full, unchanged = result["runs"]
        log(
            f"ingestion {repeat + 1}: feedparser alone {reference['seconds']:.2f} s ({reference['entries']} entries), "
            f"full {full['seconds']:.2f} s {full['statuses']}, unchanged {unchanged['seconds']:.3f} s {unchanged['statuses']}, "
            f"server sent {served}"
        )
        references.append(reference)
        runs.append({**result, "served": served})
    reference = {**references[0], "seconds": statistics.median(r["seconds"] for r in references),
                 "runs": [r["seconds"] for r in references]}
    return {
        "feeds": len(feeds),
        "items_per_feed": args.items,
        "feedparser": reference,
        "fetch_only": fetch_only,
        "runs": runs,
        "full_seconds": statistics.median(r["runs"][0]["seconds"] for r in runs),
        "unchanged_seconds": statistics.median(r["runs"][1]["seconds"] for r in runs),
        "full_vs_feedparser": statistics.median(r["runs"][0]["seconds"] / f["seconds"] for r, f in zip(runs, references)),
        "unchanged_vs_feedparser": statistics.median(r["runs"][1]["seconds"] / f["seconds"] for r, f in zip(runs, references)),
    }




def build_news_db(work: Path, feed_base: str, feeds: list[dict]) -> tuple[Path, Path, dict]:
    """The 20,000-item database, through the real commands; returns (db, config, timings)."""
    db = work / "site.db"
    sources = [{"name": f"Quantum Desk {i:03d}", "url": feed_base + f["path"], "tag": f["tag"]} for i, f in enumerate(feeds)]
    config = news_config(work / "serve.yml", db, sources)
    started = time.perf_counter()
    qsite("ingest", "site", "--config", str(config))
    site = time.perf_counter() - started
    started = time.perf_counter()
    qsite("ingest", "news", "--config", str(config), "--quiet")
    news = time.perf_counter() - started
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tag, count(*) FROM news GROUP BY tag").fetchall()
    return db, config, {"ingest_site_s": site, "ingest_news_s": news, "news_by_tag": dict(rows)}


# -- serving -----------------------------------------------------------------




def bench_serving(args, procs: Processes, work: Path, db: Path, config: Path, results: dict) -> None:
    """Our cached answers against the same bytes raw under each server, Datasette's JSON, no limiter, 2 workers."""
    server, base, results["serve_startup_s"] = start_qsite(args, procs, work, "limited", config, 1, args.server_core)
    # The same service with the limiter off: what fair use costs per request; and then on 2 workers
    # (not pinned: both cores, shared with wrk), which memory:// counting would refuse.
    unlimited_config = news_config(work / "serve-unlimited.yml", db, [], rate_limit="off")
    _, unlimited_base, _ = start_qsite(args, procs, work, "unlimited", unlimited_config, 1, args.server_core)
    # 1 and 2 workers, neither pinned: the same freedom to move between the cores
    one, one_base, _ = start_qsite(args, procs, work, "one-worker", unlimited_config, 1, None)
    two, two_base, _ = start_qsite(args, procs, work, "two-workers", unlimited_config, 2, None)
    db_name = next(iter(httpx.get(base + "/-/databases.json", timeout=10).json()))["name"]
    # one item by its id (issue 26), cached like the others
    item = "/api/v1/news/" + httpx.get(base + NEWS, timeout=10).json()["results"][0]["id"]
    recorded = record_responses(base, {"news": NEWS, "news item": item, "courses": COURSES, "stats": STATS}, work / "responses.json")
    inm = {"If-None-Match": dict((k.lower(), v) for k, v in recorded[NEWS]["headers"])["etag"]}
    raw = {name: start_raw(procs, name, args.server_core, work / "responses.json", work / f"raw-{name}.log") for name in RAW_SERVERS}
    datasette_news = f"/{db_name}/news.json?tag=Science&_size=30&_sort_desc=published_at&_shape=array"
    targets = []
    for name, path, headers, status in (("news", NEWS, None, 200), ("news item", item, None, 200), ("courses", COURSES, None, 200),
                                        ("stats", STATS, None, 200), ("news 304", NEWS, inm, 304)):
        targets.append({"name": name, "url": base + path, "status": status, "headers": headers})
        for raw_name, process in raw.items():
            if status == 200 or raw_name == "granian":
                targets.append({"name": f"{raw_name} raw {name}", "url": process.base + path, "status": status, "headers": headers})
    targets += [
        {"name": "datasette news", "url": base + datasette_news, "status": 200, "rows": 30},
        {"name": "news, no limiter", "url": unlimited_base + NEWS, "status": 200},
        # wrk as free as the servers (2 threads, not pinned): pinned to core 1 it would crowd
        # whichever worker thread the scheduler put there. Both runs account their CPU
        # (bench/cpu.py): one granian worker already uses more than one core.
        {"name": "news, 1 worker, any core", "url": one_base + NEWS, "status": 200, **WORKERS_WRK, "pid": one.pid},
        {"name": "news, 2 workers", "url": two_base + NEWS, "status": 200, **WORKERS_WRK, "pid": two.pid},
    ]
    log(f"load: {len(targets)} targets x {args.rounds} rounds x {args.duration:g} s, {args.connections} connections")
    results["api"], results["load_average_per_round"] = bench_api(args, targets)
    results["ratios"] = ratios(results["api"])
    log("visibility: ingesting new items while serving")
    results["visibility"] = visibility(args, base, db, work, args.visibility_trials)
    if args.profile:
        log("profiling the serving process under load with py-spy")
        results["profile_serve"] = profile_serving(args, server.pid, targets, args.out)
    mem = memory_kb(server.pid)
    results["memory"] = {
        "processes": mem,
        "serve_peak_mb": max(m["hwm_kb"] for m in mem.values()) / 1024,
        "raw_peak_mb": max(m["hwm_kb"] for m in memory_kb(raw["granian"].pid).values()) / 1024,
    }


def visibility(args, base: str, db: Path, work: Path, trials: int) -> dict:
    """Ingest one new item while serving; time until ``/api/v1/news`` shows it."""
    from qsite.config import load_config
    from qsite.pipeline.news.ingest import ingest_news
    from qsite.pipeline.store import open_database

    feed = work / "live.xml"
    config = load_config(news_config(work / "live.yml", db, [{"name": "Bench Live", "url": str(feed), "tag": "Science"}]))
    store = open_database(db)
    measured = []
    items = []
    with httpx.Client(base_url=base, timeout=5) as client:
        client.get("/api/v1/news?limit=5")  # cached before the change, as a busy service would have it
        for trial in range(trials):
            stamp = datetime.now(timezone.utc)
            items.insert(0, (f"https://live.example.net/item-{os.getpid()}-{trial}-{int(stamp.timestamp())}", stamp))
            feed.write_text(_live_feed(items), encoding="utf-8")
            started = time.perf_counter()
            reports = ingest_news(store, config)
            committed = time.perf_counter()
            if any(r.failed for r in reports):
                raise SystemExit(f"bench: live ingest failed: {[r.line() for r in reports]}")
            needle = items[0][0].rsplit("/", 1)[1]
            while needle not in client.get("/api/v1/news?limit=5").text:
                if time.perf_counter() - committed > 10:
                    raise SystemExit("bench: a new item was not visible through the API after 10 s")
                time.sleep(0.005)
            seen = time.perf_counter()
            measured.append({"ingest_s": committed - started, "visible_after_commit_s": seen - committed})
            time.sleep(0.3)
    store.conn.close()
    return {"trials": measured, "max_visible_after_commit_s": max(m["visible_after_commit_s"] for m in measured)}


def _live_feed(items: list[tuple[str, datetime]]) -> str:
    import email.utils

    entries = "".join(
        f"<item><title>Live benchmark item {url.rsplit('-', 2)[-2]}</title><link>{url}</link>"
        f"<pubDate>{email.utils.format_datetime(stamp, usegmt=True)}</pubDate>"
        f"<description>Written by bench/run.py to time how soon an ingest shows.</description></item>"
        for url, stamp in items
    )
    return f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Bench Live</title><link>https://live.example.net/</link><description>x</description>{entries}</channel></rss>'


def machine() -> dict:
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for package in ("datasette", "granian", "uvicorn", "uvloop", "httptools", "h11", "limits", "feedparser", "httpx", "sqlite-utils"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:
            versions[package] = None
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    # The bench's qsite serve inherits this process's LD_LIBRARY_PATH (`make bench`: the newer SQLite), so its SQLite is this one.
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "packages": versions, "wrk": wrk.strip(), "qsite_environment": qsite_environment()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3, help="seconds of load per target per round (default 3)")
    parser.add_argument("--warmup", type=float, default=1, help="seconds of load per target before round 1")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds over all targets (medians are kept)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1: wrk gets one core; the 1 vs 2 workers runs use 2)")
    parser.add_argument("--feeds", type=int, default=100)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--news-items", type=int, default=20_000, help="news items in the served database")
    parser.add_argument("--ingest-repeats", type=int, default=3)
    parser.add_argument("--visibility-trials", type=int, default=3)
    parser.add_argument("--server-core", type=int, default=0, help="core the servers are pinned to (-1: none)")
    parser.add_argument("--client-core", type=int, default=1, help="core wrk is pinned to (-1: none)")
    parser.add_argument("--uncached-items", type=int, default=1_000_000, help="news items in the uncached benchmark's database")
    parser.add_argument("--uncached-db", type=Path, default=None,
                        help="a database bench.newsdb built before, used in place of building one (its build takes minutes)")
    parser.add_argument("--uncached-requests", type=int, default=200_000, help="distinct requests written for it")
    parser.add_argument("--metrics-requests", type=int, default=200_000,
                        help="distinct uncached requests of the metrics on/off comparison (bench/metrics_cost.py)")
    parser.add_argument("--metrics-pairs", type=int, default=METRICS_PAIRS,
                        help="pairs of servers the metrics on/off comparison starts one after the other")
    parser.add_argument("--metrics-rounds", type=int, default=METRICS_ROUNDS, help="rounds of each pair of the metrics comparison")
    parser.add_argument("--skip", action="append", default=[], choices=["ingest", "api", "uncached", "open-loop", "stalls", "slow-reads", "metrics"],
                        help="leave a part out (--skip uncached: no million-item database, a quick run)")
    parser.add_argument("--profile", action="store_true", help="also profile serving and ingestion with py-spy")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (databases, feeds, logs)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.server_core = None if args.server_core < 0 else args.server_core
    args.client_core = None if args.client_core < 0 else args.client_core
    if {"api", "uncached"} - set(args.skip) and not shutil.which("wrk"):
        raise SystemExit("bench: wrk is not installed; run bench/run.sh (make bench), which installs it")
    if not {"uncached", "open-loop"} & set(args.skip):
        k6_binary()  # its SystemExit names the install step now, not a quarter of an hour into the run

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    work = Path(tempfile.mkdtemp(prefix="qsite-bench-"))
    procs = Processes()
    results: dict = {"started_at": stamp, "machine": machine(), "settings": {k: str(v) for k, v in vars(args).items()}}
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    started = time.perf_counter()
    try:
        log(f"work folder {work}")
        ingest_feeds = write_feeds(work / "ingest-feeds", args.feeds, args.items)
        db_feed_count = -(-args.news_items // args.items)
        db_feeds = write_feeds(work / "db-feeds", db_feed_count, args.items, first=args.feeds)
        feed_port = free_port()
        feed_server = procs.start(
            [sys.executable, "-m", "bench.feeds", "serve", str(work / "ingest-feeds"), str(work / "db-feeds"), "--port", str(feed_port)],
            work / "feed-server.log",
            cwd=ROOT,
        )
        feed_base = f"http://127.0.0.1:{feed_port}"
        wait_http(feed_base + "/_stats", feed_server)

        if "ingest" not in args.skip:
            results["ingestion"] = bench_ingestion(args, work, feed_base, ingest_feeds)
            if args.profile:
                log("profiling an ingest (full then unchanged) with py-spy")
                sources = [{"name": f"Bench Wire {i:03d}", "url": feed_base + f["path"], "tag": f["tag"]} for i, f in enumerate(ingest_feeds)]
                raw = args.out / "profile-ingest.txt"
                worker("ingest", str(news_config(work / "profile.yml", work / "profile.db", sources)), str(work / "profile.db"), profile=raw)
                results["profile_ingest"] = {"raw": shown(raw), **summarise_profile(raw)}

        if "api" not in args.skip:
            log(f"building the {args.news_items}-item database through qsite ingest site / news")
            db, config, results["news_db"] = build_news_db(work, feed_base, db_feeds)
            bench_serving(args, procs, work, db, config, results)
        if "uncached" not in args.skip:
            try:
                bench_uncached(args, procs, work, results)
            except (Exception, SystemExit) as exc:  # the figures so far are kept and shown, and the run fails
                results["failed"] = f"uncached: {exc!r}"
                log(f"the uncached benchmark failed: {exc!r}")
        if "slow-reads" not in args.skip:
            log("slow reads: other requests' latency while a read runs to the time limit (bench/slow_reads.py)")
            results["slow_reads"] = slow_reads.run(work, procs)
            log("slow reads: " + ", ".join(f"{k} {v}" for k, v in results["slow_reads"].items()))
        if "metrics" not in args.skip and (work / "million.db").exists():
            log("metrics: the cached and uncached paths with /metrics on and off, side by side")
            bench_metrics_cost(args, procs, work, work / "million.db", results)
            results["metrics_cost"]["layer"] = overhead_us()
        results["targets"] = verdicts(results)
        results["elapsed_s"] = time.perf_counter() - started
    finally:
        procs.stop_all()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    path = args.out / f"bench-{stamp}.json"
    text = json.dumps(results, indent=1)
    path.write_text(text, encoding="utf-8")
    (args.out / "latest.json").write_text(text, encoding="utf-8")
    print(table(results))
    print(f"\nresults: {shown(path)} ({results['elapsed_s']:.0f} s)")
    if "failed" in results:
        raise SystemExit(f"bench: {results['failed']}")


if __name__ == "__main__":
    main()
