"""``data_versions``: which datasets changed, read cheaply and often.

The pipeline bumps a dataset's row in ``data_versions`` in the same
transaction as every change to its data. :class:`DataVersions` re-reads that
small table at most once per interval on a dedicated read-only connection and
says which datasets changed since it last looked; the response cache
(:mod:`service.response_cache`) drops what was built from them.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

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


class DataVersions:
    """The current ``data_versions``, re-read at most every ``interval`` seconds.

    Reads go through a dedicated read-only connection; in WAL mode they never
    wait for the pipeline's writes, and the table has four rows.
    """

    def __init__(self, path: str, interval: float = CHECK_INTERVAL):
        self.path = path
        self.interval = interval
        self.current: Versions = {}
        self._conn: sqlite3.Connection | None = None
        self._next = 0.0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(
                f"{Path(self.path).resolve().as_uri()}?mode=ro",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                timeout=1,
            )
        return self._conn

    def poll(self, force: bool = False) -> set[str]:
        """Re-read if the interval passed; return the datasets that changed since last time."""
        now = time.monotonic()
        if not force and now < self._next:
            return set()
        self._next = now + self.interval
        try:
            fresh = read_versions(self._connect())
        except sqlite3.Error:
            self.close()  # the file may have been replaced; reconnect next time
            return set()
        return self.update(fresh)

    def update(self, fresh: Versions) -> set[str]:
        changed = {name for name in fresh.keys() | self.current.keys() if fresh.get(name) != self.current.get(name)}
        self.current = fresh
        return changed

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def updated_at(versions: Versions, datasets: tuple[str, ...]) -> str:
    """When the newest of ``datasets`` last changed (the ``updated_at`` and Last-Modified of a response)."""
    return max(versions[name][1] for name in datasets if name in versions)
