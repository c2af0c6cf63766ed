"""``qsite serve``: the granian server, its supervising process and its workers.

Promises, for the server as a whole:

- one supervising process starts ``workers`` worker processes; each builds its own
  Datasette after the fork (:func:`qsite.service.serve.worker.load_app`) and serves the shared port;
- a request head not complete within ``api.header_timeout`` seconds closes the connection
  (slowloris, and sockets that never send a byte); HTTP/1.1 only, so that timer starts at once;
- at most ``api.max_connections`` connections are open at once, lowered to what the
  descriptor limit can hold (:mod:`qsite.service.serve.descriptors`); more wait in the listen queue;
- an address already in use ends it at once with one ``Error:`` line and status 1
  (:mod:`qsite.service.serve.ports`), never a second server on the port;
- SIGTERM or Ctrl-C stops the workers gracefully and ends with status 0.

Relies on: qsite itself reading what trusted proxies forward (:mod:`qsite.service.http.forwarded`):
granian applies no proxy headers of its own. The access log and ``/metrics`` are
:mod:`qsite.service.metrics`. Why granian (HTTP in Rust, the app on uvloop): ``docs/performance.md``.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from pathlib import Path

from qsite.config import Config
from qsite.service.compat import GRANIAN_LOGGER, serve_granian
from qsite.service.metrics.exported import prepare_directory, remove_directory
from qsite.service.serve.app import SECRET_ENV
from qsite.service.serve.descriptors import FD_RESERVE, connections_per_worker, raise_fd_limit
from qsite.service.serve.ports import PortInUse, claim_port
from qsite.service.serve.worker import load_app

log = logging.getLogger("qsite.serve")

#: Seconds open connections get to finish when the server is asked to stop.
GRACEFUL_SHUTDOWN = 5
#: Connections the kernel queues for each listening socket before refusing more.
BACKLOG = 1024


def logging_config(level: int, log_format: str = "text") -> dict:
    """Granian's logging set up like the rest of qsite: one format (``text`` or ``json``), on stderr, at ``level``."""
    name = logging.getLevelName(level)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"qsite": {"()": "qsite.config.logs.make_formatter", "kind": log_format}},
        # no credential of a configured URL in any log line (db/redact.py)
        "filters": {"redact": {"()": "qsite.config.logs.RedactingFilter"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler", "formatter": "qsite", "stream": "ext://sys.stderr", "filters": ["redact"],
            }
        },
        "root": {"handlers": ["stderr"], "level": name},
        "loggers": {
            GRANIAN_LOGGER: {"handlers": ["stderr"], "level": name, "propagate": False},
            "granian.access": {"handlers": [], "level": "CRITICAL", "propagate": False},
            # one line per message sent to a client that has gone, naming no request (granian#650);
            # qsite.service.http.disconnects stops such a response instead
            "_granian.asgi.io": {"level": "WARNING"},
        },
    }


def serve(
    config: Config,
    host: str,
    port: int,
    workers: int,
    log_level: int = logging.INFO,
    follow: Path | None = None,
    log_format: str = "text",
) -> int:
    """Serve until stopped; returns the exit status (0 after Ctrl-C or SIGTERM, 1 if it could not start or a worker died).

    An address already in use ends it at once with one ``Error:`` line on
    stderr and status 1 (:func:`~qsite.service.serve.ports.claim_port`), never a second server on the port.

    :param follow: serve the published snapshots, kept in this folder, instead of the database (:mod:`qsite.service.replica.follow`).
    """
    try:
        with claim_port(host, port):
            return _serve(config, host, port, workers, log_level, follow, log_format)
    except PortInUse as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1


def _serve(config: Config, host: str, port: int, workers: int, log_level: int, follow: Path | None, log_format: str) -> int:
    from granian.constants import HTTPModes, Interfaces, Loops
    from granian.http import HTTP1Settings
    from granian.log import LogLevels
    from granian.server import Server

    # One secret for every worker (each would otherwise draw its own): set DATASETTE_SECRET to share it with replicas too.
    os.environ.setdefault(SECRET_ENV, secrets.token_hex(32))
    fd_limit = raise_fd_limit()
    per_worker = connections_per_worker(config.api.max_connections, workers, fd_limit)
    if per_worker * workers < config.api.max_connections:
        log.warning(
            "api.max_connections %d lowered to %d: %d worker(s) of %d open files each, %d kept for the worker itself",
            config.api.max_connections, per_worker * workers, workers, fd_limit, FD_RESERVE,
        )
    server = Server(
        (config, follow),
        address=host,
        port=port,
        interface=Interfaces.ASGI,  # with lifespan: Datasette's startup hooks run in each worker
        workers=workers,
        loop=Loops.auto,  # uvloop, installed with qsite
        backlog=BACKLOG,
        backpressure=per_worker,
        # HTTP/1.1 only: with protocol detection (auto) hyper's header timer would
        # start only after a first byte, so a socket that never sends one stayed open.
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(header_read_timeout=config.api.header_timeout * 1000, keep_alive=True),
        websockets=False,
        log_level=LogLevels(logging.getLevelName(log_level).lower()),
        log_dictconfig=logging_config(log_level, log_format),
        log_access=False,
        workers_kill_timeout=GRACEFUL_SHUTDOWN,
    )
    log.info(
        "serving http://%s:%d with %d worker%s, at most %d connections each",
        host if ":" not in host else f"[{host}]", port, workers, "" if workers == 1 else "s", per_worker,
    )
    metrics_dir = prepare_directory() if config.metrics.enabled else None  # before the workers fork
    try:
        serve_granian(server, load_app)
    except OSError as exc:  # the address is taken, or not ours to bind
        log.error("cannot serve on %s:%d: %s", host, port, exc)
        return 1
    except SystemExit as exc:  # granian ends with sys.exit(1) when a worker died
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        if metrics_dir is not None:
            remove_directory(metrics_dir)
    return 0
