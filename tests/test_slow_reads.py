"""A slow /api/v1 read never holds the event loop (real ``qsite serve``, one worker, real HTTP).

Issue 22, item 7: reads run inline on the event loop were bounded only by
``api.sql_time_limit_ms``, so one slow search stalled every other request of
the worker for the whole limit. Now an inline read gets
:data:`~service.api.reader.INLINE_BUDGET_MS`, then runs again on the API's
threads, and stops at the limit counted from its start.

The slow read is a search anyone may send: thirty-odd words found in every
item and two never found together (``alpha``, ``beta``). Full-text search
walks every item for it, so at 250,000 items it takes about 0.4 s on a fast
core and 0.6 s on a slow one (one walk: a first page that is not full is its
own count), twice the limit configured here or more. While one client repeats it, another
sends uncached and cached requests; their latency is compared with the same
requests with the slow client idle, in alternating blocks so that the
machine's other work falls on both alike.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from db.model import NEWS, format_time
from pipeline.store import bump_version, transaction
from pipeline.store import news as news_store
from pipeline.store.records import Item
from tests.support.known_data import SOURCES, seeded_database
from tests.support.processes import qsite_serve

#: A real server's latency measured: `make test` runs it alone, after the parallel part (tests/README.md).
pytestmark = [pytest.mark.slow, pytest.mark.serial]

FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "slow_reads.json"
TIME_LIMIT_MS = 200
#: Items searched through: the search below takes 0.4 to 0.6 s over them (building them, about 7 s).
ITEMS = 250_000
#: Found in every item, and two words never found together: 190 characters (q is at most 200).
SLOW_Q = " ".join(["a b c d e"] * 18) + " alpha beta"
#: Blocks of requests with the slow client idle, then busy; requests of each kind per block, at least;
#: slow searches that end during each busy block, at least.
BLOCKS, PER_BLOCK, SLOW_PER_BLOCK = 3, 60, 3
#: What the busy blocks' p99 may add to the idle ones' (issue 22: 50 ms).
ADDED_P99 = 0.050


def filler(count: int):
    """``count`` items of one publisher, a second apart, each with ``alpha`` or ``beta`` (never both) in its title."""
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    source = SOURCES["Science"]
    for n in range(count):
        word = ("alpha", "beta")[n % 2]
        published = format_time(start + timedelta(seconds=n))
        item = Item(f"filler-{n}", f"https://news.example/filler/{n}", f"{word} headline {n}", "a b c d e", "Science", published, True)
        yield source, f"filler-{n:06d}", item


@pytest.fixture(scope="module")
def big_site(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slow")
    db = seeded_database(folder / "site.db")
    try:
        with transaction(db):
            news_store.bulk_insert_items(db, filler(ITEMS), "2026-11-20T09:30:00Z")
            bump_version(db, NEWS, "2026-11-20T09:31:00Z")
    finally:
        db.close()
    return folder


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[98]


class SlowClient:
    """A client repeating the slow search, one request after another, while started."""

    def __init__(self, base: str):
        self.url = f"{base}/api/v1/news?q={quote(SLOW_Q)}"
        self.answers: list[tuple[int, float, dict]] = []
        self.sent = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                self.sent.set()
                started = time.perf_counter()
                response = client.get(self.url)
                self.answers.append((response.status_code, time.perf_counter() - started, response.json()))

    def __enter__(self) -> "SlowClient":
        self.thread.start()
        assert self.sent.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


class Measuring:
    """Uncached requests (parameters never asked before) and cached ones, in turn; the seconds each took."""

    def __init__(self, client: httpx.Client, base: str):
        self.client = client
        self.base = base
        self.asked = itertools.count()

    def block(self, enough=lambda: True) -> tuple[list[float], list[float]]:
        """At least :data:`PER_BLOCK` of each, and more until ``enough()``."""
        uncached, cached = [], []
        while len(uncached) < PER_BLOCK or not enough():
            n = next(self.asked)
            since = format_time(datetime(2020, 1, 2, tzinfo=timezone.utc) + timedelta(minutes=n))
            for url, times in ((f"/api/v1/news?since={since}&limit={1 + n % 50}", uncached), ("/api/v1/stats", cached)):
                started = time.perf_counter()
                response = self.client.get(self.base + url)
                times.append(time.perf_counter() - started)
                assert response.status_code == 200, (url, response.status_code, response.text[:300])
        return uncached, cached


def test_a_read_at_the_time_limit_leaves_other_requests_their_usual_latency(big_site, make_config):
    config = make_config(
        database=str(big_site / "site.db"), api={"rate_limit": "off", "sql_time_limit_ms": TIME_LIMIT_MS, "workers": 1}
    )
    idle = {"uncached": [], "cached": []}
    busy = {"uncached": [], "cached": []}
    slow_answers = []
    with qsite_serve(config, big_site / "serve.log") as served, httpx.Client(timeout=30) as client:
        measuring = Measuring(client, served.base)
        measuring.block()  # warm: connections, the page cache, the response cache's first entries
        for _ in range(BLOCKS):
            for state, kinds in (("idle", idle), ("busy", busy)):
                if state == "idle":
                    uncached, cached = measuring.block()
                else:
                    with SlowClient(served.base) as slow:
                        # the slow client busy for a while: several of its searches end during the block
                        uncached, cached = measuring.block(lambda: len(slow.answers) >= SLOW_PER_BLOCK)
                    slow_answers += slow.answers
                kinds["uncached"] += uncached
                kinds["cached"] += cached
    figures = {
        f"{state}_{kind}_{stat}_ms": round(f(times) * 1000, 1)
        for state, kinds in (("idle", idle), ("busy", busy))
        for kind, times in kinds.items()
        for stat, f in (("median", statistics.median), ("p99", p99))
    }
    durations = [seconds for _, seconds, _ in slow_answers]
    figures["slow_median_ms"] = round(statistics.median(durations) * 1000, 1)
    figures["slow_requests"] = len(slow_answers)
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(figures))
    # The slow search hit the limit every time: the answer says the data could not be read in time.
    assert {status for status, _, _ in slow_answers} == {503}, figures
    assert {body["type"] for _, _, body in slow_answers} == {"/api/v1/problems/unavailable"}
    # ... and ended at the limit, +- 10 %, counted from its start (the median: one request may meet a busy machine).
    assert 0.9 * TIME_LIMIT_MS <= figures["slow_median_ms"] <= 1.1 * TIME_LIMIT_MS, figures
    for kind in ("uncached", "cached"):
        assert p99(busy[kind]) <= p99(idle[kind]) + ADDED_P99, (kind, figures)
