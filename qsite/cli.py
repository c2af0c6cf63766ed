"""The ``qsite`` command line.

Exit statuses, the same for every command: 0 success, 1 a run that failed
(the data already there is kept), 2 a usage or config error.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import sys
from contextlib import contextmanager

import click

from config import ConfigError, load_config
from db.model import VERSION
from pipeline.lock import DEFAULT_WAIT, WriterLockTimeout, writer_lock
from pipeline.schedule import DEFAULT_GRACE
from pipeline.store import StoreError, open_database

log = logging.getLogger("qsite")

EXIT_FAILED = 1
EXIT_USAGE = 2


def common_options(command):
    """``--config``, ``--db`` and ``--log-level``, which every command takes.

    The wrapped command receives a loaded ``config`` instead of the raw options;
    a bad config ends the command with its message and exit status 2.
    """

    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        envvar="QSITE_CONFIG",
        help="Config YAML (default: the bundled one). Env: QSITE_CONFIG.",
    )
    @click.option("--db", "db_path", type=click.Path(dir_okay=False), envvar="QSITE_DB", help="Database file; overrides the config. Env: QSITE_DB.")
    @click.option(
        "--log-level",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        envvar="QSITE_LOG_LEVEL",
        default="INFO",
        show_default=True,
        help="Logging level. Env: QSITE_LOG_LEVEL.",
    )
    @functools.wraps(command)
    def wrapper(config_path, db_path, log_level, **kwargs):
        setup_logging(log_level)
        try:
            config = load_config(config_path, database=db_path)
        except ConfigError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        return command(config=config, **kwargs)

    return wrapper


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
        force=True,
    )
    # httpx logs every request at INFO; our own one line per source says more.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))


def open_db_or_exit(config):
    try:
        return open_database(config.database_path)
    except StoreError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)


@contextmanager
def exit_on_write_error(config):
    """End the command with one ``Error:`` line and exit status 1 when writing the database fails."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        # A full disk, a read-only location or a file that cannot grow: every
        # transaction rolled back, so say so plainly instead of a traceback.
        click.echo(f"Error: {config.database_path}: cannot write the database: {exc}; the data already there is kept", err=True)
        sys.exit(EXIT_FAILED)


def quiet_option(command):
    """``--quiet``/``-q``: nothing on stdout or stderr when the command succeeds.

    Goes below ``@common_options`` (logging is set up by then). The command
    receives ``quiet`` and prints its failures itself; below ERROR, qsite's own
    log lines are silenced.
    """
    @click.option("--quiet", "-q", is_flag=True, help="Print nothing but failures (on stderr).")
    @functools.wraps(command)
    def wrapper(quiet, **kwargs):
        if quiet:
            logging.getLogger("qsite").setLevel(logging.ERROR)
        return command(quiet=quiet, **kwargs)

    return wrapper


def single_writer(command):
    """Run the command holding the database's writer lock (:mod:`pipeline.lock`); adds ``--wait``.

    Goes below ``@common_options``. A second writer waits up to ``--wait``
    seconds, then ends with a message naming the lock and exit status 1.
    """
    @click.option(
        "--wait",
        type=click.FloatRange(min=0),
        default=DEFAULT_WAIT,
        show_default=True,
        envvar="QSITE_LOCK_WAIT",
        help="Seconds to wait while another qsite run writes. Env: QSITE_LOCK_WAIT.",
    )
    @functools.wraps(command)
    def wrapper(config, wait, **kwargs):
        try:
            with exit_on_write_error(config), writer_lock(config.database_path, wait):
                return command(config=config, **kwargs)
        except WriterLockTimeout as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper


@click.group()
@click.version_option(VERSION, prog_name="qsite")
def cli():
    """qsite: ingest a quantum-computing learning site's data and serve it read-only.

    Example: qsite ingest all && qsite serve
    """


@cli.command()
@common_options
@quiet_option
def migrate(config, quiet):
    """Create the database or apply pending schema migrations. Example: qsite migrate --db site.db"""
    open_db_or_exit(config)
    if not quiet:
        click.echo(f"{config.database_path}: schema up to date")


@cli.group()
def ingest():
    """Pull the site export and news feeds into the database."""


@ingest.command(name="site")
@common_options
@quiet_option
@single_writer
def ingest_site_command(config, quiet):
    """Ingest the site export. Example: qsite ingest site --config qsite.yml"""
    from pipeline.site_export import ingest_site

    db = open_db_or_exit(config)
    report = ingest_site(db, config)
    _echo_report(report, quiet)
    sys.exit(EXIT_FAILED if report.failed else 0)


@ingest.command(name="news")
@common_options
@quiet_option
@single_writer
def ingest_news_command(config, quiet):
    """Fetch the configured news feeds. Example: qsite ingest news --config qsite.yml"""
    db = open_db_or_exit(config)
    reports = _run_news(db, config, quiet)
    sys.exit(EXIT_FAILED if any(report.failed for report in reports) else 0)


@ingest.command(name="all")
@common_options
@quiet_option
@single_writer
def ingest_all_command(config, quiet):
    """Ingest the site export, then the news feeds. Example: qsite ingest all"""
    from pipeline.site_export import ingest_site

    db = open_db_or_exit(config)
    site = ingest_site(db, config)
    _echo_report(site, quiet)
    reports = _run_news(db, config, quiet)
    sys.exit(EXIT_FAILED if site.failed or any(report.failed for report in reports) else 0)


def _echo_report(report, quiet: bool) -> None:
    if report.failed:
        click.echo(report.line(), err=quiet)
    elif not quiet:
        click.echo(report.line())


def _run_news(db, config, quiet: bool):
    """Ingest news with a progress bar on a terminal, else a line per source as each is stored."""
    from pipeline.news import ingest_news

    if quiet:
        reports = ingest_news(db, config)
        for report in reports:
            _echo_report(report, quiet)
        return reports
    if not sys.stdout.isatty() or not config.news.sources:
        return ingest_news(db, config, progress=lambda report: click.echo(report.line()))
    with click.progressbar(
        length=len(config.news.sources),
        label="news",
        item_show_func=lambda report: report.source if report else None,
        file=sys.stderr,
    ) as bar:
        reports = ingest_news(db, config, progress=lambda report: bar.update(1, report))
    for report in reports:
        click.echo(report.line())
    return reports


@cli.command(name="serve")
@common_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535), help="Port to serve on.")
def serve_command(config, host, port):
    """Serve /api/v1 and Datasette, read-only, over the database. Example: qsite serve --port 8001"""
    from service.serve import serve

    open_db_or_exit(config).close()  # migrations first, so the service finds its tables
    sys.exit(serve(config, host=host, port=port, log_level=logging.getLogger().getEffectiveLevel()))


# --- Operations: the scheduler, status and `qsite up` (pipeline/schedule.py, pipeline/status.py) ---


def _quiet_apscheduler() -> None:
    # APScheduler logs every job start and finish at INFO; our jobs log their own one line per source.
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("apscheduler").setLevel(logging.WARNING)


@cli.command(name="schedule")
@common_options
@click.option("--wait", type=click.FloatRange(min=0), default=None, envvar="QSITE_LOCK_WAIT",
              help=f"Seconds a job waits while another qsite run writes [default: {DEFAULT_WAIT:g}]. Env: QSITE_LOCK_WAIT.")
@click.option("--grace", type=click.FloatRange(min=0), default=None,
              help=f"Seconds a running ingest may finish after SIGTERM/SIGINT [default: {DEFAULT_GRACE:g}].")
@click.option("--run-now/--no-run-now", default=True, show_default=True, help="Ingest once at start-up.")
def schedule_command(config, wait, grace, run_now):
    """Run the ingests on their intervals in the foreground until SIGTERM/Ctrl-C. Example: qsite schedule --config qsite.yml"""
    import os

    from pipeline.schedule import Scheduler, run_forever

    _quiet_apscheduler()
    scheduler = Scheduler(
        config,
        wait=DEFAULT_WAIT if wait is None else wait,
        grace=DEFAULT_GRACE if grace is None else grace,
        run_now=run_now,
    )
    if not run_forever(scheduler):
        # A job is still running: leave without waiting for its thread;
        # SQLite rolls its open transaction back.
        logging.shutdown()
        os._exit(0)


@cli.command(name="status")
@common_options
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON (keys documented in the README) instead of a table.")
def status_command(config, as_json):
    """Show each source's last fetch, the site export's last run, the totals and the data version. Example: qsite status --json"""
    import json

    from pipeline.status import collect_status, format_status

    if not config.database_path.exists():
        click.echo(f"Error: {config.database_path}: no database yet; run `qsite ingest all` first", err=True)
        sys.exit(EXIT_FAILED)
    db = open_db_or_exit(config)
    try:
        status = collect_status(db, config)
    finally:
        db.close()
    if as_json:
        click.echo(json.dumps(status, indent=2))
    else:
        click.echo(format_status(status))


@cli.command(name="up")
@common_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8001, show_default=True, type=int, help="Port to serve on.")
@click.option("--wait", type=click.FloatRange(min=0), default=None, envvar="QSITE_LOCK_WAIT",
              help=f"Seconds to wait while another qsite run writes [default: {DEFAULT_WAIT:g}]. Env: QSITE_LOCK_WAIT.")
def up_command(config, host, port, wait):
    """Migrate, ingest once, then schedule ingests in the background and serve in the foreground. Example: qsite up --port 8001"""
    from pipeline.schedule import run_up

    open_db_or_exit(config).close()  # a database that cannot be opened or migrated is one Error line
    with exit_on_write_error(config):
        status = run_up(config, host=host, port=port, wait=wait, log_level=logging.getLogger().getEffectiveLevel())
    sys.exit(status)
