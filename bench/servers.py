"""The servers ``make bench`` drives and how: the raw ASGI ceiling under each server, wrk, the rounds.

The raw app (:mod:`bench.raw_asgi`) replays the bytes ``qsite serve`` answered,
under granian (``qsite serve``'s server, with the same HTTP/1.1 settings),
plain and with its threads scheduled as ``qsite serve`` schedules them,
uvicorn with h11 (the server before issue 15) and uvicorn with httptools and
uvloop: the same bytes, one worker, pinned to the same core.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.cpu import CpuMeter

BENCH = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
LUA = BENCH / "wrk_report.lua"
WALK_LUA = BENCH / "wrk_walk.lua"
RAW_APP = "bench.raw_asgi:app"
SETTLED_RAW_APP = "bench.raw_asgi_settled:settled_app"


def raw_server_command(server: str, port: int) -> list[str]:
    """The command serving the raw ASGI app under ``server`` (one of :data:`bench.report.RAW_SERVERS`).

    ``granian-batched`` is granian with the app settled as ``qsite serve`` settles its own
    (:mod:`bench.raw_asgi_settled`: the runtime's threads in ``SCHED_BATCH``).
    """
    if server in ("granian", "granian-batched"):
        app = RAW_APP if server == "granian" else SETTLED_RAW_APP
        return [str(BIN / "granian"), "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                "--loop", "uvloop", "--http", "1", "--no-ws", "--log-level", "warning", app]
    http, loop = {"uvicorn-h11": ("h11", "asyncio"), "uvicorn-httptools": ("httptools", "uvloop")}[server]
    return [sys.executable, "-m", "uvicorn", RAW_APP, "--host", "127.0.0.1", "--port", str(port), "--http", http,
            "--loop", loop, "--no-access-log", "--log-level", "warning"]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pinned(core: int | None, args: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *args] if core is not None and shutil.which("taskset") else args


def record_responses(base: str, targets: dict[str, str], path: Path) -> dict:
    """Fetch each target from the real API; write what the raw app replays."""
    recorded = {}
    with httpx.Client(base_url=base, timeout=10) as client:
        for target in targets.values():
            response = client.get(target)
            if response.status_code != 200:
                raise SystemExit(f"bench: GET {target} answered {response.status_code}: {response.text[:300]}")
            entry = {"status": 200, "headers": list(response.headers.multi_items()), "body": response.text}
            etag = response.headers.get("etag")
            if etag:
                again = client.get(target, headers={"If-None-Match": etag})
                if again.status_code == 304:
                    entry["not_modified_headers"] = list(again.headers.multi_items())
            recorded[target] = entry
    path.write_text(json.dumps(recorded), encoding="utf-8")
    return recorded


def run_wrk(args, url: str, seconds: float, headers: dict | None = None, walk: tuple[Path, int] | None = None,
            timeout: float = 5, threads: int | None = None, pin: bool = True, cpu_of: int | None = None) -> dict:
    """One wrk run at ``url``: req/s, latency percentiles, errors.

    :param walk: ``(file of paths, first line)``: request each path of the file
        once, in order, from that line (:file:`bench/wrk_walk.lua`, one wrk thread);
        the result then says where the walk stopped (``walked_to``) and if it ran out.
    :param threads: wrk threads instead of ``args.threads``.
    :param pin: run wrk on ``args.client_core``; ``False``: wherever the scheduler puts it.
    :param cpu_of: the server's pid: the result then says, under ``cpu``, the cores the
        server, wrk and the machine's other work used meanwhile (:class:`bench.cpu.CpuMeter`).
    """
    script, threads, rest = LUA, threads or args.threads, []
    if walk is not None:
        script, threads, rest = WALK_LUA, 1, ["--", str(walk[0]), str(walk[1])]
    command = ["wrk", "-t", str(threads), "-c", str(args.connections), "-d", f"{seconds:g}s", "--timeout", f"{timeout:g}s",
               "-s", str(script)]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    command = pinned(args.client_core if pin else None, command + [url] + rest)
    meter = CpuMeter(cpu_of) if cpu_of is not None else None
    done = subprocess.run(command, capture_output=True, text=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"bench: wrk failed on {url}:\n{done.stdout}\n{done.stderr}")
    result = json.loads(line.removeprefix("WRK_JSON "))
    seconds = result["duration_us"] / 1e6
    errors = sum(result["errors"].values())
    summary = {
        "rps": result["requests"] / seconds,
        "p50_ms": result["latency_us"]["p50"] / 1000,
        "p99_ms": result["latency_us"]["p99"] / 1000,
        "max_ms": result["latency_us"]["max"] / 1000,
        # how far from the 25 ms bounds, in steps finer than the p99's (bench/wrk_report.lua)
        "over_25ms_pct": result["latency_us"]["over_25ms_pct"],
        "requests": result["requests"],
        "errors": errors,
        "error_kinds": {k: v for k, v in result["errors"].items() if v},
    }
    if walk is not None:
        summary["walked_to"], summary["ran_out"] = result["walked_to"], bool(result["ran_out"])
    if meter is not None:
        summary["cpu"] = meter.read(result["requests"])
    return summary


def check(url: str, headers: dict | None, status: int, rows: int | None = None) -> int:
    """GET ``url`` once; stop the run unless it answers ``status`` (and ``rows`` news rows)."""
    response = httpx.get(url, headers=headers or {}, timeout=10)
    if response.status_code != status:
        raise SystemExit(f"bench: {url} answered {response.status_code}, expected {status}: {response.text[:300]}")
    if rows is not None:
        data = response.json()
        # Datasette's table rows carry every column; a canned query of the same name would not.
        if not (isinstance(data, list) and len(data) == rows and all("first_seen_at" in row for row in data)):
            raise SystemExit(f"bench: {url} is not Datasette's news table JSON with {rows} rows: {response.text[:300]}")
    return len(response.content)


def wrk_options(target: dict) -> dict:
    """A target's own wrk settings (``wrk_threads``, ``wrk_pinned``, ``pid`` to account CPU to) for :func:`run_wrk`."""
    return {"threads": target.get("wrk_threads"), "pin": target.get("wrk_pinned", True), "cpu_of": target.get("pid")}


def bench_api(args, targets: list[dict]) -> tuple[dict, list[float]]:
    """Every target, ``args.rounds`` times, interleaved; medians per target, and the load average per round."""
    for target in targets:
        target["body_bytes"] = check(target["url"], target.get("headers"), target["status"], target.get("rows"))
        run_wrk(args, target["url"], args.warmup, target.get("headers"), **wrk_options(target))
    results = {t["name"]: [] for t in targets}
    loads = []
    for round_no in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for target in targets:
            result = run_wrk(args, target["url"], args.duration, target.get("headers"), **wrk_options(target))
            results[target["name"]].append(result)
        log(
            f"round {round_no + 1}/{args.rounds}: "
            + ", ".join(f"{name} {runs[-1]['rps']:.0f}/s" for name, runs in results.items())
        )
    summary = {}
    for target in targets:
        runs = results[target["name"]]
        summary[target["name"]] = {
            "url": target["url"],
            "headers": target.get("headers") or {},
            "status": target["status"],
            "body_bytes": target["body_bytes"],
            "rps": statistics.median(r["rps"] for r in runs),
            "p50_ms": statistics.median(r["p50_ms"] for r in runs),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
            "wrk": {"threads": target.get("wrk_threads") or args.threads,
                    "core": args.client_core if target.get("wrk_pinned", True) else None},
            "rounds": runs,
        }
        if "cpu" in runs[0]:
            summary[target["name"]]["cpu"] = {key: statistics.median(r["cpu"][key] for r in runs) for key in runs[0]["cpu"]}
    return summary, loads


