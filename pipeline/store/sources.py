"""Each news source's state in ``sources``: validators, last outcome, failures and backoff.

What the values should be is decided in :mod:`qsite.pipeline.news.policy`; these
functions only read and write them. Every row is public through Datasette:
``url`` is given in its public form (``SourceConfig.public_url``), and error
text is stored redacted (:func:`qsite.db.redact.redact_text`: no credentials in
URLs, no local paths).
"""

from __future__ import annotations

import sqlite_utils

from qsite.db.redact import redact_text


def stored_sources(db: sqlite_utils.Database) -> dict[str, dict]:
    """Every stored source's row, by name, configured or not, in name order."""
    return {row["name"]: row for row in db.query("SELECT * FROM sources ORDER BY name")}


def add_source(db: sqlite_utils.Database, name: str, url: str, tag: str) -> None:
    db.execute("INSERT INTO sources (name, url, tag) VALUES (?, ?, ?)", [name, url, tag])


def move_source(db: sqlite_utils.Database, name: str, url: str, tag: str) -> None:
    """A new URL: forget the validators and failures of the old one, and enable the source again."""
    db.execute(
        """UPDATE sources SET url = ?, tag = ?, etag = NULL, last_modified = NULL, content_hash = NULL,
           consecutive_failures = 0, next_fetch_at = NULL, disabled = 0 WHERE name = ?""",
        [url, tag, name],
    )


def retag_source(db: sqlite_utils.Database, name: str, tag: str) -> None:
    """New tag or rules: forget the validators, so the feed is fetched and parsed again."""
    db.execute(
        "UPDATE sources SET tag = ?, etag = NULL, last_modified = NULL, content_hash = NULL WHERE name = ?",
        [tag, name],
    )


def record_fetch(
    db: sqlite_utils.Database,
    name: str,
    *,
    etag: str | None,
    last_modified: str | None,
    content_hash: str | None,
    fetched_at: str,
    status: str,
    warning: str | None,
) -> None:
    """A fetch that worked (stored, or unchanged): new validators, failures and backoff cleared."""
    db.execute(
        """UPDATE sources SET etag = ?, last_modified = ?, content_hash = ?, last_fetch_at = ?,
           last_status = ?, last_error = ?, consecutive_failures = 0, next_fetch_at = NULL WHERE name = ?""",
        [etag, last_modified, content_hash, fetched_at, status, warning and redact_text(warning), name],
    )


def record_failure(
    db: sqlite_utils.Database,
    name: str,
    *,
    tried_at: str,
    error: str,
    consecutive_failures: int,
    next_fetch_at: str | None,
    disabled: bool,
) -> None:
    """A try that failed. The validators stay: the next try must not be answered 304 for a body never stored."""
    db.execute(
        """UPDATE sources SET last_fetch_at = ?, last_status = 'failed', last_error = ?, consecutive_failures = ?,
           next_fetch_at = ?, disabled = ? WHERE name = ?""",
        [tried_at, redact_text(error), consecutive_failures, next_fetch_at, int(disabled), name],
    )
