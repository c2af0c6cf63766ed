"""Opening the database and the bookkeeping every ingest shares.

The database runs in WAL mode so that Datasette keeps reading while the
pipeline writes; each unit of work (one export, one news source) is one
transaction, so readers see the old data or the new, never a mix.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import sqlite_utils

from db.migrations import migrations
from db.model import format_time, utc_now

from .lock import WriterLockTimeout, writer_lock

#: How long a writer waits for another writer's transaction before giving up.
BUSY_TIMEOUT_MS = 10_000

#: Seconds to wait for the writer lock before applying pending migrations.
MIGRATION_WAIT = 30.0


class StoreError(Exception):
    """The database cannot be opened or written; the message says which file and why."""


def open_database(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if need be) the database at ``path`` and apply pending migrations.

    Pending migrations are applied under the writer lock (:mod:`pipeline.lock`),
    so processes opening a new file at once cannot both create its tables.

    :raises StoreError: when the file or its folder cannot be created, read or written,
        or migrations are pending and another writer holds the lock for over :data:`MIGRATION_WAIT` s.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        db = sqlite_utils.Database(conn)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = NORMAL")
        if migrations.pending(db):
            _migrate(db, path)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"{path}: cannot open database: {exc}") from None
    return db


def _migrate(db: sqlite_utils.Database, path: Path) -> None:
    # Two processes migrating a new file at once would both create the same
    # tables ("table ... already exists"), so migrations run under the writer
    # lock; apply() looks again at what is pending once the lock is ours.
    try:
        with writer_lock(path, MIGRATION_WAIT):
            migrations.apply(db)
    except WriterLockTimeout as exc:
        raise StoreError(f"cannot apply schema migrations: {exc}") from None


@contextmanager
def transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """One all-or-nothing unit of work; ``BEGIN IMMEDIATE`` takes the write lock up front."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def bump_version(db: sqlite_utils.Database, dataset: str, changed_at: str | None = None) -> None:
    """Record that ``dataset`` changed; call inside the transaction that changed it."""
    db.execute(
        """
        INSERT INTO data_versions (dataset, version, changed_at) VALUES (?, 1, ?)
        ON CONFLICT(dataset) DO UPDATE SET version = version + 1, changed_at = excluded.changed_at
        """,
        [dataset, changed_at or utc_now()],
    )


def close_interrupted_runs(db: sqlite_utils.Database) -> int:
    """Mark as failed the runs a killed process left ``running``; return how many.

    Runs never overlap (the writer lock, :mod:`pipeline.lock`), so when a new
    one starts, any row still ``running`` belongs to a process that died.
    """
    return db.execute(
        "UPDATE ingest_runs SET status = 'failed', finished_at = ?, error = ? WHERE status = 'running'",
        [utc_now(), "interrupted: the process ended before the run finished"],
    ).rowcount


def start_run(db: sqlite_utils.Database, kind: str, source: str, started_at: str | None = None) -> int:
    """Insert a ``running`` row in ``ingest_runs`` and return its id."""
    cursor = db.execute(
        "INSERT INTO ingest_runs (kind, source, started_at, status) VALUES (?, ?, ?, 'running')",
        [kind, source, started_at or utc_now()],
    )
    return cursor.lastrowid


def finish_run(
    db: sqlite_utils.Database, run_id: int, status: str, counts: dict | None = None, error: str | None = None
) -> None:
    """Close the ``ingest_runs`` row ``run_id`` with its outcome."""
    db.execute(
        "UPDATE ingest_runs SET finished_at = ?, status = ?, counts = ?, error = ? WHERE id = ?",
        [utc_now(), status, json.dumps(counts or {}, sort_keys=True), error, run_id],
    )


class RunReport:
    """The outcome of ingesting one thing (the export, or one news source).

    ``status`` is one of ``ok``, ``unchanged``, ``warning`` or ``failed``,
    as stored in ``ingest_runs``.
    """

    def __init__(self, kind: str, source: str, status: str, counts: dict | None = None, error: str | None = None):
        self.kind = kind
        self.source = source
        self.status = status
        self.counts = counts or {}
        self.error = error

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def line(self) -> str:
        """One summary line, e.g. ``news Lab Notes: ok (new 3, updated 1)``."""
        counts = ", ".join(f"{key} {value}" for key, value in self.counts.items())
        text = f"{self.kind} {self.source}: {self.status}"
        if counts:
            text += f" ({counts})"
        if self.error:
            text += f": {self.error}"
        return text

    def __repr__(self) -> str:
        return f"RunReport({self.line()!r})"
