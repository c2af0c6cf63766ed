"""The ``qsite`` command line.

Exit statuses, the same for every command: 0 success, 1 a run that failed
(the data already there is kept), 2 a usage or config error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

import click

from qsite.config import ConfigError
from qsite.db.model import VERSION
from qsite.pipeline.ops import DEFAULT_GRACE
from qsite.pipeline.store.lock import DEFAULT_WAIT
from qsite.options import (
    EXIT_FAILED,
    EXIT_USAGE,
    common_options,
    exit_on_write_error,
    global_options,
    open_and_migrate_or_exit,
    open_db_or_exit,
    quiet_option,
    single_writer,
)

log = logging.getLogger("qsite")

# The pipeline's operations are imported by the commands that run them: the feed path alone
# (httpx, feedparser, lxml, APScheduler) was a third of every command's start, `qsite serve`'s
# and `qsite migrate`'s included.

@click.group()
@click.version_option(VERSION, prog_name="qsite")
@global_options(envvar=True)
def cli(config_path, db_path, log_level, log_format):
    """qsite: ingest a quantum-computing learning site's data and serve it read-only.

    Example: qsite ingest all && qsite serve

    \b
    --config, --db, --log-level and --log-format go before or after the command's name:
    qsite --config qsite.yml ingest news
    """


@cli.command()
@common_options
@quiet_option
def migrate(config, quiet):
    """Create the database or apply pending schema migrations. Example: qsite migrate --db site.db"""
    if quiet:
        logging.getLogger("qsite").setLevel(logging.ERROR)
    db, applied = open_and_migrate_or_exit(config)
    db.close()
    if not quiet:
        done = f"; applied {len(applied)} migration(s): {', '.join(applied)}" if applied else ""
        click.echo(f"{config.database_path}: schema up to date{done}")


@cli.group()
@global_options(envvar=False)  # read by each ingest command (common_options): qsite ingest --config X news
def ingest(config_path, db_path, log_level, log_format):
    """Pull the site export and news feeds into the database."""


def ingest_options(command):
    """What every ``qsite ingest`` command takes: the config, the single-writer wait, ``--quiet``."""
    return common_options(single_writer(quiet_option(command)))


@ingest.command(name="site")
@ingest_options
def ingest_site_command(config, wait, quiet):
    """Ingest the site export. Example: qsite ingest site --config qsite.yml"""
    _ingest(config, wait, "site", quiet)


now_option = click.option(
    "--now", is_flag=True, help="Fetch every feed now, those backing off after a failure too (say, once you fixed one)."
)


@ingest.command(name="news")
@ingest_options
@now_option
def ingest_news_command(config, wait, quiet, now):
    """Fetch the configured news feeds. Example: qsite ingest news --config qsite.yml"""
    _ingest(config, wait, "news", quiet, now=now)


@ingest.command(name="all")
@ingest_options
@now_option
@click.option("--publish", is_flag=True, help="Then publish a snapshot if the data changed (as `qsite publish`).")
def ingest_all_command(config, wait, quiet, now, publish):
    """Ingest the site export, then the news feeds. Example: qsite ingest all --publish"""
    _ingest(config, wait, "all", quiet, publish, now=now)


def _publish(config, quiet: bool = False, rollback_to: int | None = None) -> bool:
    """Publish a snapshot (pipeline/ops/publish.py), or roll back to one, and print its one line; False when it failed."""
    from qsite.pipeline.ops.publish import PublishError, publish
    from qsite.pipeline.ops.rollback import rollback

    try:
        result = publish(config) if rollback_to is None else rollback(config, rollback_to)
    except PublishError as exc:
        click.echo(f"Error: {exc}", err=True)
        return False
    if not quiet:
        click.echo(result.line())
    return True


@cli.command(name="publish")
@common_options
@click.option(
    "--rollback-to",
    type=click.IntRange(min=0),
    metavar="VERSION",
    help="Point latest.json back at the store's older snapshot of this data version instead; replicas follow it.",
)
def publish_command(config, rollback_to):
    """Publish the database as an immutable snapshot to snapshots.store, then point latest.json at it. Example: qsite publish"""
    sys.exit(0 if _publish(config, rollback_to=rollback_to) else EXIT_FAILED)


def _ingest(config, wait: float, which: str, quiet: bool, publish: bool = False, now: bool = False) -> None:
    """Run the ingests (then, with ``publish``, publish a snapshot) and end with status 1 if any failed.

    Each report is a line as soon as it is stored; on a terminal the news
    sources show as a progress bar instead, and their lines follow it.
    With ``quiet``, only failures are printed (to stderr). ``which``: ``site``, ``news`` or ``all``;
    ``now``: the news sources backing off are fetched too.
    """
    from qsite.pipeline.ops.ingest import ALL, NEWS, SITE, run_ingest

    kinds = {"site": (SITE,), "news": (NEWS,), "all": ALL}[which]
    if quiet:
        logging.getLogger("qsite").setLevel(logging.ERROR)  # failures are echoed instead

        def echo_failure(report) -> None:
            if report.failed:
                click.echo(report.line(), err=True)

        reports = run_ingest(config, wait, kinds, progress=echo_failure, now=now)
    elif NEWS in kinds and config.news.sources and sys.stdout.isatty():
        reports = _ingest_with_progress_bar(config, wait, kinds, now)
        for report in reports:
            if report.kind == NEWS:
                click.echo(report.line())
    else:
        reports = run_ingest(config, wait, kinds, progress=lambda report: click.echo(report.line()), now=now)
    failed = any(report.failed for report in reports)
    if publish and not _publish(config, quiet):  # even when a source failed: the others' data landed
        failed = True
    sys.exit(EXIT_FAILED if failed else 0)


def _ingest_with_progress_bar(config, wait: float, kinds: tuple[str, ...], now: bool = False):
    """Run the ingests with the news sources as a progress bar, shown once the news sweep starts."""
    from qsite.pipeline.ops.ingest import NEWS, SITE, run_ingest

    with contextlib.ExitStack() as stack:
        bar = None

        def start_bar():
            return stack.enter_context(
                click.progressbar(
                    length=len(config.news.sources),
                    label="news",
                    item_show_func=lambda report: report.source if report else None,
                    file=sys.stderr,
                )
            )

        def progress(report) -> None:
            nonlocal bar
            if report.kind == NEWS:
                bar.update(1, report)
            else:
                click.echo(report.line())
                bar = start_bar()  # the site export comes first; the news sweep starts now

        if SITE not in kinds:
            bar = start_bar()
        return run_ingest(config, wait, kinds, progress=progress, now=now)


@cli.command(name="serve")
@common_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535), help="Port to serve on.")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=None,
    envvar="QSITE_WORKERS",
    help="Worker processes; overrides api.workers [default: one per core; 1 with a rate limit on and rate_limit_storage memory://]. Env: QSITE_WORKERS.",
)
@click.option("--follow", is_flag=True, help="Serve the snapshots published to snapshots.store instead of the database.")
@click.option("--data-dir", type=click.Path(file_okay=False), help="With --follow: where snapshots are kept [default: a replica folder beside the database].")
@click.option(
    "--datasette-config",
    type=click.Path(exists=True, dir_okay=False),
    envvar="QSITE_DATASETTE_CONFIG",
    help="Datasette configuration (queries, allow blocks, settings) [default: the bundled datasette.yaml]. Env: QSITE_DATASETTE_CONFIG.",
)
def serve_command(config, host, port, workers, follow, data_dir, datasette_config):
    """Serve /api/v1 and Datasette, read-only, over the database. Example: qsite serve --port 8001"""
    from pathlib import Path

    from qsite.config import serving_workers
    from qsite.pipeline.ops.lifeline import die_with_parent
    from qsite.service.datasette.metadata import MetadataError
    from qsite.service.serve.app import check_datasette_config
    from qsite.service.serve.runner import serve

    die_with_parent()  # when `qsite up` started this server
    if data_dir and not follow:
        raise click.UsageError("--data-dir is for --follow")
    try:
        workers = serving_workers(config.api, workers)
    except ConfigError as exc:
        click.echo(f"Error: {config.path}: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    try:  # what every worker would lack (a canned query the API runs), refused before any starts
        check_datasette_config(datasette_config)
    except MetadataError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if follow:
        data_dir = Path(data_dir).resolve() if data_dir else config.database_path.parent / "replica"
    else:
        open_db_or_exit(config, writing=False).close()  # migrations first, so the service finds its tables
    if datasette_config:  # read by each worker's qsite.service.serve.app.make_datasette
        os.environ["QSITE_DATASETTE_CONFIG"] = str(Path(datasette_config).resolve())
    from qsite import options

    log_level = logging.getLogger().getEffectiveLevel()
    sys.exit(serve(
        config, host=host, port=port, workers=workers, log_level=log_level, follow=data_dir,
        log_format=options.log_format_in_force,
    ))


# --- Operations: the scheduler, status and `qsite up` (pipeline/ops/schedule.py, pipeline/ops/status.py) ---


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
    from qsite.pipeline.ops.lifeline import die_with_parent
    from qsite.pipeline.ops.schedule import Scheduler, run_forever

    die_with_parent()  # when `qsite up` started this scheduler
    _quiet_apscheduler()
    open_db_or_exit(config).close()  # a database it cannot write is one Error line now, not a failure per job
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
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON (keys in docs/operating.md) instead of a table.")
def status_command(config, as_json):
    """Show each source's last fetch, the site export's last run, the totals and the data version. Example: qsite status --json"""
    if not config.database_path.exists():
        click.echo(f"Error: {config.database_path}: no database yet; run `qsite ingest all` first", err=True)
        sys.exit(EXIT_FAILED)
    from qsite.pipeline.ops.status import collect_status, format_status

    db = open_db_or_exit(config, writing=False)
    try:
        status = collect_status(db, config)
    finally:
        db.close()
    if as_json:
        click.echo(json.dumps(status, indent=2))
    else:
        click.echo(format_status(status, framed=sys.stdout.isatty()))


@cli.command(name="up")
@common_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=8001, show_default=True, type=click.IntRange(0, 65535), help="Port to serve on.")
@click.option("--wait", type=click.FloatRange(min=0), default=None, envvar="QSITE_LOCK_WAIT",
              help=f"Seconds to wait while another qsite run writes [default: {DEFAULT_WAIT:g}]. Env: QSITE_LOCK_WAIT.")
def up_command(config, host, port, wait):
    """Migrate, ingest once, then schedule ingests in the background and serve in the foreground. Example: qsite up --port 8001"""
    from qsite.config import serving_workers
    from qsite.pipeline.ops.schedule import run_up
    from qsite.service.serve.ports import PortInUse, check_port_free

    try:
        check_port_free(host, port)  # before the ingest: a busy port is one line at once, not after a minute
    except PortInUse as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)
    try:  # the server's worker count (api.workers, or QSITE_WORKERS as its child reads it), also before the ingest
        workers = os.environ.get("QSITE_WORKERS", "")
        serving_workers(config.api, int(workers) if workers.isdigit() else None)
    except ConfigError as exc:
        click.echo(f"Error: {config.path}: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    open_db_or_exit(config).close()  # a database that cannot be opened or migrated is one Error line
    with exit_on_write_error(config):
        status = run_up(config, host=host, port=port, wait=wait, log_level=logging.getLogger().getEffectiveLevel())
    sys.exit(status)
