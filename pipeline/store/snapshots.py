"""The reads behind ``qsite publish`` (:mod:`qsite.pipeline.ops.publish`): the live data version and a consistent copy.

Both open the database read-only: publishing never writes to the working
database and never needs the writer lock. What a copy must pass is
:func:`qsite.db.snapshot.check_file`, shared with the replicas.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from qsite.db.snapshot import INGEST_KINDS, data_version, pending_migrations, unknown_migrations

#: Seconds a read waits for a writer's checkpoint before giving up.
BUSY_TIMEOUT = 10


def _read_only(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)


def live_data_version(database: Path) -> int:
    """The data version (:func:`qsite.db.snapshot.data_version`) of the working database, 0 before any ingest."""
    conn = _read_only(database)
    try:
        return data_version(conn)
    finally:
        conn.close()


#: ``ingest_runs`` statuses of a run that worked.
_WORKED = ("ok", "unchanged", "warning")


def live_ingests(database: Path) -> dict:
    """The writer's heartbeat: per kind (``news``, ``site``) its latest run's ``status`` and time, and its latest run that worked.

    ``{kind: {"status", "last_run_at", "last_success_at"} or None}``, as
    :attr:`qsite.db.snapshot.Pointer.ingests` carries them. Each read goes newest first
    by id and stops at the first row it needs.
    """
    conn = _read_only(database)
    try:
        found = {}
        for kind in INGEST_KINDS:
            last = conn.execute(
                "SELECT status, coalesce(finished_at, started_at) FROM ingest_runs WHERE +kind = ? ORDER BY id DESC LIMIT 1",
                [kind],
            ).fetchone()
            if last is None:
                found[kind] = None
                continue
            success = conn.execute(
                "SELECT finished_at FROM ingest_runs WHERE +kind = ? AND status IN (?, ?, ?) ORDER BY id DESC LIMIT 1",
                [kind, *_WORKED],
            ).fetchone()
            found[kind] = {"status": last[0], "last_run_at": last[1], "last_success_at": success[0] if success else None}
        return found
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return dict.fromkeys(INGEST_KINDS)
        raise
    finally:
        conn.close()


def live_migrations(database: Path) -> tuple[list[str], list[str]]:
    """The working database's migrations of a newer qsite (:func:`qsite.db.snapshot.unknown_migrations`), and
    this qsite's it has not applied yet (:func:`qsite.db.snapshot.pending_migrations`)."""
    conn = _read_only(database)
    try:
        return unknown_migrations(conn), pending_migrations(conn)
    finally:
        conn.close()


def copy_database(database: Path, target: Path) -> None:
    """A consistent, compact copy of ``database`` at ``target``.

    ``VACUUM INTO`` reads in one transaction: in WAL mode it neither waits for
    the API's readers nor blocks the writer, and a transaction still open is
    not in the copy. The copy is in rollback-journal mode (no ``-wal``/``-shm``).
    """
    conn = _read_only(database)
    try:
        conn.execute("VACUUM INTO ?", [str(target)])
    finally:
        conn.close()
