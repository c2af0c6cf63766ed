"""The API's own read-only connections and threads, apart from Datasette's.

Datasette runs every query (its table pages, ``?sql=`` from anyone) on one
shared pool of ``num_sql_threads`` threads (3 by default), each query allowed
``sql_time_limit_ms``. Had /api/v1 used that pool, a few heavy ``?sql=``
queries would make every API request wait for a free thread. :class:`Reader`
gives the API threads of its own, each with its own read-only connection to
the database file: API queries wait only for each other.

Most API queries need no thread at all (:meth:`Reader.inline`): each reads
only the rows it answers with, through an index (``metadata.yml``;
``tests/test_query_plans.py`` checks every plan and that the work does not
grow with the table), well under a millisecond at a million news items.
Handing such a query to a thread and back cost more than the query (the
thread's wake-up and the GIL passed back and forth: a quarter of an uncached
request's time, and the tail of its latency under load), so they run on a
connection of the event loop's own. It never waits: a read that would wait
for a lock (in WAL mode, only while a checkpoint resets the log or the file
is replaced) goes to the threads instead, and one that runs past the time
limit is interrupted. A news search too: it reads its page from
``news_search`` and stops (its median 0.3 ms, its 99th percentile 1.4 ms at
a million items). On the threads, its GIL hand-offs with a busy event loop
had put a search's p99 under load at 80 ms; inline, 45.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

#: Threads of the API's own pool; two keep one slow build from holding up the next.
THREADS = 2
#: Seconds a read waits on a lock (in WAL mode readers only wait while a checkpoint
#: resets the log, or the file is being replaced).
BUSY_TIMEOUT = 1.0
#: How many SQLite virtual machine steps an inline read runs between two looks at the clock.
PROGRESS_STEPS = 10_000


def connect_read_only(path: str | Path, timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """A read-only connection to the database file at ``path`` (``mode=ro``: it can never write).

    In autocommit mode (``isolation_level=None``): callers begin the read
    transaction they need themselves.
    """
    return sqlite3.connect(
        f"{Path(path).resolve().as_uri()}?mode=ro",
        uri=True,
        check_same_thread=False,
        isolation_level=None,
        timeout=timeout,
    )


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


class Reader:
    """Runs ``fn(conn)`` on one of the API's own threads, each with its own read-only connection.

    :param path: the database file.
    :param threads: how many threads (and so connections) at most.
    :param time_limit_ms: the longest an :meth:`inline` read may run.
    """

    def __init__(self, path: str | Path, threads: int = THREADS, time_limit_ms: int = 1000):
        self.path = path
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="qsite-api")
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self.time_limit = time_limit_ms / 1000
        self._inline: sqlite3.Connection | None = None
        self._deadline = math.inf

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect_read_only(self.path)
            self._opened.append(conn)
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._connection()
        try:
            return fn(conn)
        except sqlite3.Error:
            # The file may have been replaced or the connection left unusable:
            # the next call on this thread opens a new one.
            self._local.conn = None
            if conn in self._opened:
                self._opened.remove(conn)
            conn.close()
            raise

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on a thread of the pool; its result, or its exception raised here."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._call, fn)

    async def inline(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` here and now, on the event loop's own connection (see the module docstring).

        When it would wait for a lock, :meth:`run` instead; past the time limit,
        ``sqlite3.OperationalError`` (interrupted).
        """
        if self._inline is None:
            self._inline = connect_read_only(self.path, timeout=0)
            self._inline.set_progress_handler(self._over_time, PROGRESS_STEPS)
        conn = self._inline
        self._deadline = time.monotonic() + self.time_limit
        try:
            return fn(conn)
        except sqlite3.Error as exc:
            self._inline = None  # replaced file, unusable connection: open afresh next time
            conn.close()
            if _is_busy(exc):
                return await self.run(fn)
            raise
        finally:
            self._deadline = math.inf

    def _over_time(self) -> int:
        return time.monotonic() > self._deadline

    def close(self) -> None:
        """No more reads: the threads end, and every connection is closed (the file may then go)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        for conn in self._opened:
            conn.close()
        self._opened.clear()
        if self._inline is not None:
            self._inline.close()
            self._inline = None
