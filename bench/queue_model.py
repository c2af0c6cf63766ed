"""How much of a closed loop's p99 the requests' own costs explain: qsite's service times, replayed.

In a closed loop of ``c`` connections the mean latency is ``c / rate``
(Little's law), whatever the server does; how far the p99 sits above that mean
depends on the order requests are served in and on how much their costs
differ. Issue 27 bounds the searches' p99 at 32 connections, and it is missed
by more than their rate alone says. This tool tells the two causes apart:

1. it times each request of a list in the app itself (:func:`service_times`:
   in-process, no HTTP, on the server's core; a request's time is the median
   of three passes, each meeting the URLs in turn as a server meets them);
2. it serves :data:`app` under granian, the worker settled as ``qsite serve``
   settles its own (:func:`qsite.service.serve.worker.after_startup`), answering each
   request after spinning for the next of those times, with a body of that
   request's size; and, side by side in the same rounds, ``qsite serve`` on
   the list itself. Both pinned as in ``make bench``.

Read the figures by rate: the median of three passes is a warm one, and a
neighbour's load moves the in-process timing too, so the model at ``1`` runs
somewhat faster or slower than qsite. If, at the same rate, the model's p99
matches qsite's, granian and the event loop add no disorder of their own and
the p99 is the spread of the work. The times can also be
replayed scaled (``0.85``), scaled and capped (``0.85:1.5``: none over
1.5 ms) or all alike (``flat``: each the mean, so the p99's distance from the
mean is the server's own), which says what a change to the work would buy
before it is built. What it found: ``bench/README.md`` (2026-11-27, 07:00).

Run by hand, on the database and lists that ``bench/run.sh --keep`` left in its
work folder (it is not part of ``make bench``)::

    .venv-test/bin/python -m bench.queue_model --config WORK/million.yml --list WORK/uncached-search-api.txt 1 flat 0.65
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench.harness import (
    BENCH_SECRET,
    ROOT,
    Processes,
    free_port,
    start_qsite,
    wait_http,
)
from bench.servers import pinned, raw_server_command, run_wrk

#: The file of service times (``ms bytes``, a line a request) the spin app replays.
TIMES_ENV = "BENCH_SPIN_TIMES"
#: ``scale``, ``scale:cap_ms`` or ``flat``: how the spin app changes each time before it spins (:func:`planned`).
PLAN_ENV = "BENCH_SPIN_PLAN"


def planned(times_ms: list[float], plan: str) -> list[float]:
    """``times_ms`` as ``plan`` has them: ``"0.85"`` each scaled, ``"0.85:1.5"`` then none over 1.5 ms, ``"flat"`` each their mean."""
    if plan == "flat":
        return [statistics.mean(times_ms)] * len(times_ms)
    scale, _, cap = plan.partition(":")
    return [min(float(cap or "inf"), ms * float(scale)) for ms in times_ms]


def service_times(config: Path, listed: list[str], passes: int = 1) -> list[tuple[float, int]]:
    """Each of ``listed``'s requests answered by qsite's app in this process: (milliseconds, body bytes).

    The app as ``qsite serve`` loads it, its lifespan started; the cursors' counts are sealed with
    :data:`bench.harness.BENCH_SECRET`, as the lists were. Every request must answer 200. With
    ``passes`` over the list, a request's time is its median: a neighbour's burst on a shared
    machine lands in one pass, not in the model.
    """
    os.environ["DATASETTE_SECRET"] = BENCH_SECRET
    from qsite.config import load_config
    from qsite.service.serve.worker import load_app

    async def run() -> list[tuple[float, int]]:
        app = load_app((load_config(config), None))  # in the loop, as granian's worker loads it
        lifespan: asyncio.Queue = asyncio.Queue()
        await lifespan.put({"type": "lifespan.startup"})
        started = asyncio.Event()

        async def lifespan_send(message):
            started.set()

        asyncio.get_running_loop().create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, lifespan.get, lifespan_send))
        await started.wait()

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        timed = []
        for line in listed * passes:
            path, _, query = line.partition("?")
            sent = []

            async def send(message, sent=sent):
                sent.append(message)

            scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                     "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
                     "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80)}
            began = time.perf_counter()
            await app(scope, receive, send)
            elapsed = time.perf_counter() - began
            if sent[0]["status"] != 200:
                raise SystemExit(f"bench: {line} answered {sent[0]['status']} in-process")
            timed.append((elapsed * 1000, sum(len(m.get("body", b"")) for m in sent[1:])))
        return [(statistics.median(ms for ms, _ in timed[i::len(listed)]), timed[i][1]) for i in range(len(listed))]

    return asyncio.run(run())


def spin_app(turns):
    """An ASGI app answering each request, in turn, after spinning for ``turns``' next (seconds, body)."""
    turns = itertools.cycle(turns)

    async def spin(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        seconds, body = next(turns)
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:  # holds the event loop as long as qsite's request held it
            pass
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return spin


def _settled_spin_app():
    """:func:`spin_app` over the times of :data:`TIMES_ENV` as :data:`PLAN_ENV` has them, settled as ``qsite serve``'s worker."""
    from qsite.service.serve.worker import after_startup

    recorded = [line.split() for line in Path(os.environ[TIMES_ENV]).read_text().splitlines()]
    planned_ms = planned([float(ms) for ms, _ in recorded], os.environ.get(PLAN_ENV, "1"))
    return after_startup(spin_app([(ms / 1000, b"x" * int(size)) for ms, (_, size) in zip(planned_ms, recorded)]))


#: What granian serves (``bench.queue_model:app``); built only where the times are given.
app = _settled_spin_app() if os.environ.get(TIMES_ENV) else None


def _summary(measured: dict, connections: int) -> dict:
    mean = connections / measured["rps"] * 1000
    return {"rps": round(measured["rps"]), "mean_ms": round(mean, 1), "p50_ms": measured["p50_ms"],
            "p99_ms": measured["p99_ms"], "p99_over_mean": round(measured["p99_ms"] / mean, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plans", nargs="*", default=["1"], help="how to replay the times: scale, scale:cap_ms or flat (default 1)")
    parser.add_argument("--config", type=Path, required=True, help="the qsite config of the database the list was written for")
    parser.add_argument("--list", type=Path, required=True, help="a request list (bench/uncached.py), one path a line")
    parser.add_argument("--timed", type=int, default=6000, help="requests timed in-process (default 6000)")
    parser.add_argument("--passes", type=int, default=3, help="in-process passes; a request's time is its median (default 3)")
    parser.add_argument("--seconds", type=float, default=8, help="seconds of load per server per round (default 8)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--server-core", type=int, default=0, help="core the servers (and the in-process timing) run on (-1: none)")
    parser.add_argument("--client-core", type=int, default=1, help="core wrk runs on (-1: none)")
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    args.threads = 1
    # as bench/run.py reads them: no core is None, which pinned() and start_qsite() take as no pinning
    args.server_core = None if args.server_core < 0 else args.server_core
    args.client_core = None if args.client_core < 0 else args.client_core
    listed = args.list.read_text(encoding="utf-8").splitlines()
    if len(listed) < 2 * args.timed:
        raise SystemExit(f"bench: {args.list} has {len(listed)} requests; the model needs twice --timed ({args.timed})")
    # From the end of the list: qsite's rounds walk it from the start, so neither meets the other's URLs warm.
    # On the server's core, where qsite's worker runs them.
    cores = os.sched_getaffinity(0)
    if args.server_core is not None:
        os.sched_setaffinity(0, {args.server_core})
    timed = service_times(args.config, listed[-args.timed:], args.passes)
    os.sched_setaffinity(0, cores)
    times_file = args.list.with_name(args.list.stem + "-times.txt")
    times_file.write_text("".join(f"{ms:.4f} {size}\n" for ms, size in timed), encoding="utf-8")
    spent = [ms for ms, _ in timed]
    print(f"in-process: {len(spent)} requests, mean {statistics.mean(spent):.3f} ms, sd {statistics.pstdev(spent):.3f} ms",
          file=sys.stderr)
    procs = Processes()
    results: dict[str, list] = {"qsite": [], **{f"model {plan}": [] for plan in args.plans}}
    try:
        _, qsite_base, _ = start_qsite(args, procs, args.list.parent, "queue-model", args.config, 1, args.server_core)
        models = {}
        for plan in args.plans:
            port = free_port()
            command = [*raw_server_command("granian", port)[:-1], "bench.queue_model:app"]  # the raw ceiling's settings
            process = procs.start(pinned(args.server_core, command), args.list.parent / f"queue-model-{plan}.log", cwd=ROOT,
                                  env={**os.environ, TIMES_ENV: str(times_file), PLAN_ENV: plan})
            models[f"model {plan}"] = f"http://127.0.0.1:{port}"
            wait_http(models[f"model {plan}"] + "/", process)
        position = 1
        for _ in range(args.rounds):
            measured = run_wrk(args, qsite_base, args.seconds, walk=(args.list, position))
            position = measured["walked_to"]
            if position > len(listed) - args.timed:
                print("bench: qsite's walk reached the requests timed in-process; fewer --rounds or --seconds", file=sys.stderr)
            results["qsite"].append(_summary(measured, args.connections))
            for name, base in models.items():
                results[name].append(_summary(run_wrk(args, base + "/", args.seconds), args.connections))
    finally:
        procs.stop_all()
    for name, rounds in results.items():
        print(f"{name:22s} " + " | ".join(f"{r['rps']:5d}/s p50 {r['p50_ms']:5.1f} p99 {r['p99_ms']:5.1f} ms ({r['p99_over_mean']:.2f}x mean)"
                                           for r in rounds))
    if args.out:
        args.out.write_text(json.dumps({"in_process": {"requests": len(spent), "mean_ms": statistics.mean(spent),
                                                       "sd_ms": statistics.pstdev(spent)}, "rounds": results}, indent=1))


if __name__ == "__main__":
    main()
