"""The API's own read-only connections and threads, apart from Datasette's.

Promises: an API read never waits for Datasette's shared pool (``?sql=`` from anyone), and
never holds the event loop long. :class:`Reader` runs a read on a connection of the event
loop's own (:meth:`Reader.inline`) when it can, and on threads of its own, each with its own
read-only connection, when it cannot:

- a read that would wait for a lock goes to the threads at once;
- a read still running after :data:`INLINE_BUDGET_MS` is interrupted and run again from the
  start on the threads, so a search crafted to be slow holds the loop no longer than that;
- every read, inline or on a thread, is interrupted at ``api.sql_time_limit_ms`` from its
  start (a progress handler, every :data:`PROGRESS_STEPS` steps);
- a connection whose read failed is closed, and the next read opens another; so is one whose
  read was interrupted while its rows were fetched (Python 3.11 kept such a statement marked
  running in its cache), but not one interrupted in the statement's first step, which every
  canned query spends its time in (:meth:`ReadConnection.execute`).

Relies on every canned query reading only the rows it answers with, through an index
(``tests/test_query_plans.py``), which is what makes running them inline safe. In WAL mode
the inline connection keeps one read transaction for at most :data:`HOLD` seconds; readers
never block the writer, every read sees one snapshot throughout, and the ``data_versions``
poll (:meth:`Reader.fresh`) starts its own transaction, so the builds after it see what it
found changed. What must not change: a read moved to a thread keeps its start time, and
is redone from its start. Figures: docs/performance.md, "Figures behind the API's limits".
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

from qsite.service.http.tally import count

T = TypeVar("T")

#: Threads of the API's own pool; two keep one slow build from holding up the next.
THREADS = 2
#: Seconds a read waits on a lock (in WAL mode readers only wait while a checkpoint
#: resets the log, or the file is being replaced).
BUSY_TIMEOUT = 1.0
#: The longest an inline read holds the event loop before it is moved to a thread: over ten
#: times a search's 99th percentile at a million items, well inside the 50 ms other requests
#: may be kept waiting by it.
INLINE_BUDGET_MS = 20
#: Seconds the event loop's connection keeps one read transaction (WAL only) for the reads that
#: follow: a tenth of the data_versions poll's interval, so what a build sees is at most that much
#: older than a new transaction would be. What it saves is starting one per request (at 2,000
#: uncached requests a second, 50 ms is a hundred of them); a longer hold would save little more.
HOLD = 0.05
#: How many SQLite virtual machine steps a read runs between two looks at the clock:
#: at 1,000 the look costs about 1% of a typical read (10,000 made no difference),
#: and a full-text search, whose steps are long, is stopped within about 6 ms of its deadline.
PROGRESS_STEPS = 1_000


class ReadConnection(sqlite3.Connection):
    """A connection of :func:`connect_read_only`, with a place for what one held read transaction read once.

    :attr:`kept` is emptied whenever the :class:`Reader` begins the read
    transaction it holds (:data:`HOLD`): what a build keeps there holds
    for every build in that snapshot, the ``data_versions`` seen by the first
    one (:func:`qsite.service.datasette.handler.in_snapshot`) so far.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept: dict = {}
        #: Whether the last statement run by :meth:`execute` was interrupted in its first step: then
        #: this connection may serve on (see :meth:`execute`).
        self.stopped_in_first_step = False

    def execute(self, sql: str, parameters=(), /) -> sqlite3.Cursor:
        """``Connection.execute``, closing the cursor of a statement interrupted in its first step and
        noting it (:attr:`stopped_in_first_step`), where every canned query spends its time.

        Python 3.11 (3.11.2 and 3.11.7 tried) leaves a statement interrupted while its rows were
        fetched marked as running in the connection's statement cache, so each later read of the
        same SQL was compiled again, for good: such a connection is closed (:class:`Reader`). One
        stopped in its first step is reset once by ``execute`` and again here by its cursor's
        ``close``, and is taken from the cache again (``tests/test_reader.py``). Closing its
        connection too cost the event loop 33 ms at a million items (the file's map undone,
        ``api.mmap_size``), then every statement compiled again.
        """
        self.stopped_in_first_step = False
        cursor = self.cursor()
        try:
            return cursor.execute(sql, parameters)
        except sqlite3.OperationalError as exc:
            if _is_interrupted(exc):
                cursor.close()  # its statement reset a second time
                self.stopped_in_first_step = True
            raise


def connect_read_only(path: str | Path, timeout: float = BUSY_TIMEOUT, mmap_size: int = 0) -> ReadConnection:
    """A read-only connection to the database file at ``path`` (``mode=ro``: it can never write).

    Through Python's ``sqlite3``, the copy of SQLite Datasette and its other plugins read with:
    a second copy in the process (apsw's, which hands rows over faster) would release the POSIX
    locks this copy's readers hold on the same file (docs/performance.md, "Measurements behind the code").

    In autocommit mode (``isolation_level=None``): callers begin the read
    transaction they need themselves.

    Its temporary tables and sorts are kept in memory (``temp_store=memory``):
    every news query sets up a few (its CTEs, each arm's order), and SQLite's
    default, a temporary file's pager for each, cost more than the rest of the
    query (docs/performance.md, "Figures behind the API's limits").
    What they hold is bounded by the page limit, never by the table.

    With ``mmap_size``, that many bytes of the file are read through a memory map
    (``api.mmap_size``): no system call and no copy for a page the system already caches.
    SQLite keeps the map in step with the file another process writes (one page cache on
    Linux): it maps again when a transaction finds the file changed, and the writer shrinks
    the file only once no reader's snapshot needs the pages it drops (tests/test_mapped_reads.py).
    """
    conn = sqlite3.connect(
        f"{Path(path).resolve().as_uri()}?mode=ro",
        uri=True,
        factory=ReadConnection,
        check_same_thread=False,
        isolation_level=None,
        timeout=timeout,
    )
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA mmap_size = {int(mmap_size)}")  # a PRAGMA takes no bound parameter
    return conn


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def interrupted() -> None:
    """Count a read stopped at the time limit, which the request it served cannot get past (``/metrics``)."""
    count("sql_interrupted", "api")
    count("refused", "time")


def _is_interrupted(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT


def _serves_on(timed: Timed, exc: sqlite3.Error) -> bool:
    """Whether ``timed``'s connection stays open after its read raised ``exc``: only when the read was
    interrupted in its statement's first step (:meth:`ReadConnection.execute`); any other failure closes it."""
    return _is_interrupted(exc) and timed.conn.stopped_in_first_step


class Timed:
    """A read-only connection whose query is interrupted once ``time.monotonic()`` passes :attr:`deadline`."""

    __slots__ = ("conn", "deadline")

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.deadline = math.inf
        conn.set_progress_handler(self._over_time, PROGRESS_STEPS)

    def _over_time(self) -> bool:
        return time.monotonic() > self.deadline

    def close(self) -> None:
        self.conn.close()


class Reader:
    """Runs ``fn(conn)`` on the event loop's own connection, or on one of the API's own threads.

    :param path: the database file.
    :param threads: how many threads (and so connections) at most.
    :param time_limit_ms: the longest any read may run (``api.sql_time_limit_ms``).
    :param inline_budget_ms: the longest a read may hold the event loop before it moves to a thread.
    :param mmap_size: bytes of the file each connection maps (``api.mmap_size``; 0: none).
    """

    def __init__(
        self, path: str | Path, threads: int = THREADS, time_limit_ms: int = 1000, inline_budget_ms: int = INLINE_BUDGET_MS,
        mmap_size: int = 0,
    ):
        self.path = path
        self.mmap_size = mmap_size
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="qsite-api")
        self._local = threading.local()
        self._opened: list[Timed] = []
        self.time_limit = time_limit_ms / 1000
        self.inline_budget = inline_budget_ms / 1000
        self._inline: Timed | None = None
        #: Whether the inline connection keeps its read transaction (the file is in WAL mode), and until when.
        self._holds = False
        self._held_until = -math.inf

    def _connection(self) -> Timed:
        timed = getattr(self._local, "timed", None)
        if timed is None:
            timed = self._local.timed = Timed(connect_read_only(self.path, mmap_size=self.mmap_size))
            self._opened.append(timed)
        return timed

    def _call(self, fn: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        timed = self._connection()
        timed.deadline = deadline
        try:
            return fn(timed.conn)
        except sqlite3.Error as exc:
            if _serves_on(timed, exc):
                raise
            # Interrupted (see the module docstring), the file replaced, or the connection
            # left unusable: the next call on this thread opens a new one.
            self._local.timed = None
            if timed in self._opened:
                self._opened.remove(timed)
            timed.close()
            raise
        finally:
            timed.deadline = math.inf

    async def run(self, fn: Callable[[sqlite3.Connection], T], deadline: float | None = None) -> T:
        """``fn(conn)`` on a thread of the pool; its result, or its exception raised here.

        :param deadline: the ``time.monotonic()`` by which it must end (``sqlite3.OperationalError``,
            interrupted, past it); by default the time limit from now.
        """
        if deadline is None:
            deadline = time.monotonic() + self.time_limit
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, self._call, fn, deadline)
        except sqlite3.Error as exc:
            if _is_interrupted(exc):
                interrupted()
            raise

    async def inline(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` here and now, on the event loop's own connection (see the module docstring).

        When it would wait for a lock, or runs past :attr:`inline_budget`, :meth:`run` instead,
        by the same deadline; past the time limit, ``sqlite3.OperationalError`` (interrupted).
        """
        started = time.monotonic()
        deadline = started + self.time_limit
        timed = self._inline
        try:
            if timed is None:
                timed = self._inline = Timed(connect_read_only(self.path, timeout=0, mmap_size=self.mmap_size))
                self._holds = timed.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            if self._holds:
                self._hold(timed, started)
            timed.deadline = min(deadline, started + self.inline_budget)
            return fn(timed.conn)
        except sqlite3.Error as exc:
            # Past the budget, a lock to wait for, a replaced file or an unusable connection:
            # the next inline read opens a new one (an interrupted one too, but in its first step:
            # see the module docstring).
            if timed is not None and not _serves_on(timed, exc):
                self._inline = None
                timed.close()
            if _is_busy(exc) or (_is_interrupted(exc) and time.monotonic() < deadline):
                return await self.run(fn, deadline)
            if _is_interrupted(exc):
                interrupted()
            raise
        finally:
            if timed is not None:
                timed.deadline = math.inf

    async def fresh(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`inline`, in a read transaction begun now: it sees every write committed before."""
        self._release(self._inline, early=True)
        return await self.inline(fn)

    def _hold(self, timed: Timed, now: float) -> None:
        """Keep the inline connection in a read transaction, begun at most :data:`HOLD` seconds ago."""
        conn = timed.conn
        if conn.in_transaction:
            if now < self._held_until:
                return
            conn.execute("COMMIT")
        conn.kept.clear()
        conn.execute("BEGIN")  # deferred: the snapshot is taken by the first read
        self._held_until = now + HOLD
        # ended when it is due even if no read comes: an idle reader keeps no snapshot
        asyncio.get_running_loop().call_later(HOLD, self._release, timed)

    def _release(self, timed: Timed | None, early: bool = False) -> None:
        """End the inline connection's held read transaction, if ``timed`` is still it and the hold is over."""
        if timed is None or timed is not self._inline or not (early or time.monotonic() >= self._held_until):
            return
        try:
            if timed.conn.in_transaction:
                timed.conn.execute("COMMIT")
        except sqlite3.Error:  # the next read finds the connection unusable, and opens another
            pass
        self._held_until = -math.inf

    def close(self) -> None:
        """No more reads: the threads end, and every connection is closed (the file may then go)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        for timed in self._opened:
            timed.close()
        self._opened.clear()
        if self._inline is not None:
            self._inline.close()
            self._inline = None
