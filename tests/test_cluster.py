"""The topology, run here: a writer publishing snapshots, two following replicas, Redis, nginx with a cache.

``deploy/cluster.py`` (also ``make cluster``) starts real processes on loopback:
SeaweedFS's S3 server (or a folder store), ``qsite schedule`` publishing after
every ingest that changed data, two ``qsite serve --follow`` replicas,
``redis-server`` and nginx with ``proxy_cache``. A bounded load loop runs through
nginx while the writer publishes at least three times and one replica is killed
and restarted; every response must succeed and come from exactly one published
snapshot, and both replicas must end on the last one. The figures it measures
(swap time, download time, requests served) are printed for docs/deploy.md.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest

from qsite.config import load_config
from qsite.db.snapshot import NAME_PATTERN
from qsite.db.snapshot_store import SnapshotStore
from tests.support.feeds import growing_feed
from tests.support.processes import qsite_serve, stop, wait_until

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("qsite_cluster", ROOT / "deploy" / "cluster.py")
cluster_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cluster_module)

#: What the load loop asks for, round-robin.
PATHS = ("/api/v1/stats", "/api/v1/news?limit=3", "/api/v1/snapshot", "/api/v1/courses")
#: Publishes that must happen while the load runs.
PUBLISHES = 3
MAX_REQUESTS_PER_WORKER = 20_000
#: Answers the load loop must get in a phase (one replica down; the final data) before the test moves on.
ANSWERS_BETWEEN = 40


def log_tails(cluster, lines: int = 12) -> dict[str, list[str]]:
    """The last ``lines`` lines each of the cluster's processes logged, for a failure's message."""
    return {name: path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            for name, path in cluster.logs.items() if path.exists()}


class LoadLoop:
    """Two client threads sending GETs through nginx until stopped (bounded in count and time)."""

    def __init__(self, base: str, seconds: float = 75):
        self.base = base
        self.deadline = time.monotonic() + seconds
        self.done = threading.Event()
        self.responses: list[tuple[str, int, bytes, float]] = []
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._work, args=(n,), daemon=True) for n in range(2)]

    def _work(self, offset: int) -> None:
        with httpx.Client(timeout=10) as client:
            for n in range(MAX_REQUESTS_PER_WORKER):
                if self.done.is_set() or time.monotonic() > self.deadline:
                    return
                path = PATHS[(n + offset) % len(PATHS)]
                try:
                    response = client.get(self.base + path)
                except httpx.HTTPError as exc:
                    self.failures.append(f"{path}: {exc!r}")
                    continue
                self.responses.append((path, response.status_code, response.content, time.monotonic()))

    def __enter__(self) -> "LoadLoop":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(30)


def snapshot_facts(path: Path) -> dict:
    """What each endpoint must show when built from this snapshot file."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    try:
        changed = dict(conn.execute("select dataset, changed_at from data_versions"))
        ids = [row[0] for row in conn.execute("select id from news order by published_at desc, id desc limit 3")]
        count = conn.execute("select count(*) from news").fetchone()[0]
    finally:
        conn.close()
    return {
        # the first snapshot (site export only) has no news yet
        "stats": (count, max(changed["totals"], changed.get("news", ""))),
        "news": (count, changed.get("news"), tuple(ids)),
    }


def published_snapshots(store: SnapshotStore, folder: Path) -> dict[str, dict]:
    """Every snapshot in the store (keep is large, so none was pruned), downloaded and described."""
    facts = {}
    for name in store.snapshots():
        local = folder / name
        with open(local, "wb") as out:
            for chunk in store.stream(name):
                out.write(chunk)
        facts[name] = snapshot_facts(local)
    return facts


def snapshot_of(replica: str) -> str | None:
    try:
        response = httpx.get(replica + "/api/v1/snapshot", timeout=5)
    except httpx.HTTPError:
        return None
    return response.json()["file"] if response.status_code == 200 else None


def log_figures(logs: list[Path]) -> dict:
    """Swap and download times from the replicas' ``serving ...`` log lines."""
    line = re.compile(r"serving \S+ \(data version \d+, (\d+) bytes\): downloaded in ([\d.]+) s, checked in ([\d.]+) s, swapped in ([\d.]+) ms")
    swaps = [match.groups() for log in logs for match in line.finditer(log.read_text())]
    downloads = [(int(size), float(seconds)) for size, seconds, _, _ in swaps if float(seconds) > 0]
    return {
        "swaps": len(swaps),
        "swap_ms_max": max(float(ms) for *_, ms in swaps),
        "check_s_max": max(float(check) for _, _, check, _ in swaps),
        "download_s_per_mb": (sum(s for _, s in downloads) / (sum(b for b, _ in downloads) / 1e6)) if downloads else None,
        "snapshot_bytes": max(int(size) for size, *_ in swaps),
    }


pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.requires("nginx", "redis-server")]


@pytest.mark.parametrize("store_kind", [pytest.param("s3", marks=pytest.mark.requires("weed")), "folder"])
def test_replicas_follow_published_snapshots_through_nginx_without_a_failed_request(store_kind, tmp_path, http_server, monkeypatch):
    for key, value in cluster_module.S3_ENV.items():
        monkeypatch.setenv(key, value)
    http_server.routes["/feed.xml"] = growing_feed("Lab", step=2)
    news = {"every": "2s", "sources": [{"name": "Lab", "url": http_server.url("/feed.xml"), "tag": "Science"}]}
    cluster = cluster_module.Cluster(tmp_path / "cluster", store=store_kind, config={"news": news})
    with cluster:
        config = load_config(cluster.config)
        store = SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
        replicas = [cluster.replica_url(n) for n in range(2)]
        has_news = lambda replica: httpx.get(replica + "/api/v1/news", timeout=5).status_code == 200  # noqa: E731
        assert wait_until(lambda: all(snapshot_of(replica) and has_news(replica) for replica in replicas), 60), "no snapshot served"

        def pointer_version() -> int:
            pointer = store.read_pointer()
            return pointer.data_version if pointer else 0

        start_version = pointer_version()
        with LoadLoop(cluster.url) as load:
            assert wait_until(lambda: pointer_version() > start_version, 30), "the writer did not publish"
            cluster.kill_replica(1)
            moments = {"replica 1 killed": time.monotonic()}
            # the load goes on with one replica: wait for it to get answers meanwhile (nginx retries the dead one's share)
            after_kill = len(load.responses)
            assert wait_until(lambda: len(load.responses) >= after_kill + ANSWERS_BETWEEN, 30), "no answers with one replica"
            cluster.start_replica(1)
            moments["replica 1 listening again"] = time.monotonic()
            versions = {start_version}

            def enough_publishes() -> bool:
                versions.add(pointer_version())
                return len(versions) > PUBLISHES

            assert wait_until(enough_publishes, 60), f"fewer than {PUBLISHES} publishes during the load: {versions}"
            assert stop(cluster.processes["writer"]) == 0
            final = store.read_pointer()
            started = time.monotonic()
            converged = wait_until(lambda: all(snapshot_of(replica) == final.file for replica in replicas), 60, interval=0.1)
            lag = time.monotonic() - started
            assert converged, [snapshot_of(replica) for replica in replicas]
            # requests on the final data, through the cache's revalidation: until nginx hands out the final snapshot
            after_final = len(load.responses)

            def final_through_nginx() -> bool:
                later = load.responses[after_final:]
                return len(later) >= ANSWERS_BETWEEN and any(
                    path == "/api/v1/snapshot" and status == 200 and json.loads(body)["file"] == final.file
                    for path, status, body, _ in later
                )

            assert wait_until(final_through_nginx, 30), "nginx never answered with the final snapshot"
        assert load.failures == []
        facts = published_snapshots(store, tmp_path)
        assert final.file in facts and len(facts) > PUBLISHES
        seen_snapshots = set()
        for path, status, body, at in load.responses:
            # what a failure here needs to be understood: when it came, and what the processes logged
            assert status == 200, (path, status, body[:300], {name: round(at - moment, 2) for name, moment in moments.items()},
                                   log_tails(cluster))
            document = json.loads(body)
            if path == "/api/v1/stats":
                matches = [name for name, fact in facts.items() if fact["stats"] == (document["news_items"], document["updated_at"])]
            elif path.startswith("/api/v1/news"):
                shown = (document["count"], document["updated_at"], tuple(item["id"] for item in document["results"]))
                matches = [name for name, fact in facts.items() if fact["news"] == shown]
            elif path == "/api/v1/snapshot":
                matches = [document["file"]] if document["file"] in facts else []
            else:
                matches = list(facts) if document["count"] == 6 else []
            assert matches, f"{path} answered from no published snapshot: {body[:300]}"
            seen_snapshots.update(matches if len(matches) == 1 else ())
        # The load really spanned the publishes: it was answered from the data of before them and from the final
        # data. Not from each one between: through nginx's cache a snapshot followed within a second by the next
        # may answer none of the load's requests (a CI run's load was answered from versions 5, 7 and 8, not 6).
        seen_versions = {int(NAME_PATTERN.match(name).group(1)) for name in seen_snapshots}
        assert final.file in seen_snapshots and min(seen_versions) <= start_version, (start_version, seen_snapshots)

        # Same snapshot, same validators on every replica: a CDN may revalidate against either.
        answers = [httpx.get(replica + "/api/v1/stats") for replica in replicas]
        assert answers[0].headers["etag"] == answers[1].headers["etag"]
        assert answers[0].headers["last-modified"] == answers[1].headers["last-modified"]
        again = httpx.get(replicas[1] + "/api/v1/stats", headers={"If-None-Match": answers[0].headers["etag"]})
        assert again.status_code == 304
        # One fair-use budget in Redis for both replicas: what one replica counts, the other sees. Ten
        # requests, not one: the sliding window's weighted count of the last window falls by one now
        # and then between two requests (a floor of a count times a fraction that shrinks), which
        # made one request to each replica look unshared once.
        def left(replica: str) -> int:
            return int(re.search(r"r=(\d+)", httpx.get(replica + "/api/v1/courses").headers["ratelimit"]).group(1))

        before = left(replicas[0])
        for _ in range(10):
            left(replicas[1])
        assert before - left(replicas[0]) >= 10
        if store_kind == "s3":
            # A store that refuses the credentials: never a crash, 503 with Retry-After, one clear line.
            refused = {"AWS_SECRET_ACCESS_KEY": "not-the-secret"}
            args = ["--follow", "--data-dir", str(tmp_path / "refused"), "--workers", "1"]  # each worker logs its own line
            with qsite_serve(cluster.config, tmp_path / "refused.log", refused, args=args) as replica:
                assert wait_until(lambda: "cannot read latest.json" in replica.log.read_text(), 30)
                response = httpx.get(replica.url("/api/v1/stats"))
                assert response.status_code == 503 and response.headers["retry-after"] == "1"
                lines = [line for line in replica.log.read_text().splitlines() if "cannot read latest.json" in line]
                assert len(lines) == 1 and "privileges" in lines[0] and lines[0].endswith("still serving nothing yet (503)"), lines
        figures = {
            **log_figures([cluster.logs["replica-0"], cluster.logs["replica-1"]]),
            "store": store_kind,
            "requests": len(load.responses),
            "load_s": round(load.responses[-1][3] - load.responses[0][3], 1),
            "publishes_during_load": len(seen_snapshots),
            "both_replicas_on_final_after_s": round(lag, 2),
            "poll_s": 1,
        }
        print("cluster figures:", json.dumps(figures))
