"""Ingesting the site export into the catalog tables: fetch, validate, build rows, store, record the run.

Each step has a module of its own: :mod:`qsite.pipeline.fetch` fetches the one
document (conditionally, with the validators stored last time),
:mod:`qsite.pipeline.site.export_format` validates it as a whole (format version 1),
:mod:`qsite.pipeline.site.catalog_rows` builds the rows, and :mod:`qsite.pipeline.store.catalog`
replaces ``courses``, ``sections``, ``glossary`` and ``site_totals`` in one
transaction, so readers see the old catalog or the new one and a bad export
costs nothing. This module runs them in order and records the run.
"""

from __future__ import annotations

import logging
import sqlite3

import sqlite_utils

from qsite.db.model import utc_now

from qsite.pipeline.site.catalog_rows import Rows, build_rows
from qsite.pipeline.site.export_format import ExportError, parse_export
from qsite.pipeline.fetch import Fetched, FetchError, fetch_one
from qsite.pipeline.report import RunReport
from qsite.pipeline.store import catalog as catalog_store
from qsite.pipeline.store import runs as runs_store
from qsite.pipeline.store import end_on_own_second, transaction

log = logging.getLogger("qsite.site")

KIND = "site"


def store_rows(db: sqlite_utils.Database, rows: Rows, source: str, fetched: Fetched) -> list[str]:
    """Replace what changed and remember the export's validators, in one transaction; return the datasets that changed."""
    now = utc_now()
    with transaction(db):
        changed = catalog_store.replace_catalog(
            db, courses=rows.courses, sections=rows.sections, glossary=rows.glossary, totals=rows.totals
        )
        runs_store.bump_versions(db, changed, now)
        state = catalog_store.ExportState(fetched.etag, fetched.last_modified, fetched.content_hash)
        catalog_store.save_export_state(db, source, state, now)
    if changed:
        end_on_own_second(db, changed)
    return changed


def ingest_site(db: sqlite_utils.Database, config, client_options: dict | None = None) -> RunReport:
    """Fetch, validate and store the site export named by ``config``; record the run.

    :param client_options: ``connect_timeout`` and ``read_timeout`` for
        :func:`qsite.pipeline.fetch.make_client`, ``max_bytes`` and ``deadline`` for
        :func:`qsite.pipeline.fetch.fetch`.
    :returns: the run's report; its status is ``ok``, ``warning`` (glossary
        entries skipped), ``unchanged`` or ``failed`` (nothing changed).
    """
    source = config.site_export_source
    # What is stored, logged and reported: no credentials, a file by its name (db/redact.py).
    public = config.site_export_public
    runs_store.close_interrupted_runs(db)
    run_id = runs_store.start_run(db, KIND, public)
    status, counts, error = "failed", {}, None
    try:
        stored = catalog_store.export_state(db, public)
        fetched = fetch_one(source, stored and stored.etag, stored and stored.last_modified, **(client_options or {}))
        if fetched.not_modified and stored:
            status = "unchanged"
        elif fetched.not_modified:
            error = f"{public}: answered 304 Not Modified but no export is stored"
        elif stored and fetched.content_hash == stored.content_hash:
            status = "unchanged"
        else:
            rows = build_rows(parse_export(fetched.body))
            changed = store_rows(db, rows, public, fetched)
            counts = rows.counts
            status = "warning" if rows.skipped else "ok"
            if rows.skipped:
                error = f"{len(rows.skipped)} glossary entr{'ies' if len(rows.skipped) != 1 else 'y'} skipped:\n  " + "\n  ".join(rows.skipped)
            log.info("site export %s: changed %s", public, ", ".join(changed) or "nothing")
    except (FetchError, ExportError) as exc:
        error = str(exc)
    except sqlite3.Error as exc:
        error = f"database error, nothing changed: {exc}"
    except Exception as exc:  # a run must never end without its ingest_runs row
        log.exception("site export %s: unexpected error", public)
        error = f"unexpected error, nothing changed: {type(exc).__name__}: {exc}"
    runs_store.finish_run(db, run_id, status, counts, error)
    report = RunReport(KIND, public, status, counts, error)
    # A success is the caller's to print (`qsite ingest` echoes each report once, as for the news
    # sources); a failure is also a warning in the log, which the scheduler's output is.
    (log.warning if report.failed else log.debug)("%s", report.line())
    return report
