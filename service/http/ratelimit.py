"""Fair-use rate limiting: the whole instance on ``qsite serve``, /api/v1 in anyone else's Datasette.

Promises: an ASGI middleware (Datasette's ``asgi_wrapper`` hook) counts requests per client with
the `limits <https://limits.readthedocs.io>`_ sliding window counter (the current fixed window's
count plus the previous one's, weighted by its overlap with the last ``w`` seconds), in the storage
``api.rate_limit_storage`` names: ``memory://`` for one process, ``redis://...`` so that several
workers or replicas count against one limit (:mod:`qsite.service.http.windows`: one storage round trip
per request). On ``qsite serve``'s own server every HTTP request except OPTIONS and static assets
shares one budget per client; in someone else's Datasette only /api/v1 is limited.

A client is its address; IPv6 clients by their network (``api.ipv6_prefix`` bits, /64 by default),
since one subscriber holds a whole /64. Every limited response carries the ``RateLimit-Policy``
and ``RateLimit`` fields of draft-ietf-httpapi-ratelimit-headers (drafts 08 to 10)::

    RateLimit-Policy: "default";q=120;w=60
    RateLimit: "default";r=119;t=37

``q`` is the quota, ``w`` the window in seconds, ``r`` what is left, ``t`` the seconds until ``r``
grows. A request over the limit gets a 429 problem+json with ``Retry-After``; it is not counted.

Must not change: fair use never takes the service down. When the storage cannot be reached the
request is served unlimited, a warning is logged at most once a minute, and the storage is not
tried again for a few seconds, so that a dead Redis costs no latency.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
import weakref
from functools import lru_cache
from typing import Callable, NamedTuple

import limits
from datasette import hookimpl
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from qsite.config import parse_rate_limit
from qsite.service.http.forwarded import forwarded_entry
from qsite.service.http.answered import EXTRA_HEADERS, adding, answered_inside, note
from qsite.service.http.problems import problem_response, send_response
from qsite.service.http.settings import is_own_server, is_qsite_path, qsite_config
from qsite.service.http.tally import count
from qsite.service.http.windows import MemoryCounts, window_counts

log = logging.getLogger("qsite.ratelimit")

#: The name of the one quota policy, as it appears in the headers.
POLICY = "default"
_EXEMPT_PREFIXES = ("/-/static/", "/-/static-plugins/")
_EXEMPT_PATHS = frozenset({"/favicon.ico", "/robots.txt"})
#: Clients whose storage keys are kept (:func:`with_cached_keys`).
KEYS_CACHED = 4096
#: Bits of an IPv6 address that make one client (``api.ipv6_prefix``).
DEFAULT_IPV6_PREFIX = 64
#: Seconds between two warnings about an unreachable storage.
WARN_EVERY = 60.0
#: Seconds during which a storage that just failed is not asked again.
STORAGE_RETRY_AFTER = 5.0


def client_address(scope: dict, trusted_proxies: int, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """Who a request counts against.

    The socket's peer address, unless ``trusted_proxies`` proxies stand in
    front: then the ``X-Forwarded-For`` entry that many hops from the right,
    the last address a trusted proxy saw. Entries to the left of it may be
    made up by the client and are never used; with fewer entries than
    proxies the peer address is used. An IPv6 address counts as its network
    of ``ipv6_prefix`` bits (:func:`client_key`).
    """
    forwarded = forwarded_entry(scope, b"x-forwarded-for", trusted_proxies)
    if forwarded is None:
        peer = scope.get("client")
        forwarded = peer[0] if peer else "unknown"
    return client_key(forwarded, ipv6_prefix)


@lru_cache(maxsize=KEYS_CACHED)
def client_key(address: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """``address`` as fair use counts it: an IPv4 address (also IPv4-mapped IPv6) as itself, an IPv6
    address as its network of ``ipv6_prefix`` bits (``2001:db8:1:2::/64``); anything else as it is."""
    if ":" not in address:
        return address
    try:
        ip = ipaddress.IPv6Address(address.strip("[]").split("%", 1)[0])
    except ValueError:
        return address
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ipv6_prefix >= 128:
        return str(ip)
    return str(ipaddress.IPv6Network((ip, ipv6_prefix), strict=False))


def is_limited(scope: dict, whole_instance: bool = True) -> bool:
    """Whether fair use counts this request: any but OPTIONS and static assets, only /api/v1 unless ``whole_instance``."""
    if scope["type"] != "http" or scope.get("method") == "OPTIONS":
        return False
    path = scope.get("path", "")
    if not whole_instance:
        return is_qsite_path(path)
    return not (path in _EXEMPT_PATHS or path.startswith(_EXEMPT_PREFIXES))


class Verdict(NamedTuple):
    """What the limiter said of one request (a tuple: made on every request, cheaper than a frozen dataclass)."""

    allowed: bool
    remaining: int
    reset_in: int

    def headers(self, policy: bytes) -> list[tuple[bytes, bytes]]:
        return [(b"ratelimit-policy", policy), (b"ratelimit", _RATELIMIT % (self.remaining, self.reset_in))]


_RATELIMIT = f'"{POLICY}";r=%d;t=%d'.encode()


def policy_header(item: limits.RateLimitItem) -> bytes:
    return f'"{POLICY}";q={item.amount};w={item.get_expiry()}'.encode()


def with_cached_keys(item: limits.RateLimitItem) -> limits.RateLimitItem:
    """``item``, building each client's storage key once.

    ``limits``' strategy builds it on both of a request's calls (``hit`` and
    ``get_window_stats``): a fifth of the limiter's time (docs/performance.md,
    "Measurements behind the code").
    The keys are kept by client alone (not with ``functools.lru_cache``, whose
    key would hash the item too, as much again), up to :data:`KEYS_CACHED`
    clients, then dropped together.
    """
    keys: dict[tuple[str, ...], str] = {}

    class Keyed(type(item)):
        __slots__ = ()

        def key_for(self, *identifiers) -> str:
            key = keys.get(identifiers)
            if key is None:
                if len(keys) >= KEYS_CACHED:
                    keys.clear()
                key = keys[identifiers] = super().key_for(*identifiers)
            return key

    return Keyed(item.amount, item.multiples, item.namespace)


class FairUse:
    """One limit, one storage and the client rule of one Datasette instance."""

    def __init__(
        self, item: limits.RateLimitItem, storage_uri: str, trusted_proxies: int, clock: Callable[[], float] = time.time,
        ipv6_prefix: int = DEFAULT_IPV6_PREFIX,
    ):
        self.item = item
        self.policy = policy_header(item)
        self.trusted_proxies = trusted_proxies
        self.ipv6_prefix = ipv6_prefix
        self.storage_uri = storage_uri
        self.counts = window_counts(storage_uri)
        self.strategy = SlidingWindowCounterRateLimiter(self.counts)
        self.clock = clock
        self.keyed = with_cached_keys(item)
        #: The counts are this process's (``memory://``): :meth:`hit_now` answers without awaiting anything.
        self.local = isinstance(self.counts, MemoryCounts)
        self._expiry = item.get_expiry()
        self._down_until = 0.0
        self._warned_at = -math.inf

    @property
    def clock(self) -> Callable[[], float]:
        """Wall-clock seconds the windows are aligned to (so replicas sharing Redis agree); tests set their own."""
        return self.counts.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.counts.clock = clock

    def hit_now(self, client: str) -> Verdict:
        """Count one request of ``client`` in this process's counts (:attr:`local`), in one call."""
        return Verdict(*self.counts.hit_now(self.keyed.key_for(client), self.item.amount, self._expiry))

    async def hit(self, client: str) -> Verdict | None:
        """Count one request of ``client``; None when the storage cannot say. Through ``limits``' strategy:
        the path of shared counts (the middleware takes :meth:`hit_now` for this process's own)."""
        if self._down_until and time.monotonic() < self._down_until:
            return None
        try:
            # refused hits are not counted; the stats right after a hit cost no round trip
            allowed = await self.strategy.hit(self.keyed, client)
            stats = await self.strategy.get_window_stats(self.keyed, client)
            # limits adds the wait to its own time.time(): taking that away leaves the wait our clock's windows give
            reset_in = max(0, math.ceil(stats.reset_time - time.time()))
            verdict = Verdict(allowed, stats.remaining, reset_in)
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
        _FAIR_USE[datasette] = (
            FairUse(item, api.rate_limit_storage, api.trusted_proxies, ipv6_prefix=api.ipv6_prefix) if item else None
        )
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
        self.limiter: FairUse | None = None
        self.whole_instance: bool | None = None  # is_own_server, read at the first request
        self.answered_inside: bool | None = None  # answered_inside, read at the first request too

    async def __call__(self, scope, receive, send):
        if self.whole_instance is None and scope["type"] == "http":
            self.whole_instance = is_own_server(self.datasette)
            self.answered_inside = answered_inside()
        if not is_limited(scope, self.whole_instance is not False):
            return await self.app(scope, receive, send)
        limiter = self.limiter or fair_use(self.datasette)  # kept: a weak dictionary's lookup on every request
        self.limiter = limiter
        if limiter is None:
            return await self.app(scope, receive, send)
        client = client_address(scope, limiter.trusted_proxies, limiter.ipv6_prefix)
        verdict = limiter.hit_now(client) if limiter.local else await limiter.hit(client)
        if verdict is None:
            return await self.app(scope, receive, send)
        if not verdict.allowed:
            status, headers, body = too_many_requests(limiter.item, verdict)
            count("rate_limited", "fair_use")
            note(scope, status)  # for /metrics (service/http/answered.py)
            await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
            return
        extra = verdict.headers(limiter.policy)
        if self.answered_inside:  # the layer that answers adds them (service/http/answered.py)
            scope[EXTRA_HEADERS] = extra
            return await self.app(scope, receive, send)
        await self.app(scope, receive, adding(send, extra))


@hookimpl
def asgi_wrapper(datasette):
    def wrap(app):
        return RateLimitMiddleware(app, datasette)

    return wrap
