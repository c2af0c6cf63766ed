"""Every metric ``/metrics`` exposes, and the move of a worker's tally into the shared files.

:data:`METRICS` is the one list: the exposition is built from it, and so is the table in
docs/operating.md (``make cog``). Counters and the latency histogram live in
prometheus-client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``, one folder per
``qsite serve`` run, emptied at start: :func:`prepare_directory`); each worker adds its
:class:`~qsite.service.http.tally.Tally` to them every :data:`FLUSH_EVERY` seconds and before
it answers a scrape, so a scrape sums every worker's counts up to the last tenth of a second.
Gauges read at scrape time (:mod:`qsite.service.metrics.database`) come from the answering
worker.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Histogram

from qsite.service.compat import add_to_histogram, use_multiprocess_values
from qsite.service.http import tally
from qsite.service.http.tally import BUCKETS, EVENTS, Tally
from qsite.service.metrics.labels import Labels

#: The environment variable prometheus-client's multiprocess mode reads.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Seconds between two moves of a worker's tally into the shared files: a tenth, so that each move is
#: short (sorting a second's 33,000 cached answers at once held the event loop for 4.8 ms, and the
#: cached path's p99 with it; a tenth of them, 0.5 ms), at 10 µs a move when few came in.
FLUSH_EVERY = 0.1


@dataclass(frozen=True)
class Metric:
    """One metric family as exposed: its name (without ``_total``), type, labels and help text."""

    name: str
    kind: str  # counter, histogram, gauge, info
    labels: tuple[str, ...]
    help: str
    event: str | None = None  # the tally event it counts (service/http/tally.py), for counters


METRICS = (
    Metric("qsite_http_requests", "counter", ("endpoint", "method", "status"),
           "HTTP requests answered, by endpoint: an /api/v1 endpoint's name (api_unknown for a path it does not know), or metrics, static, datasette_sql (arbitrary SQL), datasette."),
    Metric("qsite_http_request_duration_seconds", "histogram", ("endpoint",),
           "Time from a request's arrival in the app to the end of its answer, by endpoint."),
    Metric("qsite_response_cache", "counter", ("result",),
           "Built /api/v1 responses looked up in the response cache: hit or miss (a miss builds it).", "cache"),
    Metric("qsite_response_cache_invalidations", "counter", (),
           "Response cache entries dropped because their data changed.", "cache_invalidations"),
    Metric("qsite_http_not_modified", "counter", (), "Conditional requests answered 304 Not Modified.", "not_modified"),
    Metric("qsite_http_rate_limited", "counter", ("limit",),
           "Requests answered 429, by limit: fair_use (api.rate_limit) or sql_budget (one query at a time per client).",
           "rate_limited"),
    Metric("qsite_http_refused", "counter", ("reason",),
           "Requests refused for a limit: size (request target or header fields too large) or time (SQL time limit).",
           "refused"),
    Metric("qsite_sql_interrupted", "counter", ("where",),
           "Queries interrupted at the SQL time limit: api (/api/v1's own reads) or sql (Datasette's arbitrary SQL).",
           "sql_interrupted"),
    Metric("qsite_replica_failed_swaps", "counter", (),
           "Published snapshots a replica's workers could not download or check (they keep serving the last one).",
           "failed_swaps"),
    Metric("qsite_build_info", "gauge", ("qsite", "datasette", "sqlite", "python"), "Versions serving; always 1."),
    Metric("qsite_data_version", "gauge", (), "The data version served (the sum of data_versions)."),
    Metric("qsite_data_last_ingest_success_timestamp_seconds", "gauge", (),
           "When the last ingest run that did not fail finished, of either kind (the writer's, on a replica)."),
    Metric("qsite_data_seconds_since_ingest_success", "gauge", (),
           "Seconds since then: what /api/v1/health compares with api.health_max_data_age."),
    Metric("qsite_health_max_data_age_seconds", "gauge", (), "api.health_max_data_age: the age above which health answers 503."),
    Metric("qsite_ingest_last_attempt_timestamp_seconds", "gauge", ("kind", "source"),
           "When the last ingest run of a news source (kind news) or the site export (kind site) started."),
    Metric("qsite_ingest_last_success_timestamp_seconds", "gauge", ("kind", "source"),
           "When its last run that did not fail finished."),
    Metric("qsite_ingest_last_run_items", "gauge", ("kind", "source", "outcome"),
           "Items of its last finished run, by outcome (new, updated, unchanged, skipped...)."),
    Metric("qsite_ingest_consecutive_failures", "gauge", ("kind", "source"), "Its runs failed in a row, up to now."),
    Metric("qsite_ingest_backoff_until_timestamp_seconds", "gauge", ("kind", "source"),
           "Until when a failing news source is not fetched (0: not backing off)."),
    Metric("qsite_replica_data_version", "gauge", (), "The data version of the snapshot a replica serves."),
    Metric("qsite_replica_latest_data_version", "gauge", (),
           "The data version latest.json named at the replica's last poll of the store."),
    Metric("qsite_replica_snapshot_info", "gauge", ("file", "published_at"), "The snapshot a replica serves; always 1."),
    Metric("qsite_replica_last_swap_timestamp_seconds", "gauge", (), "When the replica's worker swapped in its snapshot."),
    Metric("qsite_replica_seconds_since_swap", "gauge", (), "Seconds since then."),
)

BY_NAME = {metric.name: metric for metric in METRICS}


def prepare_directory() -> Path:
    """The folder of this server run's metric files, in :data:`MULTIPROC_ENV`, empty.

    The deployer's folder when the variable is set (its files of an earlier run removed), else a
    new temporary one (:func:`remove_directory` at the end). Set before the workers start, so
    that each counts into it.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            stale.unlink(missing_ok=True)
    else:
        folder = Path(tempfile.mkdtemp(prefix="qsite-metrics-"))
        os.environ[MULTIPROC_ENV] = str(folder)
    return folder


def remove_directory(folder: Path) -> None:
    """Remove a folder :func:`prepare_directory` made (not a deployer's own)."""
    if folder.name.startswith("qsite-metrics-"):
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(MULTIPROC_ENV, None)


class Exported:
    """The worker's prometheus-client metrics in the multiprocess files, and its tally.

    Made once per worker (after the fork); sets :data:`qsite.service.http.tally.TALLY` so that
    counting starts.
    """

    def __init__(self):
        use_multiprocess_values()  # the parent may have imported prometheus-client before the folder was set
        registry = CollectorRegistry(auto_describe=False)  # the worker's own: never the default registry
        self.requests = Counter("qsite_http_requests", BY_NAME["qsite_http_requests"].help,
                                BY_NAME["qsite_http_requests"].labels, registry=registry)
        self.latency = Histogram("qsite_http_request_duration_seconds", BY_NAME["qsite_http_request_duration_seconds"].help,
                                 ("endpoint",), buckets=BUCKETS, registry=registry)
        self.events = {
            metric.event: Counter(metric.name, metric.help, metric.labels, registry=registry)
            for metric in METRICS if metric.event
        }
        self.labels = Labels()
        self.tally = tally.TALLY = Tally()

    def flush(self) -> None:
        """Move what the tally counted since the last flush into the shared files."""
        requests, events = self.tally.take(self.labels)
        latency: dict[str, list] = {}
        for (endpoint, method, status), counts in requests.items():
            self.requests.labels(endpoint, method, str(status)).inc(sum(counts[:-1]))
            total = latency.setdefault(endpoint, [0] * len(counts))
            for i, n in enumerate(counts):
                total[i] += n
        for endpoint, counts in latency.items():
            add_to_histogram(self.latency.labels(endpoint), counts[:-1], counts[-1])
        for (event, label), n in events.items():
            counter = self.events[event]
            (counter.labels(label) if EVENTS[event] else counter).inc(n)
