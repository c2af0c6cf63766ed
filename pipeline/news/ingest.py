"""News ingestion: configured feeds to rows in ``news``, one source at a time.

The data flows one way: :mod:`qsite.pipeline.fetch` fetches every due source
concurrently (one httpx client), :mod:`qsite.pipeline.news.parse_pool` has
:mod:`qsite.pipeline.news.feeds` parse what changed (in worker processes when there is
enough of it, or a body big enough that its parse needs a deadline) and
:mod:`qsite.pipeline.news.normalise` makes each entry an item (and tags it).
:mod:`qsite.pipeline.news.policy` decides what is due, what changed and how long a
failing source waits; :mod:`qsite.pipeline.store` writes the outcome, each source
all or nothing, several sources to a transaction (:class:`qsite.pipeline.store.Batch`).
This module runs those steps in order.

A source that fails (including a parse that runs past its deadline, whose
worker is killed, or a database that refuses its outcome) never stops the
others and never changes its earlier items; a failed fetch or parse backs off
exponentially (capped at a day, never giving up) unless the publisher said
410 Gone, which disables it. A 304, or a body whose hash is unchanged, costs
one small update and no parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Callable

import sqlite_utils

from qsite.config import Config, SourceConfig, is_url
from qsite.db.model import NEWS, format_time

from qsite.pipeline.news import policy
from qsite.pipeline.news.feeds import FeedJob, FeedResult
from qsite.pipeline.fetch import Fetched, FetchError, fetch, make_client, split_options
from qsite.pipeline.news.parse_pool import PARSE_DEADLINE, PARSE_MEMORY, ParsePool
from qsite.pipeline.report import RunReport
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import runs as runs_store
from qsite.pipeline.store import sources as sources_store
from qsite.pipeline.store import Batch, end_on_own_second, transaction

log = logging.getLogger("qsite.news")

KIND = NEWS
#: Fetches in flight at once. Below the client's connection limit, because httpcore
#: rescans its whole queue of waiting requests on every change (quadratic in the queue).
MAX_CONCURRENT_FETCHES = 16
#: Seconds the sources written since the last commit wait for the next, at most: a sweep's
#: store commits a few times a second, not once a source (a commit costs more than a source's
#: rows; :class:`qsite.pipeline.store.Batch`), and what it wrote is visible this late at most.
COMMIT_SECONDS = 0.5


@dataclass
class _Outcome:
    """What happened to one due source before anything is written."""

    fetched: Fetched | None = None
    error: FetchError | None = None
    content_hash: str | None = None
    result: FeedResult | None = None

    @property
    def unchanged(self) -> bool:
        return self.error is None and self.result is None


def sync_sources(db: sqlite_utils.Database, config: Config) -> dict[str, dict]:
    """Bring the ``sources`` table in line with the config and return each configured source's row.

    A new source is inserted; a moved or retagged one is reset as
    :func:`qsite.pipeline.news.policy.source_change` explains. Sources no longer
    configured keep their row and items but are not fetched.
    """
    rows = sources_store.stored_sources(db)
    changes = [(policy.source_change(source, rows.get(source.name)), source) for source in config.news.sources]
    changes = [(change, source) for change, source in changes if change]
    if changes:
        with transaction(db):
            for change, source in changes:
                if change == policy.NEW:
                    sources_store.add_source(db, source.name, source.public_url, source.tag)
                elif change == policy.MOVED:
                    sources_store.move_source(db, source.name, source.public_url, source.tag)
                else:
                    sources_store.retag_source(db, source.name, source.tag)
        rows = sources_store.stored_sources(db)
    return {source.name: rows[source.name] for source in config.news.sources}


def ingest_news(
    db: sqlite_utils.Database,
    config: Config,
    progress: Callable[[RunReport], None] | None = None,
    client_options: dict | None = None,
    parse_workers: int | None = None,
    parse_deadline: float = PARSE_DEADLINE,
    parse_memory: int = PARSE_MEMORY,
    now: datetime | None = None,
    now_asked: bool = False,
) -> list[RunReport]:
    """Fetch every due news source, store what changed and return one report per configured source.

    A source backing off after a failure is due again once its file changes, or with ``now_asked``
    (every enabled source, the back-off ignored: the operator says the feed is fixed).

    :param progress: called with each source's report as soon as it is stored, in config order.
    :param client_options: ``connect_timeout`` and ``read_timeout`` for :func:`qsite.pipeline.fetch.make_client`,
        and ``max_bytes`` and ``deadline`` for each :func:`qsite.pipeline.fetch.fetch`.
    :param parse_workers: processes to parse in (:class:`qsite.pipeline.news.parse_pool.ParsePool`); ``None`` picks
        by the amount of work, 0 parses in-process all but the biggest bodies.
    :param parse_deadline: seconds a pooled parse may take before its source fails.
    :param parse_memory: bytes of memory a pool worker may add to what it inherits before its parse fails.
    :param now: the run's time (UTC), by default the clock's: what is due, the time undated entries are
        first seen at and the retention cutoff go by it. The times of changes (``updated_at``) are always the clock's.
    """
    started = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    rows = sync_sources(db, config)
    due = [
        source for source in config.news.sources
        if policy.is_due(rows[source.name], format_time(started), _file_modified_at(config, source), now_asked)
    ]
    sweep = _Sweep(db, config, rows, started, _start_runs(db, due, format_time(started)), news_store.sources_with_unclaimed_items(db))
    parser = ParsePool(parse_workers, len(due), parse_deadline, parse_memory)
    reports = asyncio.run(_fetch_and_store(sweep, due, parser, split_options(client_options or {}), progress))
    pruned = _prune(db, config, started)
    if pruned or any(report.counts.get("new") or report.counts.get("updated") for report in reports):
        end_on_own_second(db, (NEWS,))  # no event loop here: asyncio.run has returned
    return reports


def _file_modified_at(config: Config, source: SourceConfig) -> str | None:
    """When a source that is a file was last modified (stored time format); None for a URL or a missing file."""
    location = config.source_location(source)
    if is_url(location):
        return None
    try:
        return format_time(datetime.fromtimestamp(os.stat(location).st_mtime, timezone.utc).replace(microsecond=0))
    except OSError:
        return None


@dataclass
class _Sweep:
    """What every step of one run over the sources shares."""

    db: sqlite_utils.Database
    config: Config
    #: Each configured source's stored row, as it was when the run started.
    rows: dict[str, dict]
    started: datetime
    #: The ``ingest_runs`` id of each due source.
    run_ids: dict[str, int]
    #: The sources whose items stored under the old rules are not all claimed yet.
    legacy: set[str] = field(default_factory=set)

    @property
    def now(self) -> str:
        return format_time(self.started)


def _start_runs(db: sqlite_utils.Database, due: list[SourceConfig], now: str) -> dict[str, int]:
    run_ids = {}
    if due:
        with transaction(db):
            runs_store.close_interrupted_runs(db)
            for source in due:
                run_ids[source.name] = runs_store.start_run(db, KIND, source.name, now)
    return run_ids


async def _fetch_and_store(sweep: _Sweep, due: list[SourceConfig], parser: ParsePool, options: tuple[dict, dict], progress) -> list[RunReport]:
    client_options, fetch_options = options
    reports = []
    batch = Batch(sweep.db, partial(_write, sweep), partial(_refused, sweep), partial(_store, sweep), COMMIT_SECONDS)

    def commit():
        for report in batch.commit():
            reports.append(report)
            if progress:
                progress(report)

    slots = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)
    # Building a client loads the CA bundle (tens of ms): only when some source is on the web.
    web = any(is_url(sweep.config.source_location(source)) for source in due)
    # The pool stops inside the event loop, before asyncio.run cancels what is left of an aborted run.
    with parser, batch:
        async with make_client(**client_options) if web else contextlib.nullcontext() as client:
            tasks = {
                source.name: asyncio.ensure_future(_fetch_and_parse(sweep, source, client, slots, parser, fetch_options))
                for source in due
            }
            # Written in config order, so that of two sources carrying one story
            # the one listed first keeps it, whatever order the fetches finish in.
            # Several sources in one transaction (Batch): what the batch holds is committed when
            # it has been open COMMIT_SECONDS, or before the run would wait longer for a fetch or parse.
            for source in sweep.config.news.sources:
                if source.name not in tasks:
                    batch.add(_not_due_report(source, sweep.rows[source.name]))
                    continue
                task = tasks[source.name]
                if not task.done():
                    await asyncio.wait([task], timeout=batch.time_left())
                    if not task.done():
                        commit()
                batch.write((source, await task))
                if not batch.time_left():
                    commit()
            commit()
    return reports


def _not_due_report(source: SourceConfig, row: dict) -> RunReport:
    if row["disabled"]:
        return RunReport(KIND, source.name, "disabled", error=row["last_error"] or "disabled")
    return RunReport(KIND, source.name, "skipped", error=f"backing off until {row['next_fetch_at']}")


async def _fetch_and_parse(sweep: _Sweep, source: SourceConfig, client, slots, parser: ParsePool, fetch_options) -> _Outcome:
    row = sweep.rows[source.name]
    try:
        async with slots:
            location = sweep.config.source_location(source)
            fetched = await fetch(client, location, row["etag"], row["last_modified"], **fetch_options)
    except FetchError as exc:
        return _Outcome(error=exc)
    if fetched.not_modified:
        return _Outcome(fetched, content_hash=row["content_hash"])
    content_hash = policy.content_key(source, fetched.content_hash)
    if content_hash == row["content_hash"]:
        return _Outcome(fetched, content_hash=content_hash)
    job = FeedJob(
        source=source.name,
        tag=source.tag,
        rules=tuple((rule.match, rule.tag) for rule in source.rules),
        body=fetched.body,
        headers=fetched.headers,
        location=fetched.location,
        seen_at=sweep.now,
        legacy=source.name in sweep.legacy,
    )
    return _Outcome(fetched, content_hash=content_hash, result=await parser.read(job))


def _store(sweep: _Sweep, stored: tuple[SourceConfig, _Outcome]) -> RunReport:
    """Write one source's outcome in a transaction of its own and return its report.

    When the database refuses the outcome (a full disk, a constraint), the
    transaction is rolled back, the failure recorded in a transaction of its
    own, and the run goes on with the next source. Only when even that cannot
    be written does the error end the run. What a source of a :class:`~qsite.pipeline.store.Batch`
    comes to when the batch cannot keep it apart from the others.
    """
    try:
        with transaction(sweep.db):
            return _write(sweep, stored)
    except sqlite3.Error as exc:
        with transaction(sweep.db):
            return _refused(sweep, stored, exc)


def _refused(sweep: _Sweep, stored: tuple[SourceConfig, _Outcome], exc: sqlite3.Error) -> RunReport:
    """Write that the database refused a source's outcome (nothing of it written) and return its report."""
    source = stored[0]
    message = f"{sweep.config.database_path}: cannot write the database: {exc}; nothing of this source changed"
    return _write_failure(sweep, source, policy.store_failure(sweep.rows[source.name], message))


def _write(sweep: _Sweep, stored: tuple[SourceConfig, _Outcome]) -> RunReport:
    """Write one source's outcome (its failure, if the fetch or parse failed) and return its report; no transaction of its own."""
    source, outcome = stored
    error = outcome.error.args[0] if outcome.error else (outcome.result.error if outcome.result else None)
    if error:
        failure = policy.fetch_failure(
            sweep.rows[source.name],
            error,
            sweep.started,
            sweep.config.news.every,
            gone=bool(outcome.error and outcome.error.gone),
            retry_after=outcome.error.retry_after if outcome.error else None,
        )
        return _write_failure(sweep, source, failure)
    return _write_outcome(sweep, source, outcome)


def _write_outcome(sweep: _Sweep, source: SourceConfig, outcome: _Outcome) -> RunReport:
    db, now = sweep.db, sweep.now
    counts: dict[str, int] = {}
    status, warning = "unchanged", None
    if not outcome.unchanged:
        result = outcome.result
        known = news_store.known_items(db, source.name, result.items)
        cutoff = policy.retention_cutoff(sweep.config.news.retention_days, sweep.started)
        first_read = not news_store.holds_items(db, source.name)
        changes = policy.merge_items(result.items, known, source.name, cutoff, first_read=first_read, seen_at=now)
        if changes.new:
            news_store.insert_items(db, source.name, changes.new, now)
        if changes.updated:
            news_store.update_items(db, changes.updated)
        if changes.claimed:
            news_store.claim_items(db, changes.claimed)
        counts = changes.counts
        counts["skipped"] += result.skipped
        if result.skipped:
            # The reason, in the run's audit row (ingest_runs.counts) and report line.
            counts["skipped_no_link"] = result.skipped
        if result.empty:
            # Entries with nothing in them (a stray <item/>) are no stories: not skipped ones either.
            counts["empty"] = result.empty
        status, warning = ("warning", result.warning) if result.warning else ("ok", None)
        if changes.new or changes.updated:
            runs_store.bump_version(db, NEWS)  # when it is written, not when the sweep began: its Last-Modified
    fetched = outcome.fetched
    sources_store.record_fetch(
        db,
        source.name,
        etag=fetched.etag,
        last_modified=fetched.last_modified,
        content_hash=outcome.content_hash,
        fetched_at=now,
        status=status,
        warning=warning,
    )
    runs_store.finish_run(db, sweep.run_ids[source.name], status, counts, warning)
    return RunReport(KIND, source.name, status, counts, warning)


def _write_failure(sweep: _Sweep, source: SourceConfig, failure: policy.Failure) -> RunReport:
    sources_store.record_failure(
        sweep.db,
        source.name,
        tried_at=sweep.now,
        error=failure.error,
        consecutive_failures=failure.consecutive_failures,
        next_fetch_at=failure.next_fetch_at,
        disabled=failure.disabled,
    )
    runs_store.finish_run(sweep.db, sweep.run_ids[source.name], "failed", {}, failure.error)
    log.warning("news %s: %s", source.name, failure.error)
    return RunReport(KIND, source.name, "failed", {}, failure.shown)


def _prune(db, config: Config, started: datetime) -> int:
    """Delete items published before the retention window; return how many went."""
    cutoff = policy.retention_cutoff(config.news.retention_days, started)
    if not cutoff:
        return 0
    with transaction(db):
        deleted = news_store.delete_published_before(db, cutoff)
        if deleted:
            runs_store.bump_version(db, NEWS)
    if deleted:
        log.info("news: pruned %d items published before %s (retention_days %d)", deleted, cutoff, config.news.retention_days)
    return deleted
