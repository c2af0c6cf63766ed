"""The pipeline's storage layer: the only place the pipeline runs SQL.

Each module here owns some tables and offers narrow functions over them:
:mod:`.catalog` (the site export's tables), :mod:`.news` (items),
:mod:`.sources` (each feed's validators, failures and backoff), :mod:`.runs`
(``ingest_runs`` and ``data_versions``), :mod:`.status` (the reads behind
``qsite status``) and :mod:`.snapshots` (the reads behind ``qsite publish``). Fetching, parsing, normalising and deciding
(:mod:`qsite.pipeline.news.policy`) hold no SQL and need no database to be tested.

This package itself opens the database and makes transactions. The database
runs in WAL mode so that Datasette keeps reading while the pipeline writes;
each unit of work (one export, one news source) is all or nothing: one
:func:`transaction`, or one savepoint of a :class:`Batch` (news sources), so readers see
the old data or the new, never a mix. The schema itself is :mod:`qsite.db.migrations`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Generic, Iterator, TypeVar

import sqlite_utils

from qsite.db.migrations import migrations
from qsite.db.model import VERSION
from qsite.db.snapshot import pending_migrations, unknown_migrations

from qsite.pipeline.store.lock import WriterLockTimeout, writer_lock
from qsite.pipeline.store.runs import bump_version, bump_versions, restamp, until_own_second

__all__ = ["Batch", "StoreError", "bump_version", "bump_versions", "end_on_own_second", "newer_schema", "open_and_migrate", "open_database", "transaction"]

log = logging.getLogger("qsite.store")

#: How long a writer waits for another writer's transaction before giving up.
BUSY_TIMEOUT_MS = 10_000

#: Seconds to wait for the writer lock before applying pending migrations.
MIGRATION_WAIT = 30.0


class StoreError(Exception):
    """The database cannot be opened or written; the message says which file and why."""


def open_database(path: str | Path, *, writing: bool = True) -> sqlite_utils.Database:
    """Open (creating if need be) the database at ``path`` and apply pending migrations.

    See :func:`open_and_migrate`, which also says which migrations it applied.
    """
    return open_and_migrate(path, writing=writing)[0]


def open_and_migrate(path: str | Path, *, writing: bool = True) -> tuple[sqlite_utils.Database, list[str]]:
    """Open (creating if need be) the database at ``path``, apply pending migrations, and name those applied.

    Pending migrations are applied under the writer lock (:mod:`qsite.pipeline.store.lock`),
    so processes opening a new file at once cannot both create its tables.

    :param writing: refuse a database a newer qsite has migrated (migrations this code does not
        know): the code would write rows without the columns, triggers and counts they expect.
    :raises StoreError: when the file or its folder cannot be created, read or written,
        or migrations are pending and another writer holds the lock for over :data:`MIGRATION_WAIT` s,
        or (``writing``) it has migrations this qsite does not know.
    """
    path = Path(path)
    applied: list[str] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        db = sqlite_utils.Database(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        unknown = unknown_migrations(conn) if writing else []
        # Only reads until here: turning a new file to WAL and creating its tables are writes,
        # done under the writer lock, so processes opening one file at once take turns instead
        # of waiting on each other's SQLite locks (up to the busy timeout, then "database is locked").
        wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        if not unknown and (not wal or pending_migrations(conn)):
            applied = _migrate(db, path)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{path}: cannot open database: {exc}{_unwritable_folder(path)}") from None
    if unknown:
        db.close()
        raise newer_schema(path, unknown)
    return db, applied


def _unwritable_folder(path: Path) -> str:
    """The likely reason an open failed, when the database's folder is not writable (a read-only disk).

    SQLite's own message is "unable to open database file" even when the file is
    there: WAL mode creates ``<file>-shm`` and ``-wal`` beside it, which needs the folder.
    """
    folder = path.parent
    if folder.is_dir() and not os.access(folder, os.W_OK):
        return f" (the folder {folder} is not writable: WAL mode needs to create {path.name}-shm and {path.name}-wal in it)"
    return ""


def newer_schema(path: Path, unknown: list[str], to: str = "write to it") -> StoreError:
    """The error of a writer over a database with the ``unknown`` migrations of a newer qsite."""
    return StoreError(
        f"{path}: a newer qsite has migrated this database ({', '.join(unknown)}, unknown to qsite {VERSION}); "
        f"upgrade qsite to {to}"
    )


def _migrate(db: sqlite_utils.Database, path: Path) -> list[str]:
    # Two processes migrating a new file at once would both create the same
    # tables ("table ... already exists"), so migrations run under the writer
    # lock; apply() looks again at what is pending once the lock is ours.
    try:
        with writer_lock(path, MIGRATION_WAIT):
            if db.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.conn.execute("PRAGMA journal_mode = WAL")
            pending = [migration.name for migration in migrations.pending(db)]
            migrations.apply(db)
    except WriterLockTimeout as exc:
        raise StoreError(f"cannot apply schema migrations: {exc}") from None
    if pending:
        log.info("%s: applied %d migration(s): %s", path, len(pending), ", ".join(pending))
    return pending


def end_on_own_second(db: sqlite_utils.Database, datasets) -> None:
    """End a run that changed ``datasets`` on a second no earlier change has: their last versions' Last-Modified.

    A run commits several times in one second (the news sweep, :class:`Batch`), and those
    commits share a Last-Modified (the ETag tells them apart). Waiting once at its end
    (:func:`qsite.pipeline.store.runs.until_own_second`, under a second), not before each commit
    (a second per source, which made a sweep of many changed feeds last as many seconds), then moving the last
    versions' time there (:func:`qsite.pipeline.store.runs.restamp`), makes an ``If-Modified-Since``
    of anything the run showed a 200 once it is over. Blocks: call outside an event loop.
    """
    time.sleep(until_own_second(db))
    with transaction(db):
        restamp(db, datasets)


@contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One all-or-nothing unit of work; ``BEGIN IMMEDIATE`` takes the write lock up front.

    The guards are those of sqlite-utils' ``Database.atomic()``, which cannot
    be used as it is because it begins a deferred transaction:

    - on an error, roll back only if a transaction is still open: SQLite itself
      rolls back on some errors (``SQLITE_FULL``, ``SQLITE_IOERR``, a trigger's
      ``RAISE(ROLLBACK)``), and a second ``ROLLBACK`` would replace the real
      error with "cannot rollback - no transaction is active";
    - when ``COMMIT`` fails (a deferred constraint, a full disk), roll back:
      SQLite leaves the transaction open, and the connection's next ``BEGIN``
      would fail.

    Either way the caller gets the original error and a connection outside any
    transaction, ready for the next unit of work.
    """
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        _rollback(conn)
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


Unit = TypeVar("Unit")
Report = TypeVar("Report")


class Batch(Generic[Unit, Report]):
    """Units of work written in one transaction, each in a savepoint of its own; their reports once committed.

    Why: a commit costs more than a news source's rows (the news table's pages and the search
    tables' flushes and merges, about 7 ms; ``bench/README.md``, "where the full ingest's time
    goes"), so a sweep of many changed feeds, one transaction a source, spent most of its store
    committing. What must not change: each unit is all or nothing, and what one unit does never
    costs another its writes:

    - a unit whose ``write`` raises :class:`sqlite3.Error` with the transaction still open is
      rolled back to its savepoint, and ``refused`` writes its failure in its place;
    - when SQLite ends the whole transaction itself (a trigger's ``RAISE(ROLLBACK)``, a full disk),
      or the ``COMMIT`` fails (a deferred constraint), every unit of the batch not yet committed is
      written again alone, one :func:`transaction` each (``alone``), as if never batched;
    - any other exception undoes the unit it came from, and leaving the batch on an exception
      (``with``) commits the units before it, as their own transactions would have been.

    :param write: writes a unit (no transaction of its own) and returns its report.
    :param refused: writes, in the open transaction, the failure of a unit the database refused.
    :param alone: the unit in a transaction of its own, its failures handled (what a unit did before batches).
    :param seconds: how long a batch stays open: what it holds becomes visible at most this late.
    """

    def __init__(self, db: sqlite_utils.Database, write: Callable[[Unit], Report],
                 refused: Callable[[Unit, sqlite3.Error], Report], alone: Callable[[Unit], Report], seconds: float):
        self.conn = db.conn
        self._write, self._refused, self._alone = write, refused, alone
        self.seconds = seconds
        self._began: float | None = None
        #: ``[unit, report]`` in the order they came; unit None: nothing of it is left to write.
        self._entries: list[list] = []

    def __enter__(self) -> Batch[Unit, Report]:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        """Leaving on an exception (a bug, an interrupt, a cancelled run) commits the whole units the
        batch holds, and leaves the connection outside any transaction for a long-lived process's next run."""
        if kind is not None:
            self.commit()

    def time_left(self) -> float:
        """Seconds until the open batch should commit; 0 when none is open."""
        return 0.0 if self._began is None else max(0.0, self._began + self.seconds - time.monotonic())

    def add(self, report: Report) -> None:
        """A report of a unit with nothing to write, kept in its place among the others."""
        self._entries.append([None, report])

    def write(self, unit: Unit) -> None:
        """Write ``unit`` in the open batch (beginning one if none is open)."""
        conn = self.conn
        try:
            if self._began is None:
                conn.execute("BEGIN IMMEDIATE")
                self._began = time.monotonic()
            conn.execute("SAVEPOINT unit")
            try:
                report = self._write(unit)
            except sqlite3.Error as exc:
                if not conn.in_transaction:
                    raise
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
                report = self._refused(unit, exc)
            else:
                conn.execute("RELEASE unit")
        except sqlite3.Error:
            # The transaction is gone (or even the failure could not be written): each unit alone.
            self._entries.append([unit, None])
            self._write_alone()
            return
        except BaseException:
            self._undo_unit()
            raise
        self._entries.append([unit, report])

    def commit(self) -> list[Report]:
        """Commit the open batch, if any; the reports of every unit since the last commit, in order."""
        if self._began is not None:
            try:
                self.conn.execute("COMMIT")
                self._began = None
            except sqlite3.Error:
                self._write_alone()
        reports = [report for _, report in self._entries]
        self._entries = []
        return reports

    def _undo_unit(self) -> None:
        """Undo what the unit being written wrote, keeping the batch's others; all of it if that cannot be done."""
        try:
            self.conn.execute("ROLLBACK TO unit")
            self.conn.execute("RELEASE unit")
        except sqlite3.Error:  # no transaction, or no such savepoint: the others are written alone
            self._write_alone()

    def _write_alone(self) -> None:
        _rollback(self.conn)
        self._began = None
        for entry in self._entries:
            if entry[0] is not None:
                entry[1] = self._alone(entry[0])
                entry[0] = None


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction, if SQLite has not already; never hides the error being handled."""
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        # The error that made us roll back is the one to report; SQLite undoes the
        # transaction anyway when the connection closes.
        log.warning("ROLLBACK failed: %s", exc)
