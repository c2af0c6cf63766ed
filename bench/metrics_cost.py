"""What ``/metrics`` costs: the cached and the uncached path with metrics on and off, side by side.

Two ``qsite serve`` on the same database (a million items by default), one worker each, pinned to
the same core and loaded one at a time: the same config but for ``metrics.enabled``. Each round
runs, in an order that alternates from round to round, the cached news page on each and a walk of
distinct uncached requests (:func:`bench.uncached.write_requests`, the pages mix) on each; every
server walks the same list from its own position, so neither answers a request its cache has seen.
Each round's ``metrics on / metrics off`` is taken within the round, so a neighbour's load that moves
from round to round moves both sides; a pair of servers' figure is the median of its rounds, and the
figure is the median over many pairs started one after the other (:func:`bench_metrics_cost`).

``make bench`` runs it after the uncached benchmark, on its million-item database; alone:
``python -m bench.metrics_cost --items 1000000 --metrics-rounds 2 --metrics-pairs 8``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from bench import newsdb
from bench.harness import NEWS, Processes, hold_resident, news_config, qsite, start_qsite, wait_idle
from bench.servers import log, run_wrk

SIDES = ("metrics on", "metrics off")
#: Pairs of servers, and rounds each: independent pairs, not rounds of one pair, are what the median needs.
METRICS_PAIRS, METRICS_ROUNDS = 8, 2
PATHS = ("cached", "uncached")


def configs(work: Path, db: Path) -> dict[str, Path]:
    """The two configs: the bench's, and the same with ``metrics.enabled: false``."""
    on = news_config(work / "metrics-on.yml", db, [])
    data = yaml.safe_load(on.read_text(encoding="utf-8"))
    data["metrics"] = {"enabled": False}
    off = work / "metrics-off.yml"
    off.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return {"metrics on": on, "metrics off": off}


def bench_metrics_cost(args, procs: Processes, work: Path, db: Path, results: dict) -> None:
    """Fill ``results["metrics_cost"]``: per path and side the median req/s, and the median over pairs of the ratio on/off.

    ``args.metrics_pairs`` pairs of servers one after the other, each measured for
    ``args.metrics_rounds`` rounds: a process's own layout in memory (its hash seed, where its
    objects fall) moves its throughput by a percent or two for its whole life (one pair's
    uncached rounds all at 0.91 to 0.93 where the next pair's were at 1.0), so one pair can show
    a cost that is not there, or hide one, and more rounds of the same pair do not average it
    out: its rounds are not independent. Many pairs of a few rounds each are, and their median
    is the figure.
    """
    from bench.uncached import write_requests

    config_of = configs(work, db)
    requests = None
    position = {side: 1 for side in SIDES}
    rounds = {path: {side: [] for side in SIDES} for path in PATHS}
    base = None
    for pair in range(args.metrics_pairs):
        servers = {}
        for side in SIDES if pair % 2 == 0 else SIDES[::-1]:  # which starts first alternates too
            process, url, _ = start_qsite(args, procs, work, f"{side.replace(' ', '-')}-{pair}", config_of[side], 1, args.server_core)
            servers[side] = (process, url)
        base = servers["metrics on"][1]
        if requests is None:
            db_name = next(iter(httpx.get(base + "/-/databases.json", timeout=30).json()))["name"]
            requests, _, _ = write_requests(db, args.metrics_requests, work, db_name, "pages", seed=47, prefix="metrics")

        def run(path: str, side: str, seconds: float) -> dict:
            process, url = servers[side]
            if path == "cached":
                return run_wrk(args, url + NEWS, seconds)
            result = run_wrk(args, url, seconds, walk=(requests, position[side]))
            if result["ran_out"]:
                raise SystemExit("bench: the metrics walk used up its distinct requests; raise --metrics-requests")
            position[side] = result["walked_to"]
            wait_idle(process.pid)
            return result

        for path in PATHS:
            for side in SIDES:
                run(path, side, args.warmup)
        for round_no in range(args.metrics_rounds):
            order = SIDES if round_no % 2 == 0 else SIDES[::-1]
            for path in PATHS:
                for side in order:
                    rounds[path][side].append(run(path, side, args.duration))
            log(f"metrics pair {pair + 1}/{args.metrics_pairs} round {round_no + 1}/{args.metrics_rounds}: " + ", ".join(
                f"{path} {side} {rounds[path][side][-1]['rps']:.0f}/s" for path in PATHS for side in SIDES))
        if pair < args.metrics_pairs - 1:
            for process, _ in servers.values():
                procs.stop(process)
    summary = {}
    for path in PATHS:
        ratios = [on["rps"] / off["rps"] for on, off in zip(rounds[path]["metrics on"], rounds[path]["metrics off"])]
        per_pair = [statistics.median(ratios[start:start + args.metrics_rounds])
                    for start in range(0, len(ratios), args.metrics_rounds)]
        summary[path] = {
            **{side: {"rps": statistics.median(r["rps"] for r in rounds[path][side]),
                      "p99_ms": statistics.median(r["p99_ms"] for r in rounds[path][side]),
                      "errors": sum(r["errors"] for r in rounds[path][side])} for side in SIDES},
            "ratio": statistics.median(per_pair),
            "pair_ratios": per_pair,
            "ratios": ratios,
        }
    scrape = httpx.get(base + "/metrics", timeout=30)
    summary["scrape"] = {"status": scrape.status_code, "bytes": len(scrape.content),
                         "seconds": scrape.elapsed.total_seconds()}
    results["metrics_cost"] = summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--metrics-requests", type=int, default=200_000)
    parser.add_argument("--duration", type=float, default=3)
    parser.add_argument("--warmup", type=float, default=1)
    parser.add_argument("--metrics-rounds", type=int, default=METRICS_ROUNDS, help="rounds per pair of servers")
    parser.add_argument("--metrics-pairs", type=int, default=METRICS_PAIRS, help="pairs of servers started one after the other")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--db", type=Path, help="an existing bench database (bench.newsdb and qsite ingest site) instead of a new one")
    args = parser.parse_args(argv)
    args.server_core = None if args.server_core < 0 else args.server_core
    args.client_core = None if args.client_core < 0 else args.client_core
    work = Path(tempfile.mkdtemp(prefix="qsite-metrics-bench-"))
    procs = Processes()
    results: dict = {}
    try:
        db = args.db
        if db is None:
            db = work / "million.db"
            log(f"metrics: building a {args.items:,}-item database")
            newsdb.build(db, args.items)
            qsite("ingest", "site", "--config", str(news_config(work / "build.yml", db, [])))
        hold_resident(procs, db, work / "vmtouch.log")
        started = time.perf_counter()
        bench_metrics_cost(args, procs, work, db, results)
        results["metrics_cost"]["elapsed_s"] = time.perf_counter() - started
        results["metrics_cost"]["layer"] = overhead_us()
    finally:
        procs.stop_all()
        shutil.rmtree(work, ignore_errors=True)
    for path in PATHS:
        entry = results["metrics_cost"][path]
        print(f"{path:9} metrics on {entry['metrics on']['rps']:8.0f}/s  off {entry['metrics off']['rps']:8.0f}/s  "
              f"on/off {entry['ratio']:.3f}  (pairs {', '.join(f'{r:.3f}' for r in entry['pair_ratios'])})")
    print(f"scrape: {results['metrics_cost']['scrape']}")
    print(f"the layer alone, in process (CPU µs a request): {results['metrics_cost']['layer']}")
    print(json.dumps(results["metrics_cost"]))
    sys.stdout.flush()



def overhead_us(requests: int = 50_000, repeats: int = 7) -> dict:
    """Microseconds :func:`qsite.service.metrics.middleware.observed` adds to one request, metrics on and off.

    In process, around an app that answers at once: what the layer costs alone, without a server or
    a client to share the machine with. The best of ``repeats`` runs, each ``requests`` requests
    on one event loop; the tally is flushed as the server does (every second) meanwhile.
    """
    import asyncio
    import os

    from datasette.app import Datasette

    from qsite.config import load_config
    from qsite.service.metrics.exported import MULTIPROC_ENV
    from qsite.service.metrics.middleware import observed

    folder = tempfile.mkdtemp(prefix="qsite-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        base = load_config(None)

        async def answer(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b"{}"})

        async def sent(message):
            return None

        async def receive():
            return {"type": "http.request", "body": b""}

        apps = {
            "none": answer,
            "metrics off": observed(answer, Datasette(memory=True), base.model_copy(update={"metrics": base.metrics.model_copy(update={"enabled": False})})),
            "metrics on": observed(answer, Datasette(memory=True), base),
        }
        scope = {"type": "http", "method": "GET", "path": "/api/v1/news", "raw_path": b"/api/v1/news", "query_string": b"tag=Science",
                 "headers": [], "client": ("127.0.0.1", 5000)}

        async def timed(app) -> float:
            started = time.process_time()  # this process's CPU: a neighbour's load takes none of it
            for _ in range(requests):
                await app(scope, receive, sent)
            return (time.process_time() - started) / requests * 1e6

        async def all_runs() -> dict:
            best = {name: float("inf") for name in apps}
            for _ in range(repeats):
                for name, app in apps.items():
                    best[name] = min(best[name], await timed(app))
            return best

        best = asyncio.run(all_runs())
        return {"request_us": {name: round(value, 3) for name, value in best.items()},
                "metrics_on_us": round(best["metrics on"] - best["none"], 3),
                "metrics_off_us": round(best["metrics off"] - best["none"], 3)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(MULTIPROC_ENV, None)


if __name__ == "__main__":
    main()
