"""The uncached path with 1 and 2 workers, and 2 with Redis as the limiter's storage, side by side.

``python -m bench.workers DB``: ``qsite serve`` on a database :mod:`bench.newsdb`
built (its catalog ingested by ``qsite ingest site``, as ``make bench`` does), three
servers at once (one worker, two, two whose fair-use counts are in a Redis started
here; the limiter off in the first two, since ``memory://`` counts per process), none
pinned, and ``wrk`` walking distinct paths of the pages and searches mixes
(:func:`bench.uncached.write_requests`) at each in turn, round after round, with
the CPU each request cost the server (:class:`bench.cpu.CpuMeter`). What it shows,
and the model for more cores, is in docs/performance.md ("Several workers").
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import yaml

from bench.harness import Processes, free_port, news_config, start_qsite
from bench.servers import log, run_wrk
from bench.uncached import write_requests

#: The servers: name, workers, and where the limiter keeps its counts ("off": no limiter).
SERVERS = (("1 worker", 1, "off"), ("2 workers", 2, "off"), ("2 workers, Redis limiter", 2, "redis"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.split("\n\n")[0])
    parser.add_argument("db", type=Path, help="a database bench.newsdb built")
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds, after one to warm")
    parser.add_argument("--duration", type=float, default=5, help="seconds of load per server and mix per round")
    parser.add_argument("--requests", type=int, default=30_000, help="distinct requests of each mix")
    parser.add_argument("--out", type=Path, default=Path("bench/results/workers.json"))
    args = parser.parse_args(argv)
    load = argparse.Namespace(connections=32, threads=2, client_core=None)
    procs = Processes()
    work = Path(tempfile.mkdtemp(prefix="qsite-workers-"))
    try:
        files = {mix: write_requests(args.db, args.requests, work, "million", mix, seed=48, prefix="workers")[0]
                 for mix in ("pages", "search")}
        redis_port = free_port()
        procs.start(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                    work / "redis.log")
        time.sleep(0.5)
        servers = {}
        for name, workers, storage in SERVERS:
            config = news_config(work / f"{workers}-{storage}.yml", args.db, [],
                                 rate_limit="off" if storage == "off" else "100000000/second")
            if storage == "redis":
                data = yaml.safe_load(config.read_text(encoding="utf-8"))
                data["api"]["rate_limit_storage"] = f"redis://127.0.0.1:{redis_port}/0"
                config.write_text(yaml.safe_dump(data), encoding="utf-8")
            servers[name] = start_qsite(load, procs, work, f"{workers}-{storage}", config, workers, None)
        position = {(name, mix): 1 for name in servers for mix in files}
        found: dict[str, list] = {f"{name}: {mix}": [] for name in servers for mix in files}
        for round_no in range(args.rounds + 1):  # round 0 warms every server
            for name, (process, base, _) in servers.items():
                for mix, file in files.items():
                    got = run_wrk(load, base, args.duration, walk=(file, position[(name, mix)]), pin=False, cpu_of=process.pid)
                    position[(name, mix)] = got["walked_to"]
                    if round_no:
                        found[f"{name}: {mix}"].append({key: got[key] for key in ("rps", "p50_ms", "p99_ms", "errors", "cpu")})
                        log(f"{name}, {mix}: {got['rps']:.0f}/s, p99 {got['p99_ms']:.1f} ms, "
                            f"{got['cpu']['server_us_per_request']:.0f} us of CPU a request")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(found, indent=1), encoding="utf-8")
    finally:
        procs.stop_all()


if __name__ == "__main__":
    main()
