"""Fair-use rate limiting for the whole Datasette instance (issue 5).

An ASGI middleware, installed through Datasette's ``asgi_wrapper`` hook, that
counts requests per client with a sliding window counter (smooth like a moving
window, but two counters per client instead of a timestamp per request): the
count of the current fixed window plus the previous window's count weighted by
how much of it still overlaps the last ``w`` seconds. The counters live in the
storage named by ``api.rate_limit_storage``: ``memory://`` for one process,
``redis://...`` (through the `limits <https://limits.readthedocs.io>`_
library's storage) so that several workers or replicas count against one limit.

One storage round trip per request (issue 15): the hit increments the current
window's counter and the answer, with the previous window's count (final once
its window has passed, so read once per client and window), gives both the
verdict and the ``RateLimit`` header values. ``limits``' own strategy classes
would need two (``hit``, then ``get_window_stats``), and its asyncio memory
storage schedules an expiry task on every hit: ``memory://`` is a pair of dicts
here instead, swapped when the window turns (README, "Performance").

What is limited: every HTTP request except OPTIONS (CORS preflight) and static
assets, so /api/v1, Datasette's JSON, CSV and ``?sql=`` pages and its HTML
pages share one budget per client. Every limited response carries the
``RateLimit-Policy`` and ``RateLimit`` fields of
draft-ietf-httpapi-ratelimit-headers (the structured-field form of drafts 08
to 10)::

    RateLimit-Policy: "default";q=120;w=60
    RateLimit: "default";r=119;t=37

``q`` is the quota, ``w`` the window in seconds, ``r`` what is left of the
quota and ``t`` the seconds until ``r`` grows again. A request over the limit
gets a 429 problem+json with ``Retry-After``; it is not counted.

Fair use must never take the service down: when the storage cannot be
reached the request is served unlimited, a warning is logged at most once a
minute, and the storage is not tried again for a few seconds so that a dead
Redis costs no latency.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from dataclasses import dataclass

import limits
from datasette import hookimpl
from limits.storage import storage_from_string

from config import parse_rate_limit
from service.http.problems import problem_response, send_response
from service.http.settings import qsite_config

log = logging.getLogger("qsite.ratelimit")

#: The name of the one quota policy, as it appears in the headers.
POLICY = "default"
_EXEMPT_PREFIXES = ("/-/static/", "/-/static-plugins/")
_EXEMPT_PATHS = frozenset({"/favicon.ico", "/robots.txt"})
#: Seconds between two warnings about an unreachable storage.
WARN_EVERY = 60.0
#: Seconds during which a storage that just failed is not asked again.
STORAGE_RETRY_AFTER = 5.0
#: Redis socket timeouts (seconds): a lost Redis must not hold requests up.
REDIS_TIMEOUT = 0.5


def client_address(scope: dict, trusted_proxies: int) -> str:
    """Who a request counts against.

    The socket's peer address, unless ``trusted_proxies`` proxies stand in
    front: then the ``X-Forwarded-For`` entry that many hops from the right,
    the last address a trusted proxy saw. Entries to the left of it may be
    made up by the client and are never used; with fewer entries than
    proxies the peer address is used.
    """
    peer = scope.get("client")
    address = peer[0] if peer else "unknown"
    if trusted_proxies > 0:
        forwarded = [
            part.strip()
            for name, value in scope.get("headers", ())
            if name == b"x-forwarded-for"
            for part in value.decode("latin-1").split(",")
        ]
        if len(forwarded) >= trusted_proxies and forwarded[-trusted_proxies]:
            address = forwarded[-trusted_proxies]
    return address


def is_limited(scope: dict) -> bool:
    if scope["type"] != "http" or scope.get("method") == "OPTIONS":
        return False
    path = scope.get("path", "")
    return not (path in _EXEMPT_PATHS or path.startswith(_EXEMPT_PREFIXES))


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    remaining: int
    reset_in: int

    def headers(self, policy: bytes) -> list[tuple[bytes, bytes]]:
        return [
            (b"ratelimit-policy", policy),
            (b"ratelimit", b'"%s";r=%d;t=%d' % (POLICY.encode(), self.remaining, self.reset_in)),
        ]


def policy_header(item: limits.RateLimitItem) -> bytes:
    return f'"{POLICY}";q={item.amount};w={item.get_expiry()}'.encode()


def judge(item: limits.RateLimitItem, previous: int, current: int, now: float, window: int) -> Verdict:
    """The verdict on a hit that made the current window's count ``current``.

    The weighted count is ``previous`` times the share of the previous window
    still inside the last ``w`` seconds, plus ``current``. ``reset_in`` is when
    ``r`` next grows: when the weighted previous count drops by one, or when
    the window turns (as ``limits``' ``get_window_stats`` reckons it).
    """
    expiry = item.get_expiry()
    left = (window + 1) * expiry - now
    weighted = math.floor(previous * left / expiry + current)
    allowed = weighted <= item.amount
    reset_in = left % (expiry / previous) if previous else left
    return Verdict(allowed, max(0, item.amount - weighted), max(0, math.ceil(reset_in)))


class MemoryWindows:
    """Per-client counts of the current and the previous window, in this process's memory.

    Old windows are dropped as a whole when the window turns, so memory holds
    the clients of two windows at most, with no timer and no lock (one event
    loop, and no ``await`` between reading and writing a count).
    """

    def __init__(self):
        self.window = None
        self.current: dict[str, int] = {}
        self.previous: dict[str, int] = {}

    def _turn(self, window: int) -> None:
        self.previous = self.current if self.window == window - 1 else {}
        self.current = {}
        self.window = window

    async def add(self, client: str, window: int, amount: int = 1) -> tuple[int, int]:
        """Add ``amount`` to ``client``'s count in ``window``; returns (previous, current) counts."""
        if window != self.window:
            self._turn(window)
        current = self.current.get(client, 0) + amount
        self.current[client] = current
        return self.previous.get(client, 0), current


class StorageWindows:
    """The same counts in a `limits` storage shared by processes (Redis): one ``INCR`` per hit.

    The previous window's count no longer changes once its window has passed,
    so it is read once per client and window and kept here (for the clients of
    the current window only).
    """

    def __init__(self, storage, expiry: int):
        self.storage = storage
        self.expiry = expiry
        self.window = None
        self.previous: dict[str, int] = {}

    async def add(self, client: str, window: int, amount: int = 1) -> tuple[int, int]:
        if window != self.window:
            self.window, self.previous = window, {}
        current = await self.storage.incr(f"qsite/{self.expiry}/{client}/{window}", 2 * self.expiry, amount)
        previous = self.previous.get(client)
        if previous is None:
            previous = self.previous[client] = await self.storage.get(f"qsite/{self.expiry}/{client}/{window - 1}")
        return previous, current


def make_windows(storage_uri: str, expiry: int):
    """The counts for ``api.rate_limit_storage``: :class:`MemoryWindows` or :class:`StorageWindows`."""
    if storage_uri.startswith("memory://"):
        return MemoryWindows()
    options = {}
    if storage_uri.startswith(("redis", "rediss")):
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # redis-py's default retries with backoff would stall each request
        # for seconds while Redis is down; fail fast and serve instead.
        options = {
            "implementation": "redispy",
            "socket_connect_timeout": REDIS_TIMEOUT,
            "socket_timeout": REDIS_TIMEOUT,
            "retry": Retry(NoBackoff(), 0),
        }
    return StorageWindows(storage_from_string(f"async+{storage_uri}", wrap_exceptions=True, **options), expiry)


class FairUse:
    """One limit, one storage and the client rule of one Datasette instance."""

    def __init__(self, item: limits.RateLimitItem, storage_uri: str, trusted_proxies: int):
        self.item = item
        self.policy = policy_header(item)
        self.expiry = item.get_expiry()
        self.trusted_proxies = trusted_proxies
        self.storage_uri = storage_uri
        self.windows = make_windows(storage_uri, self.expiry)
        self._down_until = 0.0
        self._warned_at = -math.inf

    async def hit(self, client: str) -> Verdict | None:
        """Count one request of ``client``; None when the storage cannot say."""
        if self._down_until and time.monotonic() < self._down_until:
            return None
        now = time.time()
        window = int(now // self.expiry)
        try:
            previous, current = await self.windows.add(client, window)
            verdict = judge(self.item, previous, current, now, window)
            if not verdict.allowed:  # refused requests do not count
                await self.windows.add(client, window, -1)
        except Exception as exc:  # any storage failure: serve rather than refuse
            self._storage_failed(exc)
            return None
        return verdict

    def _storage_failed(self, exc: Exception) -> None:
        now = time.monotonic()
        self._down_until = now + STORAGE_RETRY_AFTER
        if now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning(
                "rate limit storage %s unreachable, serving without limits: %s",
                _redact(self.storage_uri),
                exc,
            )


def _redact(uri: str) -> str:
    """The storage URI without a password, for logs."""
    scheme, sep, rest = uri.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


#: Each Datasette instance's :class:`FairUse` (or None), kept as long as the instance lives.
_FAIR_USE: "weakref.WeakKeyDictionary[object, FairUse | None]" = weakref.WeakKeyDictionary()


def fair_use(datasette) -> FairUse | None:
    """The instance's :class:`FairUse`, made on first use (inside the event loop,
    where the async storage belongs); None when ``api.rate_limit`` is ``off``."""
    if datasette not in _FAIR_USE:
        api = qsite_config(datasette).api
        item = parse_rate_limit(api.rate_limit)
        _FAIR_USE[datasette] = FairUse(item, api.rate_limit_storage, api.trusted_proxies) if item else None
    return _FAIR_USE[datasette]


def too_many_requests(item: limits.RateLimitItem, verdict: Verdict) -> tuple[int, list, bytes]:
    """Status, headers and body of the 429 problem response."""
    retry_after = max(1, verdict.reset_in)
    detail = (
        f"Fair use allows {item.amount} requests per {item.get_expiry()} seconds"
        f" from one client; retry after {retry_after} seconds."
    )
    headers = [(b"retry-after", str(retry_after).encode()), *verdict.headers(policy_header(item))]
    return problem_response("rate-limited", detail, headers=headers)


class RateLimitMiddleware:
    """ASGI middleware applying :func:`fair_use` to every limited request."""

    def __init__(self, app, datasette):
        self.app = app
        self.datasette = datasette

    async def __call__(self, scope, receive, send):
        if not is_limited(scope):
            return await self.app(scope, receive, send)
        limiter = fair_use(self.datasette)
        verdict = await limiter.hit(client_address(scope, limiter.trusted_proxies)) if limiter else None
        if verdict is None:
            return await self.app(scope, receive, send)
        if not verdict.allowed:
            status, headers, body = too_many_requests(limiter.item, verdict)
            await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
            return
        extra = verdict.headers(limiter.policy)

        def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            return send(message)

        await self.app(scope, receive, send_with_headers)


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        return RateLimitMiddleware(app, datasette)

    return wrap
