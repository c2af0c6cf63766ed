"""GET /api/v1/health: is the data here and recent enough to serve, and how did the last ingests end.

For load balancers and Kubernetes probes: 200 when the data is no older than
``api.health_max_data_age``, 503 when it is older or there is none (no
database loaded, nothing ingested, a following replica before its first
snapshot). Both answers carry the same JSON, so an operator sees why. Never
cached: a probe must see the state now.

Each kind of ingest (``news``, ``site``) is judged on its own: its age is the
time since its last run that did not fail (an ingest that found nothing new
still shows the data is current), against its own bound (``api.health_max_data_age``
for news, ``api.health_max_site_age`` for the site export). The kinds the
instance's config ingests decide the status (the site export always, news when
``news.sources`` is not empty): one of them older than its bound is ``stale``,
however recent the other (a kind never run has nothing to judge yet); the body
shows each kind's age, bound and whether it decides. A database with no ingest runs (seeded by hand, or older
than the runs table) falls back to when its data last changed (``data_versions``).

On a following replica each kind's latest runs come from the writer's heartbeat
in ``latest.json`` (:attr:`qsite.db.snapshot.Pointer.ingests`) rather than from the
snapshot: the writer renews it at every publish, with or without a
new snapshot, so a day without new items keeps replicas in the rotation.
"""

from __future__ import annotations

from datetime import datetime, timezone

from qsite.db.model import VERSION

from qsite.service.api.data_versions import Versions
from qsite.service.api.responses import dumps, parse_stored_time
from qsite.service.http.problems import CORS_HEADERS, JSON_CONTENT_TYPE, NO_STORE, VARY

#: Seconds a client should wait when there is no data yet, or the database is busy.
NO_DATA_RETRY_AFTER = 30

#: The kinds of ingest, in the order the body lists them.
KINDS = ("news", "site")


def judged_kinds(config) -> dict:
    """:func:`health`'s ``bounds`` and ``deciding`` from a qsite config: each kind's bound, and the kinds it ingests."""
    api = config.api
    return {
        "bounds": {"news": api.health_max_data_age, "site": api.health_max_site_age or api.health_max_data_age},
        "deciding": ("site", "news") if config.news.sources else ("site",),
    }


def data_age(newest: str | None, now: datetime) -> int | None:
    """Whole seconds from ``newest`` (a stored time) to ``now``; never negative; None without a time."""
    if not newest:
        return None
    return max(0, int((now - parse_stored_time(newest)).total_seconds()))


def merge_heartbeat(ingests: dict, heartbeat: dict | None) -> dict:
    """``ingests`` (per kind, from the served database) with the writer's ``heartbeat`` in place of each kind it reports.

    The heartbeat is never older than the served snapshot's own runs: the pointer
    naming a snapshot is written after the snapshot was copied, and renewed since.
    The counts of sources stay the snapshot's.
    """
    for kind, beat in (heartbeat or {}).items():
        if kind not in ingests or not beat:
            continue
        mine = ingests[kind] or {"sources": 0, "failed_sources": 0}
        ingests[kind] = {**mine, "status": beat["status"], "last_run_at": beat.get("last_run_at"),
                         "last_success_at": beat.get("last_success_at")}
    return ingests


def health(
    rows: list[dict] | None,
    versions: Versions | None,
    max_data_age: int,
    snapshot: str | None,
    now: datetime | None = None,
    *,
    bounds: dict[str, int] | None = None,
    deciding: tuple[str, ...] = KINDS,
    heartbeat: dict | None = None,
) -> tuple[int, dict]:
    """``(status, body)``: 200 and ``"ok"``, or 503 and ``"stale"``, ``"no-data"`` or ``"unavailable"``.

    :param rows: the rows of the ``health`` canned query; None when the database could not be read.
    :param versions: the ``data_versions`` read with them; None or empty: nothing ingested.
    :param max_data_age: the bound of a kind not in ``bounds``, and of the data's age without runs.
    :param snapshot: the snapshot file a following replica serves, else None.
    :param bounds: ``{kind: seconds}``, each kind's own bound.
    :param deciding: the kinds whose age decides the status (those the config ingests).
    :param heartbeat: the writer's ``{kind: {status, last_run_at, last_success_at}}`` (a replica's pointer).
    """
    now = now or datetime.now(timezone.utc)
    bounds = {kind: (bounds or {}).get(kind, max_data_age) for kind in KINDS}
    ingests = {kind: None for kind in KINDS}
    for row in rows or ():
        if row["kind"] in ingests:
            ingests[row["kind"]] = {key: row[key] for key in ("status", "last_run_at", "last_success_at", "sources", "failed_sources")}
    if rows is not None:
        merge_heartbeat(ingests, heartbeat)
    ran = any(ingests.values())
    for kind, ingest in ingests.items():
        if ingest is not None:
            age = data_age(ingest["last_success_at"], now)
            ingest.update(
                age_seconds=age,
                max_age_seconds=bounds[kind],
                fresh=age is not None and age <= bounds[kind],
                decides=kind in deciding,
            )
    successes = [ingest["last_success_at"] for ingest in ingests.values() if ingest and ingest["last_success_at"]]
    changes = [changed_at for _version, changed_at in (versions or {}).values()]
    updated = max(successes) if successes else (max(changes) if changes else None)
    age = data_age(updated, now)
    if rows is None:
        status = "unavailable"
    elif not versions:
        status = "no-data"
    elif ran:  # each deciding kind on its own: a failing one is not hidden by another that works
        stale = [kind for kind in deciding if ingests.get(kind) and not ingests[kind]["fresh"]]
        status = "stale" if stale else "ok"
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
    **judged,
) -> tuple[int, list, bytes]:
    """``(status, headers, body)``: :func:`health` as sent, never stored, with ``Retry-After`` on a 503.

    One answer for an instance with a database and for a following replica before its first snapshot.
    ``judged``: :func:`health`'s ``bounds``, ``deciding`` and ``heartbeat``.
    """
    status, payload = health(rows, versions, max_data_age, snapshot, **judged)
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
