"""The options and errors every ``qsite`` command shares: config, database, logging, the writer lock.

Exit statuses, the same for every command: 0 success, 1 a run that failed
(the data already there is kept), 2 a usage or config error.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import sys

import click

from qsite.config import ConfigError, load_config
from qsite.config.logs import RedactingFilter, make_formatter
from qsite.pipeline.store import StoreError, open_and_migrate
from qsite.pipeline.store.lock import DEFAULT_WAIT, WriterLockTimeout

EXIT_FAILED = 1
EXIT_USAGE = 2

#: ``--quiet``/``-q`` of the commands a cron line or a script runs: nothing at all on success.
quiet_option = click.option("--quiet", "-q", is_flag=True, help="Print nothing on success; failures only, on stderr.")


DEFAULT_LOG_LEVEL = "INFO"


def global_options(envvar: bool):
    """The decorators of ``--config``, ``--db`` and ``--log-level``: on the ``qsite`` and ``ingest`` groups and on each command.

    They are read from the environment once, on the group (``envvar``): an
    environment variable on the command too would beat an option given
    before the command's name (``QSITE_CONFIG=b qsite --config a ingest news``).
    """

    def env(name):
        return f"QSITE_{name}" if envvar else None

    def decorate(function):
        for option in reversed([
            click.option(
                "--config", "config_path", type=click.Path(dir_okay=False), envvar=env("CONFIG"),
                help="Config YAML (default: the bundled one). Env: QSITE_CONFIG.",
            ),
            click.option(
                "--db", "db_path", type=click.Path(dir_okay=False), envvar=env("DB"),
                help="Database file; overrides the config. Env: QSITE_DB.",
            ),
            click.option(
                "--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
                envvar=env("LOG_LEVEL"), help=f"Logging level [default: {DEFAULT_LOG_LEVEL}]. Env: QSITE_LOG_LEVEL.",
            ),
            click.option(
                "--log-format", type=click.Choice(["text", "json"]), envvar=env("LOG_FORMAT"),
                help="Log lines as text, or one JSON object a line [default: logs.format of the config, else text]. "
                "Env: QSITE_LOG_FORMAT.",
            ),
        ]):
            function = option(function)
        return function

    return decorate


def _given_before(name: str):
    """The value of option ``name`` given to the nearest group above the current command, or None.

    Walks up from the command: ``qsite ingest --config X news`` finds ``ingest``'s,
    which beats the ``qsite`` group's (and so its environment variable).
    """
    context = click.get_current_context().parent
    while context is not None:
        if context.params.get(name) is not None:
            return context.params[name]
        context = context.parent
    return None


def common_options(command):
    """``--config``, ``--db`` and ``--log-level``, which every command takes, before or after its name.

    ``qsite --config X ingest news``, ``qsite ingest --config X news`` and
    ``qsite ingest news --config X`` are the same; given in several places, the
    one nearest the command's name wins (after it, then after ``ingest``, then
    after ``qsite``, then the environment). The wrapped command receives a
    loaded ``config`` instead of the raw options; a bad config ends the command
    with its message and exit status 2.
    """

    @global_options(envvar=False)
    @functools.wraps(command)
    def wrapper(config_path, db_path, log_level, log_format, **kwargs):
        config_path = config_path or _given_before("config_path")
        db_path = db_path or _given_before("db_path")
        level = log_level or _given_before("log_level") or DEFAULT_LOG_LEVEL
        log_format = log_format or _given_before("log_format")
        setup_logging(level, log_format or "text")
        try:
            config = load_config(config_path, database=db_path)
        except ConfigError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        if log_format is None and config.logs.format != "text":
            setup_logging(level, config.logs.format)
        return command(config=config, **kwargs)

    return wrapper


#: The log format :func:`setup_logging` set last (``qsite serve`` gives its workers the same).
log_format_in_force = "text"


def setup_logging(level: str, log_format: str = "text") -> None:
    global log_format_in_force
    log_format_in_force = log_format
    logging.basicConfig(level=level.upper(), stream=sys.stderr, force=True)
    for handler in logging.getLogger().handlers:  # no credential of a configured URL in any log line
        handler.setFormatter(make_formatter(log_format))
        handler.addFilter(RedactingFilter())
    # httpx logs every request at INFO; our own one line per source says more.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))


def open_db_or_exit(config, *, writing: bool = True):
    """The database, migrated (:func:`qsite.pipeline.store.open_database`); one ``Error:`` line and exit status 1 if it cannot be."""
    return open_and_migrate_or_exit(config, writing=writing)[0]


def open_and_migrate_or_exit(config, *, writing: bool = True):
    """:func:`qsite.pipeline.store.open_and_migrate`: the database and the migrations applied; exits as :func:`open_db_or_exit`."""
    try:
        return open_and_migrate(config.database_path, writing=writing)
    except StoreError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAILED)


@contextlib.contextmanager
def exit_on_write_error(config):
    """End the command with one ``Error:`` line and exit status 1 when writing the database fails."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        # A full disk, a read-only location or a file that cannot grow: every
        # transaction rolled back, so say so plainly instead of a traceback.
        click.echo(f"Error: {config.database_path}: cannot write the database: {exc}; the data already there is kept", err=True)
        sys.exit(EXIT_FAILED)


def single_writer(command):
    """Options and errors of a command that writes through :func:`qsite.pipeline.ops.ingest.run_ingest`; adds ``--wait``.

    Goes below ``@common_options``; the command receives ``wait``. A second
    writer waits up to ``--wait`` seconds for the lock (:mod:`qsite.pipeline.store.lock`),
    then ends with a message naming it and exit status 1; so does a database
    that cannot be opened or written.
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
            with exit_on_write_error(config):
                return command(config=config, wait=wait, **kwargs)
        except (WriterLockTimeout, StoreError) as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(EXIT_FAILED)

    return wrapper
