"""The one place the request path meets metrics and the access log: the outermost layer of a worker's app.

:func:`observed` wraps the whole app (Datasette with its middleware, the rate limiter included,
and a replica's follower), so that:

- ``GET /metrics`` is answered here, before anything else: off ``/api/v1``, never rate-limited,
  readable only from ``metrics.allow`` (the connection's own address; others get 403);
- every other request is timed and counted by endpoint, method and status, in the worker's
  :class:`~qsite.service.http.tally.Tally` (plain ints: a microsecond or so a request), with its 304,
  429 and size refusals read from the status it was answered with;
- each request gets a number (:data:`qsite.config.logs.REQUEST_ID`) that its log lines carry as its id, and, with
  ``logs.access``, one access-log line (its query's credential-like values redacted).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from time import perf_counter
from ipaddress import ip_address

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from qsite.config import Config
from qsite.config.logs import REQUEST_ID
from qsite.db.urls import redact_parameters

from qsite.service.api.routing import resolve
from qsite.service.datasette.state import instance
from qsite.service.http.problems import API_PREFIX, problem_response, send_response
from qsite.service.metrics.database import ScrapeCollector
from qsite.service.metrics.exported import FLUSH_EVERY, Exported

log = logging.getLogger("qsite.metrics")
access_log = logging.getLogger("qsite.access")

METRICS_PATH = b"/metrics"
#: The media type of the Prometheus text format prometheus-client writes.
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
#: Distinct paths whose endpoint label is remembered (the table is emptied when full).
LABELS_KEPT = 4096
#: The longest path remembered, so that the table holds at most a few hundred kilobytes.
LONGEST_KEPT = 128
#: Statuses that refuse a request for its size: target (414), header fields (431), body (413).
SIZE_STATUSES = frozenset({413, 414, 431})
_API = API_PREFIX.encode()
#: In the body of the SQL budget's 429 (its problem type), never in fair use's.
QUERY_RUNNING = b"query-running"


def endpoint_label(path: bytes, query: bytes) -> str:
    """The ``endpoint`` label of a request: an /api/v1 endpoint's name (``api_unknown`` for a path it does not
    know), else ``metrics``, ``static``, ``datasette_sql`` (arbitrary SQL) or ``datasette``: a few values, whatever clients send."""
    if path == _API or path.startswith(_API + b"/"):
        resolved = resolve(path.decode("latin-1"))
        return resolved[0].name if resolved is not None else "api_unknown"
    if path.startswith(b"/-/static"):
        return "static"
    if b"sql=" in query:
        return "datasette_sql"
    return "datasette"


class Labels:
    """:func:`endpoint_label` remembered per path (the API's ``sql=`` is never in a path)."""

    def __init__(self):
        self.known: dict[bytes, str] = {}

    def __call__(self, path: bytes, query: bytes) -> str:
        label = self.known.get(path)
        if label is None:
            label = endpoint_label(path, query)
            if label == "datasette_sql" or len(path) > LONGEST_KEPT:
                return label
            if len(self.known) >= LABELS_KEPT:
                self.known.clear()
            self.known[path] = label
        elif label == "datasette" and b"sql=" in query:
            return "datasette_sql"
        return label


class Allow:
    """Whether a client address is in ``metrics.allow``, remembered per address."""

    def __init__(self, networks):
        self.networks = tuple(networks)
        self.known: dict[str, bool] = {}

    def __call__(self, client) -> bool:
        host = client[0] if client else None
        if not host:
            return False
        allowed = self.known.get(host)
        if allowed is None:
            try:
                address = ip_address(host.partition("%")[0])
            except ValueError:
                allowed = False
            else:
                address = getattr(address, "ipv4_mapped", None) or address
                allowed = any(address in network for network in self.networks)
            if len(self.known) >= LABELS_KEPT:
                self.known.clear()
            self.known[host] = allowed
        return allowed


def observed(app, datasette, config: Config):
    """``app`` with ``/metrics``, request counting and the access log (see the module docstring);
    ``app`` unchanged but for request ids and the access log when ``metrics.enabled`` is false."""
    exported = Exported() if config.metrics.enabled else None
    labels = Labels()
    allow = Allow(config.metrics.allow)
    access = config.logs.access
    numbers = itertools.count(1)
    scrape = None
    if exported is not None:
        held = instance(datasette)

        def database():
            follower = held.follower
            if follower is None:
                return config.database_path
            serving = getattr(follower, "serving", None)
            return serving.path if serving is not None else None

        scrape = Scrape(exported, ScrapeCollector(database, lambda: held.follower, config.api.health_max_data_age))

    async def metrics_app(scope, receive, send):
        if scope["type"] != "http":
            if scope["type"] == "lifespan" and exported is not None:
                scrape.start(asyncio.get_running_loop())
            return await app(scope, receive, send)
        token = REQUEST_ID.set(next(numbers))
        try:
            if exported is None and not access:
                return await app(scope, receive, send)
            path = scope.get("raw_path") or scope["path"].encode()
            if path == METRICS_PATH and exported is not None:
                return await scrape.answer(scope, send, allow)
            started = perf_counter()
            status = 0
            budget = False

            def counting_send(message):  # not a coroutine: hands back send's own awaitable, no frame of its own
                nonlocal status, budget
                if message["type"] == "http.response.start":
                    status = message["status"]
                elif status == 429 and QUERY_RUNNING in message.get("body", b""):
                    budget = True  # the SQL budget's 429, not fair use's (both carry the RateLimit headers)
                return send(message)

            try:
                await app(scope, receive, counting_send)
            finally:
                seconds = perf_counter() - started
                status = status or 500  # an app that raised before answering: the server answers 500
                query = scope.get("query_string", b"")
                if exported is not None:
                    tally = exported.tally
                    tally.request(labels(path, query), scope["method"], status, seconds)
                    if status == 304 or status == 429 or status in SIZE_STATUSES:
                        events = tally.events
                        if status == 304:
                            events["not_modified", ""] += 1
                        elif status == 429:
                            events["rate_limited", "sql_budget" if budget else "fair_use"] += 1
                        else:
                            events["refused", "size"] += 1
                if access:
                    log_access(scope, path, query, status, seconds)
        finally:
            REQUEST_ID.reset(token)

    return metrics_app


def log_access(scope, path: bytes, query: bytes, status: int, seconds: float) -> None:
    """One access-log line: the query's credential-like values redacted, as every log line's URLs are."""
    shown_query, _ = redact_parameters(query.decode("latin-1"), "")
    target = path.decode("latin-1") + ("?" + shown_query if shown_query else "")
    client = (scope.get("client") or ("-",))[0]
    milliseconds = round(seconds * 1000, 3)
    access_log.info(
        "%s %s %d %.3f ms %s", scope["method"], target, status, milliseconds, client,
        extra={"fields": {"method": scope["method"], "target": target, "status": status,
                          "duration_ms": milliseconds, "client": client}},
    )


class Scrape:
    """A worker's side of ``/metrics``: the tally moved every second, and the exposition of all workers."""

    def __init__(self, exported: Exported, collector: ScrapeCollector):
        self.exported = exported
        self.collector = collector
        self.started = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Move the tally into the shared files every :data:`FLUSH_EVERY` seconds from now (once)."""
        if self.started:
            return
        self.started = True

        def tick():
            self.exported.flush()
            loop.call_later(FLUSH_EVERY, tick)

        loop.call_later(FLUSH_EVERY, tick)

    def render(self) -> bytes:
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry)
        registry.register(self.collector)
        return generate_latest(registry)

    async def answer(self, scope, send, allow: Allow) -> None:
        started = perf_counter()
        head = scope["method"] == "HEAD"
        if scope["method"] not in ("GET", "HEAD"):
            status, headers, body = problem_response(
                "method-not-allowed", "/metrics is read with GET", headers=[(b"allow", b"GET, HEAD")]
            )
        elif not allow(scope.get("client")):
            status, headers, body = problem_response(
                "forbidden", "/metrics is readable only from the addresses in the deployment's metrics.allow"
            )
        else:
            self.exported.flush()
            body = await asyncio.to_thread(self.render)
            status, headers = 200, [(b"content-type", CONTENT_TYPE), (b"cache-control", b"no-store")]
        await send_response(send, status, headers, body, head=head)
        self.exported.tally.request("metrics", scope["method"], status, perf_counter() - started)
