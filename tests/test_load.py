"""Load with faults: a real ``qsite serve`` under concurrent requests while ingests run and a source fails.

Client threads loop over the endpoints on loopback for a bounded time, some
with ``If-None-Match``. Meanwhile real ``qsite ingest all`` processes run one
after another: the site export alternates between two versions, one feed grows
by exactly :data:`GROWTH` items per fetch, and another source always fails.

Every response must be a 200, a 304 or the documented 429, never a 5xx; and
every body must be one consistent data version: the catalog and totals are
exactly export A's or B's, never a mix; news counts are whole multiples of
:data:`GROWTH`; a page holds what its count says; and one ``updated_at`` of
the news never goes with two different counts.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.support.feeds import growing_feed
from tests.support.local_server import Reply
from tests.support.processes import qsite_serve, run_qsite
from tests.support.site_exports import configs_for_both_exports

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOAK = bool(os.environ.get("QSITE_SOAK"))
DURATION = 300.0 if SOAK else 10.0
MAX_DURATION = DURATION + 60.0
CLIENTS = 6
GROWTH = 7
#: Rate limit for the run: high enough to serve most requests, low enough that some get 429.
RATE_LIMIT = "150/second"
FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "load.json"

PATHS = [
    "/api/v1/stats",
    "/api/v1/news",
    "/api/v1/news?limit=100",
    "/api/v1/news?tag=Science&limit=50",
    "/api/v1/courses",
    "/api/v1/glossary",
    "/api/v1/glossary?q=qubit",
]


def totals_of(export: dict) -> tuple:
    sections = [section for course in export["courses"] for section in course["sections"]]
    return (len(export["courses"]), sum(len(s["slides"]) if "slides" in s else s["slide_count"] for s in sections),
            sum(1 for s in sections if s.get("quiz")), len(export["question_bank"]))


class Checker:
    """Records every response and every inconsistency seen."""

    def __init__(self, catalogs: list[list[str]], totals: list[tuple]):
        self.catalogs = catalogs
        self.totals = totals
        self.statuses: Counter = Counter()
        self.problems: list[str] = []
        self.news_versions: dict[tuple, int] = {}
        self.lock = threading.Lock()

    def fail(self, text: str):
        with self.lock:
            if len(self.problems) < 50:
                self.problems.append(text)

    def check(self, path: str, response: httpx.Response):
        with self.lock:
            self.statuses[response.status_code] += 1
        status = response.status_code
        if status in (304,):
            return
        if status == 429:
            if not (response.headers.get("retry-after") and response.headers["content-type"].startswith("application/problem+json")):
                self.fail(f"{path}: 429 without Retry-After or problem body")
            return
        if status != 200:
            self.fail(f"{path}: {status} {response.text[:200]}")
            return
        body = response.json()
        if path.startswith("/api/v1/stats"):
            if (body["courses"], body["slides"], body["quizzes"], body["question_bank_size"]) not in self.totals:
                self.fail(f"stats mixes two exports: {body}")
            if body["news_items"] % GROWTH:
                self.fail(f"stats news_items {body['news_items']} is not one committed feed version")
        elif path.startswith("/api/v1/courses"):
            ids = [course["id"] for course in body["results"]]
            if ids not in self.catalogs or body["count"] != len(ids):
                self.fail(f"courses are not one export: {ids}")
            if sum(course["section_count"] for course in body["results"]) != sum(len(c["sections"]) for c in body["results"]):
                self.fail("courses' section counts disagree with their sections")
        elif path.startswith("/api/v1/glossary"):
            if body["count"] != len(body["results"]):
                self.fail("glossary count disagrees with its results")
        elif path.startswith("/api/v1/news"):
            results, limit = body["results"], body["limit"]
            if len(results) != min(limit, body["count"]):
                self.fail(f"news page of {len(results)} with count {body['count']} and limit {limit}")
            keys = [(item["published_at"], item["id"]) for item in results]
            if keys != sorted(keys, reverse=True):
                self.fail("news page out of order")
            if body["tag"] is None:
                if body["count"] % GROWTH:
                    self.fail(f"news count {body['count']} is not one committed feed version")
                with self.lock:
                    seen = self.news_versions.setdefault((body["updated_at"],), body["count"])
                if seen != body["count"]:
                    self.fail(f"news updated_at {body['updated_at']} with counts {seen} and {body['count']}")


def test_consistent_answers_under_load_while_ingesting_with_a_failing_source(make_config, http_server, tmp_path, sample_export):
    http_server.routes["/grow.xml"] = growing_feed("Load", GROWTH)
    http_server.routes["/broken.xml"] = Reply(500, b"upstream down")
    http_server.routes["/html.xml"] = Reply(200, b"<html><body>Not a feed</body></html>", {"Content-Type": "text/html"})
    news = {
        "every": "1s",
        "sources": [
            {"name": "Grow", "url": http_server.url("/grow.xml"), "tag": "Science"},
            {"name": "Broken", "url": http_server.url("/broken.xml"), "tag": "Industry"},
            {"name": "Html", "url": http_server.url("/html.xml"), "tag": "Investing"},
        ],
    }
    config_a, config_b, other = configs_for_both_exports(make_config, tmp_path, sample_export, news=news, api={"rate_limit": RATE_LIMIT})
    first = run_qsite("ingest", "all", "--config", str(config_a))
    assert first.returncode == 1 and "news Grow: ok" in first.stdout, first.stdout + first.stderr  # Broken and Html fail

    catalogs = [[c["id"] for c in sample_export["courses"]], [c["id"] for c in other["courses"]]]
    checker = Checker(catalogs, [totals_of(sample_export), totals_of(other)])
    stop = threading.Event()
    ingests = Counter()

    def ingest_loop():
        configs = [config_b, config_a]
        turn = 0
        while not stop.is_set():
            result = run_qsite("ingest", "all", "--config", str(configs[turn % 2]), "--wait", "30")
            turn += 1
            ingests["runs"] += 1
            ingests["exit_1_with_failing_sources"] += result.returncode == 1 and "news Grow: ok" in result.stdout
            if "Traceback" in result.stderr or result.returncode not in (0, 1) or "news Grow: ok" not in result.stdout:
                checker.fail(f"ingest run: exit {result.returncode}: {result.stdout[-500:]} {result.stderr[-1000:]}")
            # review: pacing, not a wait: stored times are whole seconds, so the next run starts in the next second
            stop.wait(1.01 - time.time() % 1)

    def client_loop(seed):
        rand = random.Random(seed)
        etags = {}
        with httpx.Client(base_url=served.base, timeout=10) as client:
            while not stop.is_set():
                path = rand.choice(PATHS)
                headers = {"If-None-Match": etags[path]} if path in etags and rand.random() < 0.3 else {}
                try:
                    response = client.get(path, headers=headers)
                except httpx.HTTPError as exc:
                    checker.fail(f"{path}: {type(exc).__name__}: {exc}")
                    continue
                checker.check(path, response)
                if response.status_code == 200:
                    etags[path] = response.headers["etag"]
                elif response.status_code == 429:
                    # review: a polite client backing off as Retry-After asks (part of the load's shape), not a wait
                    time.sleep(min(0.2, float(response.headers.get("retry-after", "1"))))

    with qsite_serve(config_a, tmp_path / "serve.log") as served:
        threads = [threading.Thread(target=ingest_loop)] + [threading.Thread(target=client_loop, args=(n,)) for n in range(CLIENTS)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        # At least DURATION, and on until three ingests have run: on a loaded machine
        # one `qsite ingest all` can take several seconds (bounded: MAX_DURATION).
        while not stop.wait(0.5):
            waited = time.monotonic() - started
            if (waited >= DURATION and ingests["runs"] >= 3) or waited >= MAX_DURATION:
                break
        stop.set()
        for thread in threads:
            thread.join(60)
        elapsed = time.monotonic() - started
        final = httpx.get(served.url("/api/v1/stats")).json()
    log = (tmp_path / "serve.log").read_text()

    served_total = sum(checker.statuses.values())
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps({
        "seconds": round(elapsed, 1), "clients": CLIENTS, "requests": served_total,
        "statuses": {str(k): v for k, v in sorted(checker.statuses.items())}, "ingest_runs": ingests["runs"],
        "news_versions_seen": len(checker.news_versions), "final_news_items": final["news_items"], "problems": len(checker.problems),
    }))
    assert not checker.problems, checker.problems[:10]
    assert set(checker.statuses) <= {200, 304, 429}, checker.statuses
    assert checker.statuses[200] > 100 and ingests["runs"] >= 3
    assert len(checker.news_versions) >= 2  # clients really saw the data change under them
    assert "Traceback" not in log, log[-3000:]
