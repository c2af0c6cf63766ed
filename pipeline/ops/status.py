"""``qsite status``: what the pipeline last did, read from the database's own bookkeeping.

Everything comes from tables the ingests keep up to date in the same
transactions as the data (``sources``, ``ingest_runs``, ``export_state``,
``site_totals``, ``data_versions``), so the status never disagrees with what
the API serves.

The JSON form (``--json``) is a stable interface for monitoring; its keys are
documented in the README's operations section and only ever grow:

``database``, ``generated_at``, ``ingest_running``,
``data_version`` {``version``, ``changed_at``, ``datasets`` {name: {``version``, ``changed_at``}}},
``site_export`` {``source``, ``every``, ``fetched_at``, ``last_run``, ``last_success_at``},
``totals`` {``courses``, ``slides``, ``quizzes``, ``question_bank_size``, ``glossary_terms``, ``news_items``, ``exported_at``},
``sources`` [{``name``, ``url``, ``tag``, ``configured``, ``disabled``, ``last_fetch_at``, ``last_status``,
``last_error``, ``consecutive_failures``, ``next_fetch_at``, ``items``}].

A source's ``next_fetch_at`` here is computed by :func:`qsite.pipeline.news.policy.next_fetch`, not the
column of that name (which only holds a failure's backoff).
"""

from __future__ import annotations

import json

import sqlite_utils
from tabulate import tabulate

from qsite.config import Config
from qsite.db.model import utc_now
from qsite.db.redact import redact_url

from qsite.pipeline.store.lock import lock_is_held
from qsite.pipeline.news.policy import next_fetch
from qsite.pipeline.text import shorten
from qsite.pipeline.site.ingest import KIND as SITE
from qsite.pipeline.store import sources as sources_store
from qsite.pipeline.store import status as stored

#: ``ingest_runs`` statuses of a run that worked.
SUCCESS = ("ok", "unchanged", "warning")


def _run(row: dict | None) -> dict | None:
    if row is None:
        return None
    try:
        counts = json.loads(row["counts"] or "{}")
    except ValueError:
        counts = {}
    return {
        "id": row["id"],
        "status": row["status"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "counts": counts,
        "error": row["error"],
    }


def _source(row: dict, items: int, every: int) -> dict:
    entry = {
        "name": row["name"],
        "url": row["url"],
        "tag": row["tag"],
        "configured": False,
        "disabled": bool(row["disabled"]),
        "last_fetch_at": row["last_fetch_at"],
        "last_status": row["last_status"],
        "last_error": row["last_error"],
        "consecutive_failures": row["consecutive_failures"],
        "next_fetch_at": row["next_fetch_at"],
        "items": items,
    }
    entry["next_fetch_at"] = next_fetch(entry, every)
    return entry


def collect_status(db: sqlite_utils.Database, config: Config) -> dict:
    """The status of the database ``db`` configured by ``config``, as a JSON-ready dict."""
    datasets = stored.data_versions(db)
    data_version = {
        # The sum only ever grows, so it orders snapshots of this database.
        "version": sum(item["version"] for item in datasets.values()),
        "changed_at": max((item["changed_at"] for item in datasets.values()), default=None),
        "datasets": datasets,
    }
    last_success = stored.last_run(db, SITE, SUCCESS)

    totals = dict.fromkeys(stored.TOTAL_COLUMNS)
    totals.update(stored.site_totals(db) or {})
    totals["news_items"] = stored.news_count(db)

    items = stored.items_per_source(db)
    rows = sources_store.stored_sources(db)
    by_name = {name: _source(row, items.get(name, 0), config.news.every) for name, row in rows.items()}
    # Configured sources first, in config order; then any the config no longer lists.
    sources = []
    for source in config.news.sources:
        entry = by_name.pop(source.name, None) or {
            "name": source.name,
            "url": source.public_url,
            "tag": source.tag,
            "disabled": False,
            "last_fetch_at": None,
            "last_status": None,
            "last_error": None,
            "consecutive_failures": 0,
            "next_fetch_at": None,
            "items": 0,
        }
        entry["configured"] = True
        sources.append(entry)
    sources.extend(by_name.values())

    return {
        "database": str(config.database_path),
        "generated_at": utc_now(),
        "ingest_running": lock_is_held(config.database_path),
        "data_version": data_version,
        "site_export": {
            "source": redact_url(config.site_export.source),  # no credentials; a path stays a path
            "every": config.site_export.every,
            "fetched_at": stored.export_fetched_at(db),
            "last_run": _run(stored.last_run(db, SITE)),
            "last_success_at": last_success["finished_at"] if last_success else None,
        },
        "totals": totals,
        "sources": sources,
    }


def _table(headers: list[str], rows: list[list[str]], framed: bool) -> list[str]:
    # "simple" is plain text that diffs and greps well (a pipe, a log, cron mail);
    # a terminal gets rounded frames that keep wide columns apart.
    return tabulate(rows, headers=headers, tablefmt="rounded_outline" if framed else "simple", disable_numparse=True).splitlines()


def _dash(value) -> str:
    return "-" if value is None or value == "" else str(value)


def _short(text: str | None, width: int) -> str:
    """``text`` on one line, shortened to ``width`` characters."""
    return shorten(" ".join((text or "").split()), width)


def format_status(status: dict, framed: bool = False) -> str:
    """The status as a few readable lines and two tables.

    :param framed: draw the tables with frames (for a terminal); plain columns otherwise.
    """
    version = status["data_version"]
    lines = [
        f"database        {status['database']}",
        f"data version    {version['version']} (last change {_dash(version['changed_at'])})",
        f"ingest running  {'yes' if status['ingest_running'] else 'no'}",
        "",
    ]
    site = status["site_export"]
    run = site["last_run"]
    lines.append(f"site export     {site['source']} (every {site['every']} s)")
    if run:
        counts = ", ".join(f"{key} {value}" for key, value in run["counts"].items())
        lines.append(
            f"  last run      #{run['id']} {run['status']} at {_dash(run['finished_at'] or run['started_at'])}"
            + (f" ({counts})" if counts else "")
        )
        if run["error"]:
            lines.append(f"  error         {_short(run['error'], 100)}")
    else:
        lines.append("  last run      never")
    lines.append(f"  last success  {_dash(site['last_success_at'])}")
    lines.append("")

    totals = status["totals"]
    lines.extend(
        _table(
            ["courses", "slides", "quizzes", "question bank", "glossary terms", "news items", "exported at"],
            [
                [
                    _dash(totals["courses"]),
                    _dash(totals["slides"]),
                    _dash(totals["quizzes"]),
                    _dash(totals["question_bank_size"]),
                    _dash(totals["glossary_terms"]),
                    _dash(totals["news_items"]),
                    _dash(totals["exported_at"]),
                ]
            ],
            framed,
        )
    )
    lines.append("")

    if status["sources"]:
        rows = []
        for source in status["sources"]:
            state = _dash(source["last_status"])
            if source["disabled"]:
                state += " (disabled)"
            if not source["configured"]:
                state += " (not in config)"
            rows.append(
                [
                    source["name"],
                    source["tag"],
                    _dash(source["last_fetch_at"]),
                    state,
                    str(source["consecutive_failures"]),
                    _dash(source["next_fetch_at"]),
                    str(source["items"]),
                    _short(source["last_error"], 50) or "-",
                ]
            )
        lines.extend(_table(["source", "tag", "last fetch", "status", "failures", "next fetch", "items", "error"], rows, framed))
    else:
        lines.append("no news sources")
    return "\n".join(lines)
