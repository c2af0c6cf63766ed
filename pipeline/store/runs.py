"""The pipeline's bookkeeping: ``ingest_runs`` (one row per ingest of one thing) and ``data_versions``.

Call these inside the transaction of the work they describe, so a run's row
and a dataset's version never disagree with the data.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import sqlite_utils

from qsite.db.model import utc_now
from qsite.db.redact import redact_text


def bump_versions(db: sqlite_utils.Database, datasets, changed_at: str | None = None) -> None:
    """Record that ``datasets`` changed; call inside the transaction that changed them.

    ``changed_at`` (by default now) is never earlier than the latest change of any dataset
    (a clock set back, an earlier time given), so the answers' Last-Modified never goes
    backwards. Commits within one second share it: a run that changed data ends on a
    second of its own (:func:`qsite.pipeline.store.end_on_own_second`), so once it is over an
    ``If-Modified-Since`` of anything it showed before is a 200. Datasets changed in one
    transaction share their time.
    """
    (latest,) = db.execute("SELECT max(changed_at) FROM data_versions").fetchone()
    at = max(changed_at or utc_now(), latest or "")
    for dataset in datasets:
        db.execute(
            """
            INSERT INTO data_versions (dataset, version, changed_at) VALUES (?, 1, ?)
            ON CONFLICT(dataset) DO UPDATE SET version = version + 1, changed_at = excluded.changed_at
            """,
            [dataset, at],
        )


def restamp(db: sqlite_utils.Database, datasets) -> None:
    """Move the time of the latest versions of ``datasets`` to now (never back), one time for all; versions stay.

    After :func:`until_own_second`, a second no earlier change has: the answers' Last-Modified
    and ``updated_at`` move with it, the data and its data version do not.
    """
    now = utc_now()
    for dataset in datasets:
        db.execute("UPDATE data_versions SET changed_at = max(changed_at, ?) WHERE dataset = ?", [now, dataset])


#: The longest :func:`until_own_second` asks to wait, in seconds.
MAX_WAIT = 5.0


def until_own_second(db: sqlite_utils.Database) -> float:
    """Seconds until a change committed now would have a second no earlier change has, at most :data:`MAX_WAIT`."""
    (latest,) = db.execute("SELECT max(changed_at) FROM data_versions").fetchone()
    if not latest:
        return 0.0
    after = datetime.fromisoformat(latest) + timedelta(seconds=1)
    # a latest time a little ahead (another machine's clock) is waited for, not one far ahead (a clock set back)
    return min(MAX_WAIT, max(0.0, (after - datetime.now(timezone.utc)).total_seconds()))


def bump_version(db: sqlite_utils.Database, dataset: str, changed_at: str | None = None) -> None:
    """:func:`bump_versions` of one dataset."""
    bump_versions(db, (dataset,), changed_at)


def close_interrupted_runs(db: sqlite_utils.Database) -> int:
    """Mark as failed the runs a killed process left ``running``; return how many.

    Runs never overlap (the writer lock, :mod:`qsite.pipeline.store.lock`), so when a new
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
    """Close the ``ingest_runs`` row ``run_id`` with its outcome; ``error`` is stored redacted (:func:`qsite.db.redact.redact_text`)."""
    db.execute(
        "UPDATE ingest_runs SET finished_at = ?, status = ?, counts = ?, error = ? WHERE id = ?",
        [utc_now(), status, json.dumps(counts or {}, sort_keys=True), error and redact_text(error), run_id],
    )
