"""``make bench``: the API, its two references, ingestion and memory, side by side.

One run on this machine, in this order:

1. feeds: 100 feeds of 50 items (the ingestion set) and 400 more (to build a
   database of 20,000 news items), written by :mod:`bench.feeds` and served
   over loopback by a separate server process;
2. ingestion: ``feedparser.parse`` alone over the 100 bodies in one process
   (the reference), the pipeline's fetcher alone over loopback, and the real
   ``ingest_news`` into a new database, full then unchanged;
3. the 20,000-item database, built the real way: ``qsite ingest site`` on the
   bundled export, then ``qsite ingest news`` over the 400 loopback feeds;
4. serving: ``qsite serve`` pinned to core 0 and, on the same core and the
   same server (uvicorn), ``bench/raw_asgi.py`` replaying the bytes the real
   API returned; ``wrk`` on core 1 drives each target in turn, round after
   round, so drift on the machine hits every target alike;
5. peak memory (``VmHWM``) of the serving process, and how long a new ingest
   takes to show through the API.

Prints a table and writes ``bench/results/bench-<time>.json`` (and
``latest.json``). ``--profile`` adds py-spy profiles of the serving process
under load and of an ingest (see ``bench/profile.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import httpx
import yaml

from bench.feeds import write_feeds

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
BIN = Path(sys.executable).parent
SAMPLE_EXPORT = ROOT / "pipeline" / "samples" / "site-export.json"
LUA = BENCH / "wrk_report.lua"

NEWS = "/api/v1/news?tag=Science&limit=30"
COURSES = "/api/v1/courses"
STATS = "/api/v1/stats"

#: wrk is one client sending thousands of requests a second: the fair-use limiter
#: runs on every request (its cost is part of what is measured) but never trips.
BENCH_RATE_LIMIT = "100000000/second"

#: The targets of the issue; each row is (name, value key, comparison, bound).
TARGETS = [
    ("news, courses, stats, 304 vs raw ASGI", "min_vs_raw", ">=", 0.6),
    ("news, courses, stats vs Datasette JSON", "min_vs_datasette", ">=", 3.0),
    ("p99 at 32 connections (ms)", "max_p99_ms", "<=", 25.0),
    ("full ingest vs feedparser alone", "full_vs_feedparser", "<=", 1.0),
    ("unchanged ingest vs feedparser alone", "unchanged_vs_feedparser", "<=", 0.1),
    ("serving process peak RSS (MB)", "peak_rss_mb", "<", 150.0),
    ("new ingest visible through the API (s)", "visible_s", "<=", 2.0),
]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """The processes this run started; all of them, and only them, are stopped at the end."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def start(self, args: list[str], log_path: Path, **kwargs) -> subprocess.Popen:
        handle = open(log_path, "wb")
        process = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        process.log_path = log_path
        self.started.append(process)
        return process

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def stop_all(self) -> None:
        for process in reversed(self.started):
            self.stop(process)


def pinned(core: int | None, args: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *args] if core is not None and shutil.which("taskset") else args


def wait_http(url: str, process: subprocess.Popen, timeout: float = 60.0) -> float:
    """Wait until ``url`` answers at all; return how long it took."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            raise SystemExit(f"bench: server exited with {process.returncode}; see {process.log_path}")
        try:
            httpx.get(url, timeout=2)
            return time.perf_counter() - started
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"bench: {url} did not answer within {timeout:g} s; see {process.log_path}")


def process_tree(pid: int) -> list[int]:
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def memory_kb(pid: int) -> dict:
    """``VmHWM`` (peak resident) and ``VmRSS`` of ``pid`` and its children, in kB, per process."""
    result = {}
    for current in process_tree(pid):
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        result[current] = {
            "name": fields.get("Name", "").strip(),
            "hwm_kb": int(fields.get("VmHWM", "0 kB").split()[0]),
            "rss_kb": int(fields.get("VmRSS", "0 kB").split()[0]),
        }
    return result


# -- ingestion ---------------------------------------------------------------


def news_config(path: Path, db: Path, sources: list[dict], rate_limit: str = BENCH_RATE_LIMIT) -> Path:
    """A qsite config listing ``sources`` (name, url, tag), with a classification rule like a real one."""
    data = {
        "database": str(db),
        "site_export": {"source": str(SAMPLE_EXPORT), "every": "1h"},
        "news": {
            "every": "15m",
            "retention_days": None,
            "sources": [
                {
                    "name": s["name"],
                    "url": s["url"],
                    "tag": s["tag"],
                    # Matches the two money headlines of bench/feeds.py (about one item in six).
                    "rules": [{"match": r"(?i)\b(raises|ipo)\b", "tag": "Investing"}],
                }
                for s in sources
            ],
        },
        "api": {"cache_max_age": 300, "rate_limit": rate_limit},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


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
    sources = [{"name": f"Bench Wire {i:03d}", "url": feed_base + f["path"], "tag": f["tag"]} for i, f in enumerate(feeds)]
    log(f"ingestion: feedparser alone over {len(feeds)} bodies, median of {args.ingest_repeats}")
    reference = worker("feedparser", str(work / "ingest-feeds"), "--repeats", str(args.ingest_repeats))
    log(f"ingestion: feedparser {reference['seconds']:.2f} s for {reference['entries']} entries")
    fetch_only = worker("fetch", *[s["url"] for s in sources])
    runs = []
    for repeat in range(args.ingest_repeats):
        db = work / f"ingest-{repeat}.db"
        config = news_config(work / f"ingest-{repeat}.yml", db, sources)
        feed_stats(feed_base, reset=True)
        result = worker("ingest", str(config), str(db), "--runs", "2")
        served = feed_stats(feed_base)
        full, unchanged = result["runs"]
        log(
            f"ingestion {repeat + 1}: full {full['seconds']:.2f} s {full['statuses']}, "
            f"unchanged {unchanged['seconds']:.3f} s {unchanged['statuses']}, server sent {served}"
        )
        runs.append({**result, "served": served})
    full = statistics.median(r["runs"][0]["seconds"] for r in runs)
    unchanged = statistics.median(r["runs"][1]["seconds"] for r in runs)
    return {
        "feeds": len(feeds),
        "items_per_feed": args.items,
        "feedparser": reference,
        "fetch_only": fetch_only,
        "runs": runs,
        "full_seconds": full,
        "unchanged_seconds": unchanged,
        "full_vs_feedparser": full / reference["seconds"],
        "unchanged_vs_feedparser": unchanged / reference["seconds"],
    }


def qsite(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / "qsite"), *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench: qsite {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


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


def run_wrk(args, url: str, seconds: float, headers: dict | None = None) -> dict:
    command = ["wrk", "-t", str(args.threads), "-c", str(args.connections), "-d", f"{seconds:g}s", "--timeout", "5s", "-s", str(LUA)]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    command = pinned(args.client_core, command + [url])
    done = subprocess.run(command, capture_output=True, text=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("WRK_JSON ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"bench: wrk failed on {url}:\n{done.stdout}\n{done.stderr}")
    result = json.loads(line.removeprefix("WRK_JSON "))
    seconds = result["duration_us"] / 1e6
    errors = sum(result["errors"].values())
    return {
        "rps": result["requests"] / seconds,
        "p50_ms": result["latency_us"]["p50"] / 1000,
        "p99_ms": result["latency_us"]["p99"] / 1000,
        "max_ms": result["latency_us"]["max"] / 1000,
        "requests": result["requests"],
        "errors": errors,
        "error_kinds": {k: v for k, v in result["errors"].items() if v},
    }


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


def bench_api(args, targets: list[dict]) -> tuple[dict, list[float]]:
    """Every target, ``args.rounds`` times, interleaved; medians per target, and the load average per round."""
    for target in targets:
        target["body_bytes"] = check(target["url"], target.get("headers"), target["status"], target.get("rows"))
        run_wrk(args, target["url"], args.warmup, target.get("headers"))
    results = {t["name"]: [] for t in targets}
    loads = []
    for round_no in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for target in targets:
            result = run_wrk(args, target["url"], args.duration, target.get("headers"))
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
            "headers": target.get("headers", {}),
            "status": target["status"],
            "body_bytes": target["body_bytes"],
            "rps": statistics.median(r["rps"] for r in runs),
            "p50_ms": statistics.median(r["p50_ms"] for r in runs),
            "p99_ms": statistics.median(r["p99_ms"] for r in runs),
            "errors": sum(r["errors"] for r in runs),
            "rounds": runs,
        }
    return summary, loads


def visibility(args, base: str, db: Path, work: Path, trials: int) -> dict:
    """Ingest one new item while serving; time until ``/api/v1/news`` shows it."""
    from config import load_config
    from pipeline.news import ingest_news
    from pipeline.store import open_database

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


# -- profiling ---------------------------------------------------------------


def py_spy_record(output: Path, rest: list[str]) -> list[str]:
    py_spy = shutil.which("py-spy") or str(BIN / "py-spy")
    if not Path(py_spy).exists() and not shutil.which(py_spy):
        raise SystemExit("bench: py-spy is not installed; run bench/profile.sh, which installs it")
    return [py_spy, "record", "--format", "raw", "--rate", "250", "-o", str(output), *rest]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


#: Where a sample's time goes, by layer: the first rule matching the stack
#: (or, for ``leaf:`` rules, its innermost frame) names it.
LAYERS = [
    ("imports", ("_find_and_load",)),
    ("fair-use limiter (limits)", ("limits/", "FairUse.hit")),
    # limits' memory storage hands expiry to asyncio.to_thread; Datasette runs SQL there too.
    ("thread pool hand-offs", ("leaf:concurrent/futures/thread.py", "leaf:threading.py")),
    ("feedparser", ("feedparser/",)),
    ("SQLite writes (pipeline store)", ("leaf:pipeline/store/", "leaf:Database.execute (sqlite_utils")),
    ("h11 (HTTP parsing/serialising)", ("leaf:h11/",)),
    ("uvicorn", ("leaf:uvicorn/",)),
    ("socket writes", ("leaf:_SelectorSocketTransport.write",)),
    ("asyncio event loop", ("leaf:asyncio/", "leaf:selectors.py")),
    ("datasette", ("leaf:datasette/",)),
    ("httpx / httpcore (fetching)", ("leaf:httpx/", "leaf:httpcore/", "leaf:anyio/")),
    ("qsite code (service/, pipeline/)", ("leaf:service/", "leaf:pipeline/")),
]


def _layer(stack: str, leaf: str) -> str:
    for name, rules in LAYERS:
        for rule in rules:
            if rule.startswith("leaf:") and rule[5:] in leaf or not rule.startswith("leaf:") and rule in stack:
                return name
    return "other"


def summarise_profile(raw: Path, top: int = 15) -> dict:
    """Self and inclusive sample shares per function, and shares per layer, from py-spy's collapsed stacks."""
    own, inclusive, layers, total = Counter(), Counter(), Counter(), 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        count = int(count)
        total += count
        layers[_layer(stack, stack.rsplit(";", 1)[-1])] += count
        frames = [_frame(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if frames:
            own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    share = lambda counter: [(name, round(100 * n / total, 1)) for name, n in counter.most_common(top)]  # noqa: E731
    ours = Counter({k: v for k, v in inclusive.items() if any(p in k for p in ("pipeline/", "service/", "bench/"))})
    return {
        "samples": total,
        "layers_pct": share(layers),
        "self_pct": share(own),
        "inclusive_pct": share(inclusive),
        "project_inclusive_pct": share(ours),
    }


def _frame(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file-relative path)``, lines dropped so a function is one row."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "python3.11/", str(ROOT) + "/"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


def profile_serving(args, server_pid: int, targets: list[dict], out: Path) -> dict:
    profiles = {}
    for target in targets:
        if target["name"] not in ("news", "news 304", "datasette news"):
            continue
        raw = out / f"profile-serve-{target['name'].replace(' ', '-')}.txt"
        spy = subprocess.Popen(
            py_spy_record(raw, ["--pid", str(server_pid), "--duration", str(int(args.duration) + 1), "--nonblocking"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)
        run_wrk(args, target["url"], args.duration, target.get("headers"))
        _, err = spy.communicate(timeout=60)
        if spy.returncode != 0 or not raw.exists():
            raise SystemExit(f"bench: py-spy failed: {err.decode()[-2000:]}")
        profiles[target["name"]] = {"raw": shown(raw), **summarise_profile(raw)}
    return profiles


# -- report ------------------------------------------------------------------


def ratios(api: dict) -> dict:
    """Throughput ratios, each the median over rounds of the ratio within a round.

    Targets run back to back within a round, so a ratio within a round is
    taken under the same conditions; the machine is shared, and load from
    elsewhere shifts whole rounds more than it shifts one target against another.
    """
    def ratio(a: str, b: str) -> float:
        return statistics.median(x["rps"] / y["rps"] for x, y in zip(api[a]["rounds"], api[b]["rounds"]))

    out = {}
    pairs = {
        "news": "raw news",
        "courses": "raw courses",
        "stats": "raw stats",
        "news 304": "raw news 304",
        "news, no limiter": "raw news",
    }
    for name, raw in pairs.items():
        if name in api and raw in api:
            out[name] = {"vs_raw": ratio(name, raw)}
            if "datasette news" in api:
                out[name]["vs_datasette"] = ratio(name, "datasette news")
    return out


#: The rows the targets are judged on (the others are references and diagnostics).
OURS = ("news", "courses", "stats", "news 304")


def verdicts(results: dict) -> list[dict]:
    api, rat = results.get("api", {}), results.get("ratios", {})
    values = {}
    rat = {name: r for name, r in rat.items() if name in OURS}
    if rat:
        values["min_vs_raw"] = min(r["vs_raw"] for r in rat.values())
        ds = [r["vs_datasette"] for name, r in rat.items() if "vs_datasette" in r and name != "news 304"]
        if ds:
            values["min_vs_datasette"] = min(ds)
    ours = [v for name, v in api.items() if name in OURS]
    if ours:
        values["max_p99_ms"] = max(v["p99_ms"] for v in ours)
    if "ingestion" in results:
        values["full_vs_feedparser"] = results["ingestion"]["full_vs_feedparser"]
        values["unchanged_vs_feedparser"] = results["ingestion"]["unchanged_vs_feedparser"]
    if "memory" in results:
        values["peak_rss_mb"] = results["memory"]["serve_peak_mb"]
    if "visibility" in results:
        values["visible_s"] = results["visibility"]["max_visible_after_commit_s"]
    rows = []
    for label, key, op, bound in TARGETS:
        if key in values:
            value = values[key]
            ok = {"<=": value <= bound, ">=": value >= bound, "<": value < bound}[op]
            rows.append({"target": label, "value": round(value, 3), "bound": f"{op} {bound:g}", "pass": ok})
    return rows


def table(results: dict) -> str:
    lines = []
    api = results.get("api", {})
    if api:
        rat = results.get("ratios", {})
        lines.append(f"{'target':<17} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'bytes':>6}  {'vs raw':>6} {'vs ds':>6}")
        for name, row in api.items():
            r = rat.get(name, {})
            vs_raw = f"{r['vs_raw']:.2f}x" if "vs_raw" in r else ""
            vs_ds = f"{r['vs_datasette']:.1f}x" if "vs_datasette" in r else ""
            lines.append(
                f"{name:<17} {row['rps']:>8.0f} {row['p50_ms']:>7.2f} {row['p99_ms']:>7.2f} {row['errors']:>6} "
                f"{row['body_bytes']:>6}  {vs_raw:>6} {vs_ds:>6}"
            )
        lines.append("")
    ing = results.get("ingestion")
    if ing:
        fp = ing["feedparser"]
        lines.append(f"ingestion of {ing['feeds']} feeds x {ing['items_per_feed']} items ({fp['bytes'] / 1e6:.1f} MB) over loopback:")
        lines.append(f"  feedparser.parse alone, one process  {fp['seconds']:7.2f} s   1.00x")
        lines.append(f"  fetch alone (pipeline fetcher)       {ing['fetch_only']['seconds']:7.2f} s   {ing['fetch_only']['seconds'] / fp['seconds']:.2f}x")
        lines.append(f"  ingest_news, full (new database)     {ing['full_seconds']:7.2f} s   {ing['full_vs_feedparser']:.2f}x")
        lines.append(f"  ingest_news, unchanged second run    {ing['unchanged_seconds']:7.3f} s   {ing['unchanged_vs_feedparser']:.3f}x")
        lines.append("")
    if "news_db" in results:
        db = results["news_db"]
        lines.append(
            f"database: {sum(db['news_by_tag'].values())} news items {db['news_by_tag']}, built by qsite ingest "
            f"site ({db['ingest_site_s']:.1f} s) and qsite ingest news ({db['ingest_news_s']:.1f} s)"
        )
    if "memory" in results:
        lines.append(f"serving process peak RSS (VmHWM): {results['memory']['serve_peak_mb']:.1f} MB")
    if "visibility" in results:
        trials = ", ".join(f"{t['visible_after_commit_s'] * 1000:.0f} ms" for t in results["visibility"]["trials"])
        lines.append(f"new item visible through the API after its ingest committed: {trials}")
    lines.append("")
    profiles = dict(results.get("profile_serve", {}))
    if "profile_ingest" in results:
        profiles["ingest"] = results["profile_ingest"]
    for name, prof in profiles.items():
        lines.append(f"profile {name} ({prof['samples']} samples, {prof['raw']}):")
        lines.append("  by layer:       " + "; ".join(f"{f} {p}%" for f, p in prof["layers_pct"]))
        lines.append("  self time:      " + "; ".join(f"{f} {p}%" for f, p in prof["self_pct"][:10]))
        lines.append("  project code:   " + "; ".join(f"{f} {p}%" for f, p in prof["project_inclusive_pct"][:10]))
        lines.append("")
    rows = results.get("targets", [])
    if rows:
        lines.append(f"{'target':<42} {'value':>9} {'bound':>8}  result")
        for row in rows:
            lines.append(f"{row['target']:<42} {row['value']:>9.3f} {row['bound']:>8}  {'PASS' if row['pass'] else 'FAIL'}")
    return "\n".join(lines)


def machine() -> dict:
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for package in ("datasette", "uvicorn", "feedparser", "httpx", "sqlite-utils", "uvloop", "httptools"):
        try:
            from importlib.metadata import version

            versions[package] = version(package)
        except Exception:
            versions[package] = None
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(), "packages": versions, "wrk": wrk.strip()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3, help="seconds of load per target per round (default 3)")
    parser.add_argument("--warmup", type=float, default=1, help="seconds of load per target before round 1")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds over all targets (medians are kept)")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1: wrk gets one core)")
    parser.add_argument("--feeds", type=int, default=100)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--news-items", type=int, default=20_000, help="news items in the served database")
    parser.add_argument("--ingest-repeats", type=int, default=3)
    parser.add_argument("--visibility-trials", type=int, default=3)
    parser.add_argument("--server-core", type=int, default=0, help="core the servers are pinned to (-1: none)")
    parser.add_argument("--client-core", type=int, default=1, help="core wrk is pinned to (-1: none)")
    parser.add_argument("--skip", action="append", default=[], choices=["ingest", "api"], help="leave a part out")
    parser.add_argument("--profile", action="store_true", help="also profile serving and ingestion with py-spy")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (databases, feeds, logs)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.server_core = None if args.server_core < 0 else args.server_core
    args.client_core = None if args.client_core < 0 else args.client_core
    if "api" not in args.skip and not shutil.which("wrk"):
        raise SystemExit("bench: wrk is not installed; run bench/run.sh (make bench), which installs it")

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
            port, raw_port = free_port(), free_port()
            server = procs.start(
                pinned(args.server_core, [str(BIN / "qsite"), "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]),
                work / "serve.log",
                cwd=ROOT,
            )
            base = f"http://127.0.0.1:{port}"
            results["serve_startup_s"] = wait_http(base + "/api/v1/stats", server)
            # The same service with the limiter off: shows what fair use costs per request.
            unlimited_port = free_port()
            unlimited = procs.start(
                pinned(args.server_core, [str(BIN / "qsite"), "serve", "--config",
                       str(news_config(work / "serve-unlimited.yml", db, [], rate_limit="off")),
                       "--host", "127.0.0.1", "--port", str(unlimited_port)]),
                work / "serve-unlimited.log",
                cwd=ROOT,
            )
            unlimited_base = f"http://127.0.0.1:{unlimited_port}"
            wait_http(unlimited_base + "/api/v1/stats", unlimited)
            db_name = next(iter(httpx.get(base + "/-/databases.json", timeout=10).json()))["name"]
            targets_ours = {"news": NEWS, "courses": COURSES, "stats": STATS}
            recorded = record_responses(base, targets_ours, work / "responses.json")
            news_etag = dict((k.lower(), v) for k, v in recorded[NEWS]["headers"])["etag"]
            raw_server = procs.start(
                pinned(
                    args.server_core,
                    [sys.executable, "-m", "uvicorn", "bench.raw_asgi:app", "--host", "127.0.0.1", "--port", str(raw_port),
                     "--no-access-log", "--log-level", "warning"],
                ),
                work / "raw.log",
                cwd=ROOT,
                env={**os.environ, "BENCH_RAW_RESPONSES": str(work / "responses.json")},
            )
            raw_base = f"http://127.0.0.1:{raw_port}"
            wait_http(raw_base + NEWS, raw_server)
            inm = {"If-None-Match": news_etag}
            datasette_news = f"/{db_name}/news.json?tag=Science&_size=30&_sort_desc=published_at&_shape=array"
            targets = [
                {"name": "news", "url": base + NEWS, "status": 200},
                {"name": "raw news", "url": raw_base + NEWS, "status": 200},
                {"name": "courses", "url": base + COURSES, "status": 200},
                {"name": "raw courses", "url": raw_base + COURSES, "status": 200},
                {"name": "stats", "url": base + STATS, "status": 200},
                {"name": "raw stats", "url": raw_base + STATS, "status": 200},
                {"name": "news 304", "url": base + NEWS, "status": 304, "headers": inm},
                {"name": "raw news 304", "url": raw_base + NEWS, "status": 304, "headers": inm},
                {"name": "datasette news", "url": base + datasette_news, "status": 200, "rows": 30},
                {"name": "news, no limiter", "url": unlimited_base + NEWS, "status": 200},
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
                "raw_peak_mb": max(m["hwm_kb"] for m in memory_kb(raw_server.pid).values()) / 1024,
            }
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


if __name__ == "__main__":
    main()
