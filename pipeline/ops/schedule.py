"""The ingestion daemon: ``qsite schedule`` runs the site export and the news sweep on their intervals.

APScheduler 3 does the timing; this module decides how the jobs behave:

- Two interval jobs, ``site`` every ``site_export.every`` and ``news`` every
  ``news.every``, each with a little jitter (so replicas or restarts don't
  stampede a feed host), ``coalesce=True`` (a backlog of missed runs is one
  run), ``max_instances=1`` and a misfire grace time, and a first run at
  start-up.
- Jobs run one at a time on a single worker thread, and each is a
  :func:`qsite.pipeline.ops.ingest.run_ingest`: it takes the database's writer lock
  (:mod:`qsite.pipeline.store.lock`), so the scheduler, cron and a manual ``qsite ingest``
  never write at once, and opens its own database connection and closes it
  afterwards: SQLite connections belong to one thread, and a fresh one sees
  the latest schema.
- A job that raises is logged and the scheduler carries on; the next interval
  tries again.
- SIGTERM and SIGINT stop the scheduler: nothing new starts, a running ingest
  gets ``grace`` seconds to finish its transaction; past that the process exits
  anyway and SQLite rolls the open transaction back, so no half-written data
  is ever visible.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from qsite.config import Config

from qsite.pipeline.ops import DEFAULT_GRACE
from qsite.pipeline.ops.ingest import NEWS, SITE, run_ingest
from qsite.pipeline.ops.lifeline import PARENT_ENV
from qsite.pipeline.store.lock import DEFAULT_WAIT, WriterLockTimeout
from qsite.pipeline.ops.publish import publisher_for
from qsite.pipeline.report import RunReport
from qsite.pipeline.store import open_database

log = logging.getLogger("qsite.schedule")


#: Seconds between restarts of a scheduler child that died under ``qsite up``.
RESTART_DELAY = 30.0

#: Jitter is this share of the interval, capped at MAX_JITTER seconds.
JITTER_SHARE = 0.1
MAX_JITTER = 300.0


def log_reports(reports: list[RunReport], logger: logging.Logger = log) -> None:
    """One log line per news source that did not fail (the site export and failures log their own)."""
    for report in reports:
        if report.kind == "news" and not report.failed:
            logger.log(logging.WARNING if report.status == "warning" else logging.INFO, "%s", report.line())


@dataclass
class JobSpec:
    """One scheduled job: a name for the logs, its interval in seconds, and what it runs."""

    name: str
    every: int
    run: Callable[[Config, float], list[RunReport]]


def default_jobs(config: Config) -> list[JobSpec]:
    """The site export on its interval, and the news sweep on its own when there are sources."""
    jobs = [JobSpec(SITE, config.site_export.every, functools.partial(run_ingest, kinds=(SITE,)))]
    if config.news.sources:
        jobs.append(JobSpec(NEWS, config.news.every, functools.partial(run_ingest, kinds=(NEWS,))))
    return jobs


@dataclass
class _Activity:
    """What the job threads are doing, so a stop can wait for them."""

    stopping: threading.Event = field(default_factory=threading.Event)
    idle: threading.Condition = field(default_factory=threading.Condition)
    running: int = 0
    runs: int = 0
    failures: int = 0


class Scheduler:
    """The jobs of :func:`default_jobs` (or the given ones) on an APScheduler ``BackgroundScheduler``.

    :param wait: seconds a job waits for the writer lock before that run fails.
    :param run_now: run every job once at start-up (in list order), then on its interval.
    :param grace: seconds :meth:`stop` lets a running job finish.
    """

    def __init__(
        self,
        config: Config,
        *,
        jobs: list[JobSpec] | None = None,
        wait: float = DEFAULT_WAIT,
        run_now: bool = True,
        grace: float = DEFAULT_GRACE,
    ):
        self.config = config
        self.jobs = jobs if jobs is not None else default_jobs(config)
        self.wait = wait
        self.run_now = run_now
        self.grace = grace
        self.activity = _Activity()
        # With `snapshots.store` set, every job is followed by a publish (a heartbeat at least: pipeline/ops/publish.py).
        self.publish = publisher_for(config)
        # One worker: the jobs share one database and one writer lock, so running
        # them side by side would only make one wait for the other.
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            timezone=timezone.utc,
        )

    def start(self) -> None:
        now = datetime.now(timezone.utc)
        for position, job in enumerate(self.jobs):
            jitter = min(job.every * JITTER_SHARE, MAX_JITTER)
            # Start-up runs keep list order (site before news, as `ingest all` does).
            first = now + timedelta(milliseconds=10 * position) if self.run_now else None
            self.scheduler.add_job(
                self._run,
                IntervalTrigger(seconds=job.every, jitter=jitter or None, timezone=timezone.utc),
                args=[job],
                id=job.name,
                name=job.name,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=max(job.every, 1),
                **({"next_run_time": first} if first else {}),
            )
            log.info("job %s: every %s s (jitter up to %.1f s)%s", job.name, job.every, jitter, ", first run now" if first else "")
        self.scheduler.start()

    def _run(self, job: JobSpec) -> None:
        activity = self.activity
        if activity.stopping.is_set():
            return  # queued before the stop; don't start new work
        with activity.idle:
            activity.running += 1
        try:
            log.info("job %s: starting", job.name)
            reports = job.run(self.config, self.wait)
            log_reports(reports)
            failed = [report for report in reports if report.failed]
            if failed:
                activity.failures += 1
            log.info("job %s: done, %d source(s), %d failed", job.name, len(reports), len(failed))
            if self.publish is not None:
                self.publish()
        except Exception as exc:  # a failing job must not stop the scheduler
            activity.failures += 1
            log.error("job %s: failed: %s", job.name, exc)
            log.debug("job %s: traceback", job.name, exc_info=True)
        finally:
            with activity.idle:
                activity.running -= 1
                activity.runs += 1
                activity.idle.notify_all()

    def next_runs(self) -> dict[str, datetime | None]:
        return {job.id: job.next_run_time for job in self.scheduler.get_jobs()}

    def stop(self) -> bool:
        """Stop scheduling and give a running job ``grace`` seconds; True if nothing is left running."""
        activity = self.activity
        activity.stopping.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        with activity.idle:
            finished = activity.idle.wait_for(lambda: activity.running == 0, timeout=self.grace)
        if finished:
            log.info("scheduler stopped")
        else:
            log.warning(
                "scheduler stopping with a job still running after %g s; its open transaction is rolled back", self.grace
            )
        return finished


def run_forever(scheduler: Scheduler, stop_event: threading.Event | None = None) -> bool:
    """Run ``scheduler`` in the foreground until SIGTERM/SIGINT (or ``stop_event``); return :meth:`Scheduler.stop`'s answer."""
    stop_event = stop_event or threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():

        def on_signal(signum, frame):
            log.info("received %s, stopping", signal.Signals(signum).name)
            stop_event.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        scheduler.start()
        # A timed wait keeps the main thread responsive to signals.
        while not stop_event.wait(0.5):
            pass
    finally:
        clean = scheduler.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return clean


def qsite_command(*args: str) -> list[str]:
    """The argv of a ``qsite`` child process running ``args`` with this interpreter."""
    return [sys.executable, "-m", "qsite", *args]


def _stop_child(process: subprocess.Popen, name: str, timeout: float) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop within %g s; killing it", name, timeout)
            process.kill()
            process.wait()
    return process.returncode


def run_up(config: Config, *, host: str, port: int, wait: float | None = None, log_level: int = logging.INFO) -> int:
    """``qsite up``: migrate, ingest once, then ``qsite schedule`` and ``qsite serve`` as child processes.

    The server runs in the foreground; Ctrl-C (or SIGTERM) stops both children.
    Returns the exit status: the server's, or 0 after a requested stop.
    """
    wait = DEFAULT_WAIT if wait is None else wait
    open_database(config.database_path).close()
    log.info("database %s: schema up to date", config.database_path)
    try:
        reports = run_ingest(config, wait)
    except WriterLockTimeout as exc:
        log.error("%s", exc)
        return 1
    log_reports(reports)
    if any(report.failed for report in reports):
        log.warning("some sources failed; serving the data already there, the scheduler retries")

    common = ["--config", str(config.path), "--db", str(config.database_path), "--log-level", logging.getLevelName(log_level)]
    serve_argv = qsite_command("serve", *common, "--host", host, "--port", str(port))
    schedule_argv = qsite_command("schedule", *common, "--no-run-now", "--wait", str(wait))

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)}
    # The children stop when this process ends, even by SIGKILL (pipeline/ops/lifeline.py).
    child_env = {**os.environ, PARENT_ENV: str(os.getpid())}
    scheduler = subprocess.Popen(schedule_argv, env=child_env)
    server = subprocess.Popen(serve_argv, env=child_env)
    log.info("serving on http://%s:%d/ (scheduler pid %d, server pid %d); Ctrl-C stops both", host, port, scheduler.pid, server.pid)
    status = 0
    restart_at = time.monotonic() + RESTART_DELAY
    try:
        while not stop.wait(0.5):
            if server.poll() is not None:
                status = server.returncode
                log.error("the server exited with status %d", status)
                break
            if scheduler.poll() is not None and time.monotonic() >= restart_at:
                # Keep serving; restart the scheduler, at most once per RESTART_DELAY.
                log.error("the scheduler exited with status %d; restarting it", scheduler.returncode)
                scheduler = subprocess.Popen(schedule_argv, env=child_env)
                restart_at = time.monotonic() + RESTART_DELAY
    finally:
        _stop_child(server, "the server", 10)
        _stop_child(scheduler, "the scheduler", DEFAULT_GRACE + 5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    log.info("stopped")
    return status
