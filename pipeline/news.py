"""News ingestion: configured feeds to rows in ``news``, one source at a time.

The data flows one way: :mod:`pipeline.fetch` fetches every due source
concurrently (one httpx client), :mod:`pipeline.feeds` parses what changed
(in a process pool when there is enough of it to pay for one, or when a body
is big enough that its parse needs a deadline) and
:mod:`pipeline.normalise` makes each entry an item; this module decides what
to fetch and writes the outcome, each source in its own transaction.

A source that fails (including a parse that runs past its deadline, whose
worker is killed) never stops the others and never changes its earlier
items; it backs off exponentially (capped at a day, never giving up) unless
the publisher said 410 Gone, which disables it. A 304, or a body whose hash
is unchanged, costs one small update and no parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from multiprocessing import get_context
from typing import Callable

import sqlite_utils
from pebble import ProcessExpired, ProcessPool

from config import Config, SourceConfig, is_url
from db.model import NEWS, format_time
from .feeds import FeedJob, FeedResult, read_feed
from .fetch import Fetched, FetchError, fetch, make_client
from .normalise import Item
from .store import RunReport, bump_version, close_interrupted_runs, finish_run, start_run, transaction

log = logging.getLogger("qsite.news")

KIND = NEWS
#: Longest wait between tries of a failing source; it is retried for ever.
MAX_BACKOFF = 24 * 3600
#: Fewer changed feeds than this are parsed in this process: a pool costs more than it saves.
POOL_MIN_FEEDS = 8
#: Seconds one feed's parse may take in a pool worker before the worker is killed and the source
#: failed. A normal feed parses at about 1.7 s per MiB, so only a hostile one (e.g. deep unclosed
#: nesting, about 6 s per MiB) gets near it within the fetcher's byte cap.
PARSE_DEADLINE = 30.0
#: Bodies this big or bigger are parsed in a pool worker, under :data:`PARSE_DEADLINE`, even in a
#: small run: a one-off pool costs 50-100 ms, under a tenth of a normal parse at this size, and a
#: smaller body cannot hold up the run for long (about 3 s for the worst document known).
IN_PROCESS_MAX_BYTES = 512 * 1024
#: Fetches in flight at once. Below the client's connection limit, because httpcore
#: rescans its whole queue of waiting requests on every change (quadratic in the queue).
MAX_CONCURRENT_FETCHES = 16
#: Options of :func:`ingest_news`'s ``client_options`` that go to each fetch rather than the client.
FETCH_OPTIONS = ("max_bytes", "deadline")


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


def settings_fingerprint(source: SourceConfig) -> str:
    """A short hash of what decides a source's items besides its bytes: URL, tag and rules.

    It prefixes the stored ``content_hash``, so changing any of them makes the
    next run parse the feed again even though its bytes did not change.
    """
    settings = json.dumps([source.url, source.tag, [[rule.match, rule.tag] for rule in source.rules]])
    return hashlib.sha256(settings.encode("utf-8")).hexdigest()[:12]


def sync_sources(db: sqlite_utils.Database, config: Config) -> dict[str, dict]:
    """Bring the ``sources`` table in line with the config and return each configured source's row.

    A new source is inserted; a source whose URL, tag or rules changed gets its
    validators cleared (so it is fetched and parsed afresh), and a changed URL
    also clears its failures and re-enables it. Sources no longer configured
    keep their row and items but are not fetched.
    """
    rows = {row["name"]: row for row in db.query("SELECT * FROM sources")}
    changes = []
    for source in config.news.sources:
        row = rows.get(source.name)
        fingerprint = settings_fingerprint(source)
        if row is None:
            changes.append(("insert", source, fingerprint))
        elif row["url"] != source.url:
            changes.append(("moved", source, fingerprint))
        elif row["tag"] != source.tag or (row["content_hash"] and not row["content_hash"].startswith(fingerprint + ":")):
            changes.append(("retag", source, fingerprint))
    if changes:
        with transaction(db):
            for change, source, _ in changes:
                if change == "insert":
                    db.execute("INSERT INTO sources (name, url, tag) VALUES (?, ?, ?)", [source.name, source.url, source.tag])
                elif change == "moved":
                    db.execute(
                        """UPDATE sources SET url = ?, tag = ?, etag = NULL, last_modified = NULL, content_hash = NULL,
                           consecutive_failures = 0, next_fetch_at = NULL, disabled = 0 WHERE name = ?""",
                        [source.url, source.tag, source.name],
                    )
                else:
                    db.execute(
                        "UPDATE sources SET tag = ?, etag = NULL, last_modified = NULL, content_hash = NULL WHERE name = ?",
                        [source.tag, source.name],
                    )
        rows = {row["name"]: row for row in db.query("SELECT * FROM sources")}
    return {source.name: rows[source.name] for source in config.news.sources}


def backoff_seconds(failures: int, every: int, retry_after: float | None = None) -> int:
    """How long a source that failed ``failures`` times in a row waits before its next try.

    ``every`` (the news interval) doubled per failure, capped at a day; a
    server's ``Retry-After`` is honoured when longer, within the same cap.
    """
    delay = min(MAX_BACKOFF, every * 2 ** max(0, failures - 1))
    if retry_after:
        delay = max(delay, min(MAX_BACKOFF, int(retry_after + 0.999)))
    return int(delay)


def ingest_news(
    db: sqlite_utils.Database,
    config: Config,
    progress: Callable[[RunReport], None] | None = None,
    client_options: dict | None = None,
    parse_workers: int | None = None,
    parse_deadline: float = PARSE_DEADLINE,
) -> list[RunReport]:
    """Fetch every due news source, store what changed and return one report per configured source.

    :param progress: called with each source's report as soon as it is stored, in config order.
    :param client_options: ``connect_timeout`` and ``read_timeout`` for :func:`pipeline.fetch.make_client`,
        and ``max_bytes`` and ``deadline`` for each :func:`pipeline.fetch.fetch`.
    :param parse_workers: processes to parse in; ``None`` picks by the amount of work, 0 parses in-process
        all bodies under :data:`IN_PROCESS_MAX_BYTES` (bigger ones go to a one-worker pool).
    :param parse_deadline: seconds a pooled parse may take before its source fails (:data:`PARSE_DEADLINE`).
    """
    started = datetime.now(timezone.utc).replace(microsecond=0)
    now = format_time(started)
    rows = sync_sources(db, config)
    return asyncio.run(
        _ingest(db, config, rows, started, now, progress, dict(client_options or {}), parse_workers, parse_deadline)
    )


async def _ingest(db, config, rows, started, now, progress, client_options, parse_workers, parse_deadline) -> list[RunReport]:
    fetch_options = {key: client_options.pop(key) for key in FETCH_OPTIONS if key in client_options}
    due = [s for s in config.news.sources if _is_due(rows[s.name], now)]
    run_ids = {}
    if due:
        with transaction(db):
            close_interrupted_runs(db)
            for source in due:
                run_ids[source.name] = start_run(db, KIND, source.name, now)
    parser = _Parser(parse_workers, len(due), parse_deadline)
    slots = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)
    reports = []
    try:
        # Building a client loads the CA bundle (tens of ms): only when some source is on the web.
        web = any(is_url(config.source_location(source)) for source in due)
        async with make_client(**client_options) if web else contextlib.nullcontext() as client:
            tasks = {
                source.name: asyncio.ensure_future(
                    _fetch_and_parse(client, slots, parser, config, source, rows[source.name], now, fetch_options)
                )
                for source in due
            }
            # Written in config order, so that of two sources carrying one story
            # the one listed first keeps it, whatever order the fetches finish in.
            for source in config.news.sources:
                if source.name in tasks:
                    outcome = await tasks[source.name]
                    report = _store(db, config, source, rows[source.name], outcome, run_ids[source.name], started)
                else:
                    report = _not_due_report(source, rows[source.name])
                reports.append(report)
                if progress:
                    progress(report)
    finally:
        parser.close()
    _prune(db, config, started)
    return reports


def _is_due(row: dict, now: str) -> bool:
    return not row["disabled"] and (row["next_fetch_at"] is None or row["next_fetch_at"] <= now)


def _not_due_report(source: SourceConfig, row: dict) -> RunReport:
    if row["disabled"]:
        return RunReport(KIND, source.name, "disabled", error=row["last_error"] or "disabled")
    return RunReport(KIND, source.name, "skipped", error=f"backing off until {row['next_fetch_at']}")


class _Parser:
    """Runs :func:`pipeline.feeds.read_feed` in this process, or in a pool (started on first need) under a deadline.

    A pooled parse that outlives the deadline has its worker killed (and
    replaced) by pebble; a worker that dies fails only the feed it was parsing.
    """

    def __init__(self, workers: int | None, due: int, deadline: float):
        if workers is None:
            cores = os.cpu_count() or 1
            workers = min(cores, 4) if cores > 1 and due >= POOL_MIN_FEEDS else 0
        self.workers = workers
        self.deadline = deadline
        self.pool: ProcessPool | None = None

    async def read(self, job: FeedJob) -> FeedResult:
        if not self.workers and len(job.body) < IN_PROCESS_MAX_BYTES:
            return read_feed(job)
        if self.pool is None:
            # fork: the workers inherit the imported parser instead of importing it again.
            self.pool = ProcessPool(self.workers or 1, context=get_context("fork"))
        future = self.pool.schedule(read_feed, (job,), timeout=self.deadline)
        try:
            return await asyncio.wrap_future(future)
        except TimeoutError:  # pebble's clock starts when a worker takes the job, not while it queues
            return FeedResult(error=f"parsing took longer than {self.deadline:g} s; the feed is too large or malformed")
        except ProcessExpired as exc:  # e.g. the kernel's out-of-memory killer
            how = f"killed by signal {-exc.exitcode}" if exc.exitcode < 0 else f"exit code {exc.exitcode}"
            return FeedResult(error=f"the parser process died ({how}); the feed may be too large or malformed")

    def close(self):
        """Stop the pool, if one was started: no worker outlives the run."""
        if self.pool is not None:
            self.pool.stop()
            self.pool.join()
            self.pool = None


async def _fetch_and_parse(client, slots, parser, config, source, row, now, fetch_options) -> _Outcome:
    try:
        async with slots:
            fetched = await fetch(client, config.source_location(source), row["etag"], row["last_modified"], **fetch_options)
    except FetchError as exc:
        return _Outcome(error=exc)
    if fetched.not_modified:
        return _Outcome(fetched, content_hash=row["content_hash"])
    content_hash = f"{settings_fingerprint(source)}:{fetched.content_hash}"
    if content_hash == row["content_hash"]:
        return _Outcome(fetched, content_hash=content_hash)
    job = FeedJob(
        source=source.name,
        tag=source.tag,
        rules=tuple((rule.match, rule.tag) for rule in source.rules),
        body=fetched.body,
        headers=fetched.headers,
        location=fetched.location,
        seen_at=now,
    )
    try:
        result = await parser.read(job)
    except Exception as exc:  # a worker that died (e.g. out of memory) fails this source only
        result = FeedResult(error=f"parser failed: {type(exc).__name__}: {exc}")
    return _Outcome(fetched, content_hash=content_hash, result=result)


def _store(db, config, source, row, outcome: _Outcome, run_id: int, started: datetime) -> RunReport:
    """Write one source's outcome in one transaction and return its report."""
    now = format_time(started)
    error = outcome.error.args[0] if outcome.error else (outcome.result.error if outcome.result else None)
    if error:
        return _store_failure(db, config, source, row, outcome, error, run_id, started)
    fetched = outcome.fetched
    counts: dict[str, int] = {}
    status = "unchanged"
    warning = None
    with transaction(db):
        if not outcome.unchanged:
            result = outcome.result
            counts = _upsert_items(db, source.name, result.items, now, _cutoff(config, started))
            counts["skipped"] += result.skipped
            status, warning = ("warning", result.warning) if result.warning else ("ok", None)
            if counts["new"] or counts["updated"]:
                bump_version(db, NEWS, now)
        db.execute(
            """UPDATE sources SET etag = ?, last_modified = ?, content_hash = ?, last_fetch_at = ?,
               last_status = ?, last_error = ?, consecutive_failures = 0, next_fetch_at = NULL WHERE name = ?""",
            [fetched.etag, fetched.last_modified, outcome.content_hash, now, status, warning, source.name],
        )
        finish_run(db, run_id, status, counts, warning)
    return RunReport(KIND, source.name, status, counts, warning)


def _store_failure(db, config, source, row, outcome, error, run_id, started) -> RunReport:
    failures = row["consecutive_failures"] + 1
    gone = bool(outcome.error and outcome.error.gone)
    if gone:
        error = f"{error}: the feed is gone; source disabled (its items are kept)"
        next_fetch = None
    else:
        retry_after = outcome.error.retry_after if outcome.error else None
        next_fetch = format_time(started + timedelta(seconds=backoff_seconds(failures, config.news.every, retry_after)))
    with transaction(db):
        # Validators stay as they were: the next try must not be answered with a 304 for a body never stored.
        db.execute(
            """UPDATE sources SET last_fetch_at = ?, last_status = 'failed', last_error = ?, consecutive_failures = ?,
               next_fetch_at = ?, disabled = ? WHERE name = ?""",
            [format_time(started), error, failures, next_fetch, int(gone or row["disabled"]), source.name],
        )
        finish_run(db, run_id, "failed", {}, error)
    log.warning("news %s: %s", source.name, error)
    if not gone:
        error += f" (failure {failures} in a row; next try after {next_fetch})"
    return RunReport(KIND, source.name, "failed", {}, error)


def _cutoff(config: Config, started: datetime) -> str | None:
    days = config.news.retention_days
    return format_time(started - timedelta(days=days)) if days else None


def _upsert_items(db, source: str, items: list[Item], now: str, cutoff: str | None) -> dict[str, int]:
    """Insert new items and update changed ones with one bulk read and two ``executemany``.

    An update changes title, summary and tag only: ``published_at`` and
    ``first_seen_at`` never move. An item another source already holds is
    left to that source.
    """
    counts = {"new": 0, "updated": 0, "unchanged": 0, "skipped": 0, "duplicates": 0}
    existing = {
        row[0]: row[1:]
        for row in db.execute(
            "SELECT id, source, title, summary, tag FROM news WHERE id IN (SELECT value FROM json_each(?))",
            [json.dumps([item.id for item in items])],
        )
    }
    inserts, updates, seen = [], [], set()
    for item in items:
        if item.id in seen:
            counts["duplicates"] += 1
            continue
        seen.add(item.id)
        old = existing.get(item.id)
        if old is None:
            if cutoff and item.published_at < cutoff:
                counts["skipped"] += 1  # would be pruned at once
                continue
            inserts.append((item.id, item.url, item.title, item.summary, source, item.tag, item.published_at, now, now))
        elif old[0] != source:
            counts["duplicates"] += 1
        elif old[1:] != (item.title, item.summary, item.tag):
            updates.append((item.title, item.summary, item.tag, now, item.id))
        else:
            counts["unchanged"] += 1
    if inserts:
        db.conn.executemany(
            """INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            inserts,
        )
    if updates:
        db.conn.executemany("UPDATE news SET title = ?, summary = ?, tag = ?, updated_at = ? WHERE id = ?", updates)
    counts["new"], counts["updated"] = len(inserts), len(updates)
    return counts


def _prune(db, config: Config, started: datetime) -> int:
    """Delete items published before the retention window; return how many went."""
    cutoff = _cutoff(config, started)
    if not cutoff:
        return 0
    with transaction(db):
        deleted = db.execute("DELETE FROM news WHERE published_at < ?", [cutoff]).rowcount
        if deleted:
            bump_version(db, NEWS, format_time(started))
    if deleted:
        log.info("news: pruned %d items published before %s (retention_days %d)", deleted, cutoff, config.news.retention_days)
    return deleted
