"""The gauges read when ``/metrics`` is scraped: ingest history and data version from the database,
the replica's snapshot from its follower, and the versions serving.

Read from the database itself (``ingest_runs``, ``sources``, ``data_versions``), so a writer run
from cron needs no exporter of its own: any instance serving the database, or a replica serving
its snapshot, reports the writer's history. One short read-only connection per scrape, in a
thread; a database that cannot be read leaves those gauges out (the rest is still answered).
"""

from __future__ import annotations

import json
import logging
import platform
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import datasette

from prometheus_client.core import GaugeMetricFamily

from qsite.db.model import VERSION, is_stored_time

from qsite.service.metrics.exported import BY_NAME

log = logging.getLogger("qsite.metrics")

#: ``ingest_runs`` statuses of a run that worked.
SUCCESS = ("ok", "unchanged", "warning")
#: Runs looked at, newest first, to count a source's failures in a row.
FAILURE_WINDOW = 1000


def timestamp(stored: str | None) -> float | None:
    """Unix seconds of a stored time (``2026-01-02T03:04:05Z``), or None."""
    if not stored or not is_stored_time(stored):
        return None
    return datetime.fromisoformat(stored).timestamp()


def build_info() -> dict[str, str]:
    return {
        "qsite": VERSION if isinstance(VERSION, str) else str(VERSION),
        "datasette": datasette.__version__,
        "sqlite": sqlite3.sqlite_version,
        "python": platform.python_version(),
    }


def read_ingests(path: Path) -> dict:
    """``{"version", "last_success", "sources": {(kind, source): {...}}}`` read from the database at ``path``."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1.0)
    try:
        conn.row_factory = sqlite3.Row
        version = conn.execute("SELECT COALESCE(SUM(version), 0) FROM data_versions").fetchone()[0]
        sources: dict[tuple[str, str], dict] = {}
        marks = ",".join("?" * len(SUCCESS))
        for kind, source in conn.execute("SELECT DISTINCT kind, source FROM ingest_runs ORDER BY kind, source").fetchall():
            last = conn.execute(
                "SELECT started_at FROM ingest_runs WHERE kind = ? AND source = ? ORDER BY id DESC LIMIT 1", (kind, source)
            ).fetchone()
            success = conn.execute(
                f"SELECT finished_at FROM ingest_runs WHERE kind = ? AND source = ? AND status IN ({marks}) ORDER BY id DESC LIMIT 1",
                (kind, source, *SUCCESS),
            ).fetchone()
            finished = conn.execute(
                "SELECT counts FROM ingest_runs WHERE kind = ? AND source = ? AND finished_at IS NOT NULL ORDER BY id DESC LIMIT 1",
                (kind, source),
            ).fetchone()
            failures = 0
            for (status,) in conn.execute(
                "SELECT status FROM ingest_runs WHERE kind = ? AND source = ? AND status != 'running' ORDER BY id DESC LIMIT ?",
                (kind, source, FAILURE_WINDOW),
            ):
                if status != "failed":
                    break
                failures += 1
            try:
                counts = json.loads(finished[0] or "{}") if finished else {}
            except ValueError:
                counts = {}
            sources[kind, source] = {
                "last_attempt": timestamp(last[0]) if last else None,
                "last_success": timestamp(success[0]) if success else None,
                "items": {k: v for k, v in counts.items() if isinstance(k, str) and type(v) is int} if isinstance(counts, dict) else {},
                "failures": failures,
                "backoff_until": 0.0,
            }
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sources'").fetchone():
            for row in conn.execute("SELECT name, consecutive_failures, next_fetch_at FROM sources"):
                entry = sources.setdefault(("news", row["name"]), {
                    "last_attempt": None, "last_success": None, "items": {}, "failures": 0, "backoff_until": 0.0,
                })
                entry["failures"] = row["consecutive_failures"]
                if row["consecutive_failures"]:
                    entry["backoff_until"] = timestamp(row["next_fetch_at"]) or 0.0
        successes = [entry["last_success"] for entry in sources.values() if entry["last_success"] is not None]
        return {"version": version, "last_success": max(successes) if successes else None, "sources": sources}
    finally:
        conn.close()


class ScrapeCollector:
    """A prometheus-client collector of the gauges read at scrape time (see the module docstring).

    :param database: returns the database file served now (a replica's current snapshot), or None.
    :param follower: returns the replica's follower, or None on a writer's instance.
    :param max_data_age: ``api.health_max_data_age``.
    """

    def __init__(self, database, follower, max_data_age: int):
        self.database = database
        self.follower = follower
        self.max_data_age = max_data_age
        self.info = build_info()

    def collect(self):
        def gauge(name, labels=()):
            return GaugeMetricFamily(name, BY_NAME[name].help, labels=list(labels))

        now = time.time()
        info = gauge("qsite_build_info", self.info)
        info.add_metric(list(self.info.values()), 1)
        yield info
        yield _one(gauge("qsite_health_max_data_age_seconds"), self.max_data_age)
        path = self.database()
        data = None
        if path is not None:
            try:
                data = read_ingests(Path(path))
            except sqlite3.Error as exc:
                log.warning("metrics: cannot read %s: %s", path, exc)
        if data is not None:
            yield from _ingest_families(gauge, data, now)
        follower = self.follower()
        if follower is not None:
            yield from _replica_families(gauge, follower, now)


def _one(family, value, labels=()):
    family.add_metric(list(labels), value)
    return family


def _ingest_families(gauge, data: dict, now: float):
    yield _one(gauge("qsite_data_version"), data["version"])
    if data["last_success"] is not None:
        yield _one(gauge("qsite_data_last_ingest_success_timestamp_seconds"), data["last_success"])
        yield _one(gauge("qsite_data_seconds_since_ingest_success"), max(0.0, now - data["last_success"]))
    labels = ("kind", "source")
    attempt = gauge("qsite_ingest_last_attempt_timestamp_seconds", labels)
    success = gauge("qsite_ingest_last_success_timestamp_seconds", labels)
    items = gauge("qsite_ingest_last_run_items", (*labels, "outcome"))
    failures = gauge("qsite_ingest_consecutive_failures", labels)
    backoff = gauge("qsite_ingest_backoff_until_timestamp_seconds", labels)
    for (kind, source), entry in data["sources"].items():
        if entry["last_attempt"] is not None:
            attempt.add_metric([kind, source], entry["last_attempt"])
        if entry["last_success"] is not None:
            success.add_metric([kind, source], entry["last_success"])
        for outcome, n in sorted(entry["items"].items()):
            items.add_metric([kind, source, outcome], n)
        failures.add_metric([kind, source], entry["failures"])
        backoff.add_metric([kind, source], entry["backoff_until"])
    yield from (attempt, success, items, failures, backoff)


def _replica_families(gauge, follower, now: float):
    latest = getattr(follower, "polled", None)
    if latest is not None:
        yield _one(gauge("qsite_replica_latest_data_version"), latest.data_version)
    serving = getattr(follower, "serving", None)
    if serving is None:
        return
    pointer = serving.pointer
    yield _one(gauge("qsite_replica_data_version"), pointer.data_version)
    yield _one(gauge("qsite_replica_snapshot_info", ("file", "published_at")), 1, (pointer.file, pointer.published_at))
    swapped = getattr(follower, "swapped_at", None)
    if swapped is not None:
        yield _one(gauge("qsite_replica_last_swap_timestamp_seconds"), swapped)
        yield _one(gauge("qsite_replica_seconds_since_swap"), max(0.0, now - swapped))
