"""The one place the request path meets metrics and the access log: the outermost layer of a worker's app.

:func:`observed` wraps the whole app (Datasette with its middleware, the rate limiter included,
and a replica's follower), so that:

- ``GET /metrics`` is answered here, before anything else: off ``/api/v1``, never rate-limited,
  readable only from ``metrics.allow`` (the connection's own address; others get 403);
- every other request is timed, and noted with its status in the worker's
  :class:`~qsite.service.http.tally.Tally` (one tuple: a fraction of a microsecond), which sorts
  them by endpoint, method, status and latency ten times a second; the status of an /api/v1 request is
  noted by the qsite layer that answers it (:mod:`qsite.service.http.answered`: no ``send``
  wrapper on the cached path), any other's is read from ``send``;
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

from qsite.service.datasette.state import instance
from qsite.service.http.answered import ANSWERED, NOT_ANSWERED, only_qsite_wrappers, status_of
from qsite.service.http.problems import API_PREFIX, problem_response, send_response
from qsite.service.metrics.database import ScrapeCollector
from qsite.service.metrics.exported import FLUSH_EVERY, Exported
from qsite.service.metrics.labels import METRICS_PATH

log = logging.getLogger("qsite.metrics")
access_log = logging.getLogger("qsite.access")

#: The media type of the Prometheus text format prometheus-client writes.
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
_API_PATHS = API_PREFIX.encode() + b"/"
#: Client addresses whose ``metrics.allow`` verdict is remembered (the table is emptied when full).
ADDRESSES_KEPT = 4096


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
            if len(self.known) >= ADDRESSES_KEPT:
                self.known.clear()
            self.known[host] = allowed
        return allowed


def observed(app, datasette, config: Config):
    """``app`` with ``/metrics``, request counting and the access log (see the module docstring);
    ``app`` unchanged but for request ids and the access log when ``metrics.enabled`` is false."""
    exported = Exported() if config.metrics.enabled else None
    record = exported.tally.answers.append if exported is not None else None
    allow = Allow(config.metrics.allow)
    access = config.logs.access
    numbers = itertools.count(1)
    reporting = only_qsite_wrappers()
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
            if record is None and not access:
                return await app(scope, receive, send)
            path = scope.get("raw_path") or scope["path"].encode()
            if reporting and path.startswith(_API_PATHS):
                # The cached path, kept to the fewest steps: the qsite layer that answers writes the
                # status into the scope (service/http/answered.py); the query names no API endpoint.
                answered = scope[ANSWERED] = [NOT_ANSWERED]
                started = perf_counter()
                try:
                    await app(scope, receive, send)
                finally:
                    seconds = perf_counter() - started
                    if record is not None:  # sorted into endpoints and buckets every FLUSH_EVERY (Tally.take)
                        record((path, b"", scope["method"], answered[0], seconds))
                    if access:
                        log_access(scope, path, scope.get("query_string", b""), answered[0], seconds)
                return
            if path == METRICS_PATH and exported is not None:
                return await scrape.answer(scope, send, allow)
            status = NOT_ANSWERED
            started = perf_counter()
            try:
                status = await status_of(app, scope, receive, send)
            finally:
                seconds = perf_counter() - started
                query = scope.get("query_string", b"")
                if record is not None:
                    record((path, query, scope["method"], status, seconds))
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
    """A worker's side of ``/metrics``: the tally moved every :data:`FLUSH_EVERY`, and the exposition of all workers."""

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
        self.exported.tally.answers.append((METRICS_PATH, b"", scope["method"], status, perf_counter() - started))
