"""GET /api/v1/health: is the data here and recent enough to serve, and how did the last ingests end.

For load balancers and Kubernetes probes: 200 when the data is no older than
``api.health_max_data_age``, 503 when it is older or there is none (no
database loaded, nothing ingested, a following replica before its first
snapshot). Both answers carry the same JSON, so an operator sees why. Never
cached: a probe must see the state now.

The data's age is the time since the last ingest run that did not fail (of
either kind): an ingest that found nothing new still shows the data is
current. A database with no ingest runs (seeded by hand, or older than the
runs table) falls back to when its data last changed (``data_versions``).
"""

from __future__ import annotations

from datetime import datetime, timezone

from db.model import VERSION

from service.api.data_versions import Versions
from service.api.responses import dumps, parse_stored_time
from service.http.problems import CORS_HEADERS, JSON_CONTENT_TYPE, NO_STORE, VARY

#: Seconds a client should wait when there is no data yet, or the database is busy.
NO_DATA_RETRY_AFTER = 30

#: The kinds of ingest, in the order the body lists them.
KINDS = ("news", "site")


def data_age(newest: str | None, now: datetime) -> int | None:
    """Whole seconds from ``newest`` (a stored time) to ``now``; never negative; None without a time."""
    if not newest:
        return None
    return max(0, int((now - parse_stored_time(newest)).total_seconds()))


def health(
    rows: list[dict] | None,
    versions: Versions | None,
    max_data_age: int,
    snapshot: str | None,
    now: datetime | None = None,
) -> tuple[int, dict]:
    """``(status, body)``: 200 and ``"ok"``, or 503 and ``"stale"``, ``"no-data"`` or ``"unavailable"``.

    :param rows: the rows of the ``health`` canned query; None when the database could not be read.
    :param versions: the ``data_versions`` read with them; None or empty: nothing ingested.
    :param snapshot: the snapshot file a following replica serves, else None.
    """
    now = now or datetime.now(timezone.utc)
    ingests = {kind: None for kind in KINDS}
    for row in rows or ():
        if row["kind"] in ingests:
            ingests[row["kind"]] = {key: row[key] for key in ("status", "last_run_at", "last_success_at", "sources", "failed_sources")}
    successes = [ingest["last_success_at"] for ingest in ingests.values() if ingest and ingest["last_success_at"]]
    changes = [changed_at for _version, changed_at in (versions or {}).values()]
    updated = max(successes) if successes else (max(changes) if changes else None)
    age = data_age(updated, now)
    if rows is None:
        status = "unavailable"
    elif not versions:
        status = "no-data"
    elif age is None or age > max_data_age:
        status = "stale"
    else:
        status = "ok"
    body = {
        "status": status,
        "qsite_version": VERSION,
        "snapshot": snapshot,
        "data_version": sum(version for version, _changed in versions.values()) if versions else None,
        "data_updated_at": updated,
        "data_age_seconds": age,
        "max_data_age_seconds": max_data_age,
        "ingests": ingests,
    }
    return (200 if status == "ok" else 503), body


def health_response(
    rows: list[dict] | None,
    versions: Versions | None,
    max_data_age: int,
    snapshot: str | None,
    extra_headers=(),
    retry_after: int = NO_DATA_RETRY_AFTER,
) -> tuple[int, list, bytes]:
    """``(status, headers, body)``: :func:`health` as sent, never stored, with ``Retry-After`` on a 503.

    One answer for an instance with a database and for a following replica before its first snapshot.
    """
    status, payload = health(rows, versions, max_data_age, snapshot)
    body = dumps(payload)
    headers = [
        (b"content-type", JSON_CONTENT_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        NO_STORE,
        *CORS_HEADERS,
        VARY,
        *extra_headers,
    ]
    if status != 200:
        headers.append((b"retry-after", str(retry_after).encode()))
    return status, headers, body
