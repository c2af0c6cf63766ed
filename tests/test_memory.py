"""Memory stays bounded under endless distinct and long URLs, measured on a real ``qsite serve``.

Issue 13, section 1: one client sending ``/api/v1/stats?`` followed by ever
more ``&`` took the process from 247 MB to 1 GB (each spelling was kept as a
response-cache alias, and aliases were capped by count, not bytes), and
cursors carrying a made-up 11 KB item id were accepted and cached with their
long keys. Now every byte the cache keeps is counted against its budget
(:data:`qsite.service.api.response_cache.MAX_BYTES`), query strings are capped at
8 KiB, and a cursor must name an item id of the real shape.

The test streams tens of thousands of distinct valid URLs (news pages at
made-up cursor positions, whose bodies fill the entry budget several times
over; the same answers spelled with thousands of ``&``, whose aliases fill the
alias budget many times over) and cursors with long made-up ids, and reads
the server's resident size from ``/proc`` as it goes.
"""

from __future__ import annotations

import json
import os
import random
import socket
from datetime import timedelta
from pathlib import Path

import pytest

from qsite.pipeline.store import open_database
from qsite.service.api.cursors import encode_cursor
from qsite.service.api.response_cache import MAX_BYTES
from tests.support.known_data import NEWS_START, news_items, seed_catalog, seed_news
from tests.support.processes import qsite_serve, worker_pids

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOAK = bool(os.environ.get("QSITE_SOAK"))
FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "memory.json"
MiB = 1024 * 1024
#: What the process may grow by beyond the cache's budget: the allocator's slack,
#: the connections' buffers, Datasette's own caches.
MARGIN = 16 * MiB
ITEMS = 400


def rss(pid: int) -> int:
    """Resident set size of process ``pid`` in bytes (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class KeepAlive:
    """One persistent HTTP/1.1 connection sending GETs one after another (cheap on the client side)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buffer = b""

    def get(self, target: str) -> int:
        self.sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode("latin-1"))
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        while len(self.buffer) < length:
            self._read()
        self.buffer = self.buffer[length:]
        return int(lines[0].split()[1])

    def _read(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buffer += chunk

    def close(self) -> None:
        self.sock.close()


def seeded(folder: Path) -> Path:
    """A database with ``ITEMS`` news items of long summaries (a page of 100 is about 80 KB)."""
    db = open_database(folder / "site.db")
    seed_catalog(db)
    items = news_items(ITEMS)
    for item in items:
        item["summary"] = (item["summary"] + " and more words of summary ") * 16
    seed_news(db, items)
    db.close()
    config = folder / "qsite.yml"
    config.write_text(
        json.dumps(
            {"database": str(folder / "site.db"), "site_export": {"source": "x.json"}, "api": {"rate_limit": "off", "workers": 1}}
        ),
        encoding="utf-8",
    )
    return config


def test_resident_size_stays_within_the_cache_budget(tmp_path):
    config = seeded(tmp_path)
    rounds = 3 if SOAK else 1
    with qsite_serve(config, tmp_path / "serve.log") as served:
        (pid,) = worker_pids(served.process.pid)  # the one worker serving, with the cache
        client = KeepAlive(served.port)
        randomly = random.Random(13)
        for limit in range(1, 101):  # warm up: every code path once, and the allocator's arenas
            assert client.get(f"/api/v1/news?limit={limit}") == 200
            assert client.get(f"/api/v1/stats?{'&' * limit}") == 200
        baseline = rss(pid)
        peak, statuses, sent = baseline, {}, 0

        def send(target: str) -> None:
            nonlocal peak, sent
            status = client.get(target)
            statuses[status] = statuses.get(status, 0) + 1
            sent += 1
            if sent % 250 == 0:
                peak = max(peak, rss(pid))

        for _ in range(rounds):
            # 1500 distinct pages of up to 100 items (about 80 KB each): 120 MB of bodies.
            for _ in range(1500):
                moment = NEWS_START - timedelta(seconds=randomly.randrange(ITEMS * 3600))
                cursor = encode_cursor(moment.strftime("%Y-%m-%dT%H:%M:%SZ"), f"{randomly.getrandbits(128):032x}")
                send(f"/api/v1/news?limit=100&cursor={cursor}")
            # 12,000 distinct spellings of 400 answers, 4 to 8 KB each: 70 MB of query strings.
            for _ in range(12_000):
                send(f"/api/v1/news?limit={randomly.randint(1, 100)}{'&' * randomly.randint(4000, 8000)}")
            # cursors naming a made-up 5 KB item id (fits under the cap), and query strings over it
            for n in range(600):
                send(f"/api/v1/news?cursor={encode_cursor('2026-11-20T08:00:00Z', 'x' * (5_000 + n))}")
                send(f"/api/v1/stats?{'&' * (8200 + n)}")
        peak = max(peak, rss(pid))
        client.close()
    growth = peak - baseline
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(
        json.dumps(
            {
                "requests": sent,
                "statuses": statuses,
                "baseline_mib": round(baseline / MiB, 1),
                "peak_mib": round(peak / MiB, 1),
                "growth_mib": round(growth / MiB, 1),
                "budget_mib": MAX_BYTES // MiB,
            }
        )
    )
    assert statuses == {200: rounds * 13_500, 400: rounds * 600, 414: rounds * 600}, statuses
    assert growth <= MAX_BYTES + MARGIN, f"grew {growth / MiB:.0f} MiB over a budget of {MAX_BYTES / MiB:.0f} MiB"
