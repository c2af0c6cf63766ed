"""The API's own read-only connections and threads, apart from Datasette's.

Datasette runs every query (its table pages, ``?sql=`` from anyone) on one
shared pool of ``num_sql_threads`` threads (3 by default), each query allowed
``sql_time_limit_ms``. Had /api/v1 used that pool, a few heavy ``?sql=``
queries would make every API request wait for a free thread. :class:`Reader`
gives the API threads of its own, each with its own read-only connection to
the database file: API queries wait only for each other, and those are small
canned queries with bound parameters.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

#: Threads of the API's own pool; two keep one slow build from holding up the next.
THREADS = 2
#: Seconds a read waits on a lock (in WAL mode readers only wait while a checkpoint
#: resets the log, or the file is being replaced).
BUSY_TIMEOUT = 1.0


def connect_read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to the database file at ``path`` (``mode=ro``: it can never write).

    In autocommit mode (``isolation_level=None``): callers begin the read
    transaction they need themselves.
    """
    return sqlite3.connect(
        f"{Path(path).resolve().as_uri()}?mode=ro",
        uri=True,
        check_same_thread=False,
        isolation_level=None,
        timeout=BUSY_TIMEOUT,
    )


class Reader:
    """Runs ``fn(conn)`` on one of the API's own threads, each with its own read-only connection.

    :param path: the database file.
    :param threads: how many threads (and so connections) at most.
    """

    def __init__(self, path: str | Path, threads: int = THREADS):
        self.path = path
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="qsite-api")
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []

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

    def close(self) -> None:
        """No more reads: the threads end, and every connection is closed (the file may then go)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        for conn in self._opened:
            conn.close()
        self._opened.clear()
