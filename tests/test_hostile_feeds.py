"""Hostile feeds over real HTTP: each fails its own source, cleanly and in bounded time.

The corpus (``tests/support/hostile_feeds.py``) is served by the real local server next to
one good feed. Whatever a document does, ingesting must not raise, must not
hang past the fetch timeouts, must mark that source failed (or keep only sane
items when a careful reader may salvage some), and must leave the good
source's items exactly as they should be.
"""

from __future__ import annotations

import os
import signal
import sys
import subprocess
import threading
import time

import pytest

from qsite.config import load_config
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.news import parse_pool
from qsite.pipeline.news.parse_pool import IN_PROCESS_MAX_BYTES
from qsite.pipeline.news.normalise import SUMMARY_LIMIT
from qsite.pipeline.store import open_database
from tests.support.feeds import RSS_TYPE
from tests.support.hostile_feeds import corpus, double_gzip_bomb, good_feed, gzip_bomb, memory_hungry, slow_to_parse
from tests.support.local_server import DripServer, Reply
from tests.support.processes import QSITE, cpu_seconds, run_qsite, wait_until

SOAK = bool(os.environ.get("QSITE_SOAK"))
SCALE = 4 if SOAK else 1
GOOD = "Good Source"
GOOD_ITEMS = 5
FAST = {"connect_timeout": 2, "read_timeout": 1, "deadline": 3}


def serve_corpus(http_server, docs):
    http_server.routes["/good.xml"] = Reply(200, good_feed(GOOD_ITEMS, start=1000), RSS_TYPE)
    sources = [{"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"}]
    for doc in docs:
        http_server.routes[f"/{doc.name}.xml"] = Reply(200, doc.body, doc.headers)
        sources.append({"name": doc.name, "url": http_server.url(f"/{doc.name}.xml"), "tag": "Industry"})
    return sources


def assert_sane_items(db, source):
    for row in db.query("SELECT * FROM news WHERE source = ?", [source]):
        assert row["url"].startswith(("http://", "https://")), row["url"][:100]
        assert len(row["summary"]) <= SUMMARY_LIMIT
        assert "<" not in row["title"] + row["summary"] or "&lt;" not in row["summary"]
        assert row["published_at"].endswith("Z")
        assert "root:" not in row["title"] + row["summary"]  # no external entity was read
        assert "lollollol" not in row["title"] + row["summary"]  # no entity was expanded


def check_outcome(db, docs, reports):
    by_source = {report.source: report for report in reports}
    assert by_source[GOOD].status == "ok", by_source[GOOD].line()
    good = list(db.query("SELECT url FROM news WHERE source = ? ORDER BY url", [GOOD]))
    assert len(good) == GOOD_ITEMS
    rows = {row["name"]: row for row in db.query("SELECT * FROM sources")}
    for doc in docs:
        report, row = by_source[doc.name], rows[doc.name]
        if doc.may_yield_items:
            assert report.status in ("ok", "warning", "failed"), report.line()
        else:
            assert report.status == "failed", f"{doc.name}: {report.line()}"
        if report.status == "failed":
            assert row["last_status"] == "failed" and row["consecutive_failures"] == 1
            assert row["last_error"] and len(row["last_error"]) < 2000
            assert db.execute("SELECT count(*) FROM news WHERE source = ?", [doc.name]).fetchone()[0] == 0
        assert_sane_items(db, doc.name)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "process-pool"])
@pytest.mark.slow
def test_corpus_fails_each_source_alone(make_config, http_server, workers):
    docs = corpus(SCALE)
    config = load_config(make_config(news={"sources": serve_corpus(http_server, docs)}))
    db = open_database(config.database_path)
    started = time.monotonic()
    reports = ingest_news(db, config, client_options=FAST, parse_workers=workers)
    assert time.monotonic() - started < 60  # liveness bound, not a benchmark
    assert len(reports) == len(docs) + 1
    check_outcome(db, docs, reports)


@pytest.mark.slow
def test_corpus_through_the_real_command(make_config, http_server):
    """The real ``qsite ingest news`` (8+ sources, so its process pool parses): exit 1, nothing lost."""
    docs = corpus(SCALE)
    config = make_config(news={"sources": serve_corpus(http_server, docs)})
    result = run_qsite("ingest", "news", "--config", str(config), timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = {line.split(":")[0].removeprefix("news "): line for line in result.stdout.splitlines()}
    assert lines[GOOD].startswith(f"news {GOOD}: ok"), lines[GOOD]
    db = open_database(load_config(config).database_path)
    reports = {row["source"]: row for row in db.query("SELECT source, status FROM ingest_runs WHERE kind = 'news'")}
    assert len(reports) == len(docs) + 1 and reports[GOOD]["status"] == "ok"
    for doc in docs:
        if not doc.may_yield_items:
            assert reports[doc.name]["status"] == "failed", doc.name
            assert f"news {doc.name}: failed" in lines[doc.name]
    assert db.execute("SELECT count(*) FROM news WHERE source = ?", [GOOD]).fetchone()[0] == GOOD_ITEMS
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_oversize_bodies_are_refused_after_decompression(make_config, http_server):
    cap = 256 * 1024
    http_server.routes["/good.xml"] = Reply(200, good_feed(GOOD_ITEMS), RSS_TYPE)
    http_server.routes["/declared.xml"] = Reply(200, b"<" * (cap + 1), RSS_TYPE)
    http_server.routes["/bomb.xml"] = Reply(
        200, gzip_bomb(64 * cap), {"Content-Type": "application/rss+xml", "Content-Encoding": "gzip"}
    )
    sources = [
        {"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"},
        {"name": "declared", "url": http_server.url("/declared.xml"), "tag": "Science"},
        {"name": "bomb", "url": http_server.url("/bomb.xml"), "tag": "Science"},
    ]
    config = load_config(make_config(news={"sources": sources}))
    db = open_database(config.database_path)
    reports = {r.source: r for r in ingest_news(db, config, client_options={**FAST, "max_bytes": cap}, parse_workers=0)}
    assert reports[GOOD].status == "ok"
    for name in ("declared", "bomb"):
        assert reports[name].failed and "byte limit" in reports[name].error, reports[name].line()


#: Most a ``qsite ingest news`` of one refused source may take, in KiB of resident memory (it takes about 90 MiB).
INGEST_MAX_RSS_KIB = 300 * 1024
#: Runs ``argv[2:]`` and writes its peak resident memory (KiB) to ``argv[1]``; exits with its status.
_LAUNCHER = (
    "import os, subprocess, sys; child = subprocess.Popen(sys.argv[2:]); _, status, usage = os.wait4(child.pid, 0); "
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss)); sys.exit(os.waitstatus_to_exitcode(status))"
)


@pytest.mark.slow
def test_a_body_of_two_content_codings_is_refused_before_decompressing(make_config, http_server, tmp_path):
    """4 KiB sent as ``gzip, gzip`` grow to 512 MiB: refused with a clear error, in bounded memory.

    httpx gunzips the inner layer of a chunk whole, so the byte limit saw it only once it
    was all in memory (a 3 KiB body took 4.25 GB and 11 s of CPU).
    """
    http_server.routes["/good.xml"] = Reply(200, good_feed(GOOD_ITEMS), RSS_TYPE)
    http_server.routes["/bomb.xml"] = Reply(
        200, double_gzip_bomb(512 << 20), {"Content-Type": "application/rss+xml", "Content-Encoding": "gzip, gzip"}
    )
    config = make_config(news={"sources": [
        {"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"},
        {"name": "bomb", "url": http_server.url("/bomb.xml"), "tag": "Science"},
    ]})
    # The console script, started by a small launcher that reports its peak memory (os.wait4).
    # Not wait4 from here: a child's ru_maxrss counts the memory of the process it was forked
    # (or vforked) from until its exec, and pytest's own grows to hundreds of MiB in a full run.
    peak = tmp_path / "peak"
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(peak), QSITE, "ingest", "news", "--config", str(config)],
        capture_output=True, text=True, timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"news {GOOD}: ok" in output
    assert int(peak.read_text()) < INGEST_MAX_RSS_KIB, f"peak {int(peak.read_text()) // 1024} MiB"
    assert "Content-Encoding 'gzip, gzip' has more than one coding; refused" in output, output


@pytest.mark.slow
def test_stalling_and_dripping_servers_end_at_the_timeouts(make_config, http_server):
    http_server.routes["/good.xml"] = Reply(200, good_feed(GOOD_ITEMS), RSS_TYPE)
    http_server.routes["/stall.xml"] = Reply(200, good_feed(1), stall=3)
    drip = DripServer(interval=0.2)
    try:
        sources = [
            {"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"},
            {"name": "stall", "url": http_server.url("/stall.xml"), "tag": "Science"},
            {"name": "drip", "url": drip.url(), "tag": "Science"},
        ]
        config = load_config(make_config(news={"sources": sources}))
        db = open_database(config.database_path)
        started = time.monotonic()
        reports = {r.source: r for r in ingest_news(db, config, client_options=FAST, parse_workers=0)}
        elapsed = time.monotonic() - started
    finally:
        drip.close()
    assert elapsed < 15  # the deadline is 3 s; anything near 15 is a hang
    assert reports[GOOD].status == "ok"
    assert reports["stall"].failed and "timed out" in reports["stall"].error
    assert reports["drip"].failed and "gave up after 3 s" in reports["drip"].error
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == GOOD_ITEMS


def test_a_source_that_turns_hostile_keeps_its_items(make_config, http_server):
    """Good today, garbage tomorrow: yesterday's items and their dates stay exactly as they were."""
    feed = {"body": good_feed(4).encode(), "headers": RSS_TYPE}
    http_server.routes["/turns.xml"] = lambda seen: Reply(200, feed["body"], feed["headers"])
    config = load_config(make_config(news={"every": "1s", "sources": [{"name": "turns", "url": http_server.url("/turns.xml"), "tag": "Science"}]}))
    db = open_database(config.database_path)
    assert ingest_news(db, config, client_options=FAST, parse_workers=0)[0].status == "ok"
    before = list(db.query("SELECT * FROM news ORDER BY id"))
    for doc in corpus():
        if doc.may_yield_items:
            continue
        feed["body"], feed["headers"] = doc.body, doc.headers
        db.execute("UPDATE sources SET next_fetch_at = NULL")  # due again now, whatever the backoff
        report = ingest_news(db, config, client_options=FAST, parse_workers=0)[0]
        assert report.failed, f"{doc.name}: {report.line()}"
        assert list(db.query("SELECT * FROM news ORDER BY id")) == before, doc.name
    failures = db.execute("SELECT consecutive_failures FROM sources").fetchone()[0]
    assert failures == sum(not doc.may_yield_items for doc in corpus())


def child_pids() -> set[str]:
    """Live children of this process, from /proc (every thread's, since pebble forks from its own threads)."""
    pids = set()
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{tid}/children") as children:
                pids.update(children.read().split())
        except FileNotFoundError:
            pass  # a thread that ended since the listing
    return pids


def turning_source(http_server, hostile_body):
    """A good source that turns into ``hostile_body`` from the second request on, next to a good source."""
    served = {"deep": 0, "good": 0}

    def deep(seen):
        served["deep"] += 1
        body = good_feed(3, start=500).encode() if served["deep"] == 1 else hostile_body
        return Reply(200, body, RSS_TYPE)

    def good(seen):
        # Its own count: the two sources are fetched concurrently, in either order.
        served["good"] += 1
        return Reply(200, good_feed(GOOD_ITEMS, start=1000 + 10 * served["good"]), RSS_TYPE)

    http_server.routes["/deep.xml"] = deep
    http_server.routes["/good.xml"] = good
    return [
        {"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"},
        {"name": "deep", "url": http_server.url("/deep.xml"), "tag": "Industry"},
    ]


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process-over-threshold", "process-pool"])
@pytest.mark.slow
def test_a_parse_past_its_deadline_fails_that_source_alone(make_config, http_server, workers):
    """~18 s of parsing, a 1 s deadline: the worker is killed, the source failed, its items and the other source fine."""
    body = slow_to_parse(3 * 1024 * 1024)
    assert len(body) >= IN_PROCESS_MAX_BYTES  # parse_workers=0 still parses it in a pool, under the deadline
    config = load_config(make_config(news={"sources": turning_source(http_server, body)}))
    db = open_database(config.database_path)
    children = child_pids()
    assert all(r.status == "ok" for r in ingest_news(db, config, client_options=FAST, parse_workers=workers, parse_deadline=1))
    before = list(db.query("SELECT * FROM news WHERE source = 'deep' ORDER BY id"))
    db.execute("UPDATE sources SET next_fetch_at = NULL")
    started = time.monotonic()
    reports = {r.source: r for r in ingest_news(db, config, client_options=FAST, parse_workers=workers, parse_deadline=1)}
    elapsed = time.monotonic() - started
    assert elapsed < 10  # liveness bound: without the deadline this parse alone takes ~18 s
    assert reports["deep"].failed, reports["deep"].line()
    assert "parsing took longer than 1 s; the feed is too large or malformed" in reports["deep"].error
    row = db.execute("SELECT last_status, consecutive_failures, next_fetch_at FROM sources WHERE name = 'deep'").fetchone()
    assert row[0] == "failed" and row[1] == 1 and row[2] is not None  # backs off like any failure
    assert list(db.query("SELECT * FROM news WHERE source = 'deep' ORDER BY id")) == before
    assert reports[GOOD].status == "ok" and reports[GOOD].counts["new"] == GOOD_ITEMS
    assert child_pids() <= children  # no worker outlives ingest_news


@pytest.mark.slow
def test_a_parse_past_its_memory_fails_that_source_alone(make_config, http_server):
    """A 1.2 MB feed that takes feedparser ~150 MiB, against 64 MiB: a clear failure, the worker's memory bounded."""
    body = memory_hungry(1_200_000)
    assert len(body) >= IN_PROCESS_MAX_BYTES  # parsed in a pool worker, under its memory limit
    http_server.routes["/good.xml"] = Reply(200, good_feed(GOOD_ITEMS), RSS_TYPE)
    http_server.routes["/hungry.xml"] = Reply(200, body, RSS_TYPE)
    sources = [
        {"name": GOOD, "url": http_server.url("/good.xml"), "tag": "Science"},
        {"name": "hungry", "url": http_server.url("/hungry.xml"), "tag": "Industry"},
    ]
    config = load_config(make_config(news={"sources": sources}))
    db = open_database(config.database_path)
    children = child_pids()
    reports = {r.source: r for r in ingest_news(db, config, client_options=FAST, parse_workers=0, parse_memory=64 << 20)}
    assert reports["hungry"].failed, reports["hungry"].line()
    assert "parsing needed more than 64 MiB of memory; the feed is too large or malformed" in reports["hungry"].error
    assert reports[GOOD].status == "ok" and reports[GOOD].counts["new"] == GOOD_ITEMS
    assert child_pids() <= children


#: CPU a pool worker has used once it is surely parsing the slow feed (forked, it starts with none).
PARSING_CPU_SECONDS = 0.1


def test_a_parser_process_that_dies_fails_that_source_alone(make_config, http_server):
    """A worker killed mid-parse (as the out-of-memory killer would) fails its feed; the run goes on."""
    body = slow_to_parse(2 * 1024 * 1024)
    config = load_config(make_config(news={"sources": turning_source(http_server, body)}))
    db = open_database(config.database_path)
    assert all(r.status == "ok" for r in ingest_news(db, config, client_options=FAST, parse_workers=0))
    db.execute("UPDATE sources SET next_fetch_at = NULL")
    children = child_pids()
    killed = []

    def kill_the_worker():
        deadline = time.monotonic() + 10
        while not killed and time.monotonic() < deadline:
            for pid in child_pids() - children:
                # once it has parsed for a while it has the job: a forked worker waiting for one uses no CPU
                if not wait_until(lambda: cpu_seconds(int(pid)) >= PARSING_CPU_SECONDS, 10):
                    continue
                os.kill(int(pid), signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)  # polls for the worker process to appear (the event)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    try:
        reports = {r.source: r for r in ingest_news(db, config, client_options=FAST, parse_workers=0)}
    finally:
        killer.join()
    assert killed
    assert reports["deep"].failed and "the parser process died (killed by signal 9)" in reports["deep"].error, reports["deep"].line()
    assert reports[GOOD].status == "ok" and reports[GOOD].counts["new"] == GOOD_ITEMS
    assert db.execute("SELECT count(*) FROM news WHERE source = 'deep'").fetchone()[0] == 3
    assert child_pids() <= children


@pytest.mark.parametrize("refused", ["open", "setrlimit"])
def test_a_memory_limit_that_cannot_be_set_leaves_the_worker_running(monkeypatch, refused):
    """Not Linux (no /proc/self/statm), or setrlimit refused (macOS): no limit, not a worker that dies at start."""
    def refuse(*args, **kwargs):
        raise FileNotFoundError("/proc/self/statm") if refused == "open" else ValueError("not allowed")

    if refused == "open":
        monkeypatch.setattr("builtins.open", refuse)
    else:
        monkeypatch.setattr(parse_pool.resource, "setrlimit", refuse)
    parse_pool._limit_memory(parse_pool.PARSE_MEMORY)  # returns: the worker goes on to parse

