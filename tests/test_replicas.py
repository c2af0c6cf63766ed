"""Scale-out on one machine: API replicas over one database file, and `qsite up` running both roles."""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.error
import urllib.request
from contextlib import ExitStack

import pytest

from tests.support.feeds import RSS_TYPE, Entry, rss
from tests.support.local_server import Reply
from tests.support.processes import qsite_serve, stop, wait_until

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow


def get_json(port: int, path: str):
    """(status, body) of a GET to the local server, or (None, None) while it is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, None


def lab_feed(count: int) -> str:
    entries = [
        Entry(f"https://news.example/story-{n}", f"Qubit result {n}", f"Mon, 16 Nov 2026 0{n}:00:00 GMT", f"Finding number {n}.")
        for n in range(1, count + 1)
    ]
    return rss(entries, title="Lab", link="https://news.example/")


@pytest.fixture
def news_config(make_config, http_server):
    feed = {"body": lab_feed(1)}
    http_server.routes["/feed.xml"] = lambda seen: Reply(200, feed["body"], RSS_TYPE)
    config = make_config(news={"every": "15m", "sources": [{"name": "Lab", "url": http_server.url("/feed.xml"), "tag": "Science"}]})
    return config, feed


def test_two_serve_replicas_over_one_database_both_serve_new_data(qsite, news_config, tmp_path):
    config, feed = news_config
    first = qsite("ingest", "all", "--config", str(config))
    assert first.returncode == 0, first.stderr
    with ExitStack() as stack:
        replicas = [stack.enter_context(qsite_serve(config, tmp_path / f"serve-{n}.log")) for n in range(2)]
        ports = [replica.port for replica in replicas]
        for port in ports:
            status, stats = get_json(port, "/api/v1/stats")
            assert status == 200 and stats["news_items"] == 1, (port, status, stats)
        feed["body"] = lab_feed(3)
        second = qsite("ingest", "news", "--config", str(config))
        assert second.returncode == 0, second.stderr
        for port in ports:
            seen = wait_until(lambda: get_json(port, "/api/v1/stats")[1]["news_items"] == 3, timeout=5)
            assert seen, f"replica on port {port} still serves the old data"
            status, news = get_json(port, "/api/v1/news?limit=10")
            assert status == 200 and [item["title"] for item in news["results"]] == [
                "Qubit result 3",
                "Qubit result 2",
                "Qubit result 1",
            ]
        codes = [stop(replica.process) for replica in replicas]
    # Stopped gracefully by the signal (status 0), not killed.
    assert all(code in (0, -signal.SIGTERM) for code in codes), codes


def test_qsite_up_ingests_serves_schedules_and_stops_on_ctrl_c(news_config, tmp_path):
    config, _ = news_config
    log_path = tmp_path / "up.log"
    with qsite_serve(config, log_path, command="up", timeout=60) as up:
        port = up.port
        status, stats = get_json(port, "/api/v1/stats")
        assert status == 200, log_path.read_text()
        # Ingested before serving: the catalog and the news are there from the first answer.
        assert stats["courses"] > 0 and stats["news_items"] == 1
        children = wait_until(lambda: re.search(r"scheduler pid (\d+), server pid (\d+)", log_path.read_text()), 10)
        pids = [int(pid) for pid in children.groups()]
        # The scheduler child is up and skipped the start-up run (up had just ingested).
        assert wait_until(lambda: "job site: every 3600 s" in log_path.read_text(), 15), log_path.read_text()
        code = stop(up.process, signal.SIGINT, timeout=20)
    log_text = log_path.read_text()
    assert code == 0, log_text
    assert "job site: starting" not in log_text
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert get_json(port, "/api/v1/stats") == (None, None)
