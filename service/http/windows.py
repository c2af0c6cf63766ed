"""Storage of the fair-use limiter's window counts, for ``limits``' sliding window counter.

The strategy is the `limits <https://limits.readthedocs.io>`_ library's
:class:`~limits.aio.strategies.SlidingWindowCounterRateLimiter` (the weighted
count, the verdict, ``remaining`` and the reset time); this module is only
where it keeps its counts, behind ``limits``' own storage interface
(:class:`~limits.aio.storage.Storage` with
:class:`~limits.aio.storage.SlidingWindowCounterSupport`).

Promises: one storage round trip per request and no task or thread hand-off per hit, which
``limits``' own storages do not keep (its memory storage walks every key after each hit; with its
Redis storage ``hit`` and ``get_window_stats`` are two round trips; the figures are in
docs/performance.md, "Measurements behind the code"). Here a hit is one increment of the current
window's count; the previous window's count, final once its window has passed, is read once per
client and window; and ``get_sliding_window`` for a client that just hit is answered from that
hit's counts, so the headers come from the same answer as the verdict.
"""

from __future__ import annotations

import inspect
import math
import time
from abc import abstractmethod
from typing import Callable

from limits.aio.storage import SlidingWindowCounterSupport, Storage
from limits.storage import storage_from_string

#: Redis socket timeouts (seconds): a lost Redis must not hold requests up.
REDIS_TIMEOUT = 0.5


def allows(previous: int, current: int, left: float, expiry: int, limit: int) -> bool:
    """The sliding window counter's verdict: the previous window's count weighted by the share of
    it still inside the last ``expiry`` seconds (``left`` of them), plus the current one's, within ``limit``."""
    return math.floor(previous * left / expiry + current) <= limit


def stats(previous: int, current: int, left: float, expiry: int, limit: int) -> tuple[int, int]:
    """``(remaining, reset_in)`` after a hit, as ``limits``' ``get_window_stats`` gives them (its
    remaining, and its reset time less now, in whole seconds up), from the same counts.

    Written out for :meth:`MemoryCounts.hit_now`: the strategy's coroutines cost more than the rest of
    the limiter on the cached path; ``tests/test_ratelimit.py`` checks the two agree over random runs.
    """
    previous_expires_in = left if previous else 0.0
    remaining = max(0, limit - math.floor(previous * previous_expires_in / expiry + current))
    if not (previous or current):
        return remaining, 0
    previous_reset_in = previous_expires_in % (expiry / previous) if previous else math.inf
    current_reset_in = (left + expiry) % expiry if current else math.inf
    return remaining, max(0, math.ceil(min(previous_reset_in, current_reset_in)))


class WindowCounts(Storage, SlidingWindowCounterSupport):
    """Counts per key and window, with the sliding window counter's acquire and read.

    Subclasses say where a count lives (:meth:`add` and :meth:`count`, per
    key and window number; ``limits``' ``incr`` and ``get`` name the same
    counts ``<key>/<window number>``). The clients of the current window are
    kept here with their last (previous, current) counts and dropped as a
    whole when the window turns: no timer, no lock (one event loop, and no
    ``await`` between a hit's answer and its headers).
    """

    base_exceptions = Exception

    def __init_subclass__(cls, **kwargs):
        # limits wraps each storage method in an error-translating coroutine,
        # once more per class level (five deep on a subclass here, a cost on
        # every request); FairUse catches every storage error itself, so the
        # plain methods are put back.
        super().__init_subclass__(**kwargs)
        for name in ("acquire_sliding_window_entry", "get_sliding_window"):
            setattr(cls, name, inspect.unwrap(getattr(cls, name)))

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options):
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.window: int | None = None
        self.seen: dict[str, tuple[int, int]] = {}
        #: Wall-clock seconds the windows are numbered by (:attr:`qsite.service.http.ratelimit.FairUse.clock`).
        self.clock: Callable[[], float] = time.time

    @abstractmethod
    async def add(self, key: str, window: int, expiry: int, amount: int) -> int:
        """Add ``amount`` to ``key``'s count in ``window`` (kept ``expiry`` seconds); the new count."""

    @abstractmethod
    async def count(self, key: str, window: int) -> int:
        """``key``'s count in ``window``."""

    def _turn(self, now: float, expiry: int) -> int:
        """The number of the window ``now`` falls in; the clients seen are forgotten when it turns."""
        window = int(now // expiry)
        if window != self.window:
            self.window, self.seen = window, {}
        return window

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        now = self.clock()
        window = self._turn(now, expiry)
        current = await self.add(key, window, 2 * expiry, amount)
        seen = self.seen.get(key)
        previous = seen[0] if seen else await self.count(key, window - 1)
        left = (window + 1) * expiry - now
        allowed = allows(previous, current, left, expiry, limit)
        if not allowed:  # refused hits do not count
            current = await self.add(key, window, 2 * expiry, -amount)
        self.seen[key] = (previous, current)
        return allowed

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        now = self.clock()
        window = int(now // expiry)
        seen = self.seen.get(key) if window == self.window else None
        if seen:
            previous, current = seen
        else:
            previous, current = await self.count(key, window - 1), await self.count(key, window)
        left = (window + 1) * expiry - now
        return previous, (left if previous else 0.0), current, left + expiry

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        window = int(self.clock() // expiry)
        self.seen.pop(key, None)
        await self.clear(f"{key}/{window}")
        await self.clear(f"{key}/{window - 1}")

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        key, _, window = key.rpartition("/")
        return await self.add(key, int(window), expiry, amount)

    async def get(self, key: str) -> int:
        key, _, window = key.rpartition("/")
        return await self.count(key, int(window))


class MemoryCounts(WindowCounts):
    """``memory://``: this process's counts of the current and the previous window, in two dicts."""

    def __init__(self):
        super().__init__()
        self.current: dict[str, int] = {}
        self.previous: dict[str, int] = {}
        self.current_window: int | None = None
        self.lifetime = 0  # seconds a count is kept: its window and the next

    def _add(self, key: str, window: int, expiry: int, amount: int) -> int:
        if window != self.current_window:
            turned = self.current_window is not None and window == self.current_window + 1
            self.previous = self.current if turned else {}
            self.current, self.current_window, self.lifetime = {}, window, expiry
        count = self.current[key] = self.current.get(key, 0) + amount
        return count

    def _count(self, key: str, window: int) -> int:
        if window == self.current_window:
            return self.current.get(key, 0)
        if self.current_window is not None and window == self.current_window - 1:
            return self.previous.get(key, 0)
        return 0

    async def add(self, key: str, window: int, expiry: int, amount: int) -> int:
        return self._add(key, window, expiry, amount)

    async def count(self, key: str, window: int) -> int:
        return self._count(key, window)

    def _acquire(self, key: str, limit: int, expiry: int, amount: int) -> tuple[bool, int, int, float]:
        """:meth:`WindowCounts.acquire_sliding_window_entry`'s steps without an ``await`` (the counts are
        this process's): the verdict, the previous and current counts after it, and the seconds left in the window."""
        now = self.clock()
        window = self._turn(now, expiry)
        current = self._add(key, window, 2 * expiry, amount)
        seen = self.seen.get(key)
        previous = seen[0] if seen else self._count(key, window - 1)
        left = (window + 1) * expiry - now
        allowed = allows(previous, current, left, expiry, limit)
        if not allowed:  # refused hits do not count
            current = self._add(key, window, 2 * expiry, -amount)
        self.seen[key] = (previous, current)
        return allowed, previous, current, left

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self._acquire(key, limit, expiry, amount)[0]

    def hit_now(self, key: str, limit: int, expiry: int) -> tuple[bool, int, int]:
        """One hit of ``key`` and what it leaves, ``(allowed, remaining, reset_in)``, in one call.

        What ``limits``' strategy makes of :meth:`acquire_sliding_window_entry` and
        :meth:`get_sliding_window` (:func:`stats`), without its coroutines: five a request, most of
        the limiter's cost on the cached path (docs/performance.md, "Measurements behind the code").
        """
        allowed, previous, current, left = self._acquire(key, limit, expiry, 1)
        return (allowed, *stats(previous, current, left, expiry, limit))

    async def get_expiry(self, key: str) -> float:
        """When ``key``'s count is dropped: once its window and the next have passed."""
        return (int(key.rpartition("/")[2]) + 2) * self.lifetime / 2

    async def clear(self, key: str) -> None:
        key, _, window = key.rpartition("/")
        if int(window) == self.current_window:
            self.current.pop(key, None)
        else:
            self.previous.pop(key, None)

    async def check(self) -> bool:
        return True

    async def reset(self) -> int:
        count = len(self.current) + len(self.previous)
        self.current, self.previous, self.seen = {}, {}, {}
        return count


class SharedCounts(WindowCounts):
    """Counts in a ``limits`` storage shared by processes (Redis): one ``INCR`` per hit."""

    def __init__(self, storage):
        super().__init__()
        self.storage = storage

    async def add(self, key: str, window: int, expiry: int, amount: int) -> int:
        return await self.storage.incr(f"{key}/{window}", expiry, amount)

    async def count(self, key: str, window: int) -> int:
        return await self.storage.get(f"{key}/{window}")

    async def get_expiry(self, key: str) -> float:
        return await self.storage.get_expiry(key)

    async def clear(self, key: str) -> None:
        await self.storage.clear(key)

    async def check(self) -> bool:
        return await self.storage.check()

    async def reset(self) -> int | None:
        self.seen = {}
        return await self.storage.reset()


def window_counts(storage_uri: str) -> WindowCounts:
    """The counts for ``api.rate_limit_storage``: :class:`MemoryCounts` or :class:`SharedCounts`."""
    if storage_uri.startswith("memory://"):
        return MemoryCounts()
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
    return SharedCounts(storage_from_string(f"async+{storage_uri}", wrap_exceptions=True, **options))
