"""``data_versions``: which datasets changed, read cheaply and often.

The pipeline bumps a dataset's row in ``data_versions`` in the same
transaction as every change to its data. :class:`DataVersions` re-reads that
small table (four rows) when half an interval has passed since its last read,
and says which datasets changed since then; the response cache
(:mod:`qsite.service.api.response_cache`) drops what was built from them, and serves
a built answer only while the last read is less than an interval old.

The read runs like every other API read (:meth:`qsite.service.api.reader.Reader.inline`):
on the event loop's own connection, where it takes a few tens of microseconds
and never waits behind a slow build on the threads; it goes to the API's
threads only when it would wait for a lock or run past the inline budget. A
request that finds the versions recent does not wait for the re-read at all
(:meth:`qsite.service.datasette.handler.Api.fast` starts it as a task of its own).
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import time
from typing import Awaitable, Callable

#: How often (seconds) a process looks at ``data_versions``; well inside the 2 s promise.
CHECK_INTERVAL = 0.5

VERSIONS_SQL = "select dataset, version, changed_at from data_versions"

#: ``{dataset: (version, changed_at)}``
Versions = dict[str, tuple[int, str]]


def read_versions(conn: sqlite3.Connection) -> Versions:
    """The ``data_versions`` table; empty when it does not exist yet."""
    try:
        rows = conn.execute(VERSIONS_SQL).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    return {dataset: (version, changed_at) for dataset, version, changed_at in rows}


#: What :meth:`DataVersions.standing` says: read lately; read lately and the next read due; not lately.
FRESH, DUE, STALE = range(3)


class DataVersions:
    """The current ``data_versions``, re-read at most every ``interval`` seconds.

    :param run: runs a sync ``fn(conn)`` on a read connection and returns its
        result: :meth:`qsite.service.api.reader.Reader.inline`, the API's own
        connection on the event loop (see the module docstring). In WAL mode
        the read never waits for the pipeline's writes. A read that fails
        (interrupted, or the file unreadable) changes nothing: the versions
        are not fresh, and the next request reads again.
    """

    def __init__(self, run: Callable[[Callable], Awaitable], interval: float = CHECK_INTERVAL):
        self.run = run
        self.interval = interval
        self.current: Versions = {}
        #: ``time.monotonic()`` when the last successful read started.
        self.checked_at = -math.inf
        self._lock: asyncio.Lock | None = None

    def fresh(self) -> bool:
        """Whether :attr:`current` was read within the last ``interval``: what a built answer may be served on."""
        return self.standing() != STALE

    def due(self) -> bool:
        """Whether the next read is due (half an interval on), so that :meth:`fresh` stays true under traffic."""
        return self.standing() != FRESH

    def standing(self) -> int:
        """:data:`FRESH`, :data:`DUE` (:meth:`fresh` and :meth:`due`) or :data:`STALE` (not :meth:`fresh`),
        from one look at the clock: what the cached path asks on every request."""
        age = time.monotonic() - self.checked_at  # seconds since the last successful read began
        if age < self.interval / 2:
            return FRESH
        return DUE if age < self.interval else STALE

    async def poll(self, force: bool = False) -> set[str]:
        """Re-read if due (or ``force``); return the datasets that changed since last time.

        One read at a time: callers that arrive during a read wait for it and
        then find it recent.
        """
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not force and not self.due():
                return set()
            started = time.monotonic()
            try:
                fresh = await self.run(read_versions)
            except sqlite3.Error:
                return set()  # not fresh: the next request tries again
            self.checked_at = started
            return self.update(fresh)

    def update(self, fresh: Versions) -> set[str]:
        changed = {name for name in fresh.keys() | self.current.keys() if fresh.get(name) != self.current.get(name)}
        self.current = fresh
        return changed


def updated_at(versions: Versions, datasets: tuple[str, ...]) -> str:
    """When the newest of ``datasets`` last changed (the ``updated_at`` and Last-Modified of a response)."""
    return max(versions[name][1] for name in datasets if name in versions)
