"""The ``qsite`` command line.

Exit statuses, the same for every command: 0 success, 1 a run that failed
(the data already there is kept), 2 a usage or config error.
"""

from __future__ import annotations

import functools
import logging
import sys

import click

from . import __version__
from .config import ConfigError, load_config
from .store import StoreError, open_database

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


def open_db_or_exit(config):
    try:
        return open_database(config.database_path)
    except StoreError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)


@click.group()
@click.version_option(__version__, prog_name="qsite")
def cli():
    """qsite: ingest a quantum-computing learning site's data and serve it read-only.

    Example: qsite ingest all && qsite serve
    """


@cli.command()
@common_options
def migrate(config):
    """Create the database or apply pending schema migrations. Example: qsite migrate --db site.db"""
    open_db_or_exit(config)
    click.echo(f"{config.database_path}: schema up to date")


@cli.group()
def ingest():
    """Pull the site export and news feeds into the database."""


@ingest.command(name="site")
@common_options
def ingest_site_command(config):
    """Ingest the site export. Example: qsite ingest site --config qsite.yml"""
    from .site_export import ingest_site

    db = open_db_or_exit(config)
    report = ingest_site(db, config)
    click.echo(report.line())
    sys.exit(EXIT_FAILED if report.failed else 0)
