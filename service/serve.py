"""``qsite serve``: Datasette with the qsite plugin over the configured database, under granian.

The database is served mutable (never ``-i``): the pipeline writes to it while
it is served, and Datasette's read connections are read-only anyway.

The server is `granian <https://github.com/emmett-framework/granian>`_ (HTTP in
Rust, the ASGI app on a uvloop event loop): ``make bench`` measured it against
uvicorn with h11 and with httptools and uvloop on the same bytes (README,
"Performance"). One supervising process starts ``workers`` worker processes;
each builds its own Datasette after the fork and serves the shared port.

What the server is asked to keep (issue 13, section 3):

- a request head not complete within ``api.header_timeout`` seconds (10 by
  default) closes the connection (slowloris, and sockets that never send a byte);
- at most ``api.max_connections`` connections are open at once; more wait in
  the kernel's listen queue (they cost no file descriptor) until one closes;
- the soft ``RLIMIT_NOFILE`` is raised to the hard limit at start, and the
  cap is lowered to what the limit can hold (:func:`connections_per_worker`);
- a worker close to its descriptor limit logs one line a minute (:class:`FdWatch`).

What trusted proxies forward (``api.trusted_proxies``) is read by qsite
itself (:mod:`service.http.forwarded`): the client's address for the rate
limiter, the scheme for absolute links; granian applies no proxy headers of
its own. The access log (``logs.access``) and ``/metrics`` (``metrics:``) are
:mod:`service.metrics`, the outermost layer of each worker's app. SIGTERM or Ctrl-C stops the workers gracefully and ends
with status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import resource
import secrets
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import yaml
from datasette.app import Datasette
from filelock import FileLock, Timeout

from config import Config

from service.compat import GRANIAN_LOGGER, datasette_kwargs, serve_granian
from service.datasette.metadata import CONFIG_PATH, MetadataError, load_datasette_config, load_metadata, query_sql
from service.datasette.state import instance
from service.http.settings import DATASETTE_CONFIG_ENV, OWN_SERVER, PLUGIN_NAME
from service.http.settings import DATASETTE_CONFIG_ENV, PLUGIN_NAME
from service.metrics.exported import prepare_directory, remove_directory
from service.metrics.middleware import observed

log = logging.getLogger("qsite.serve")

#: Seconds open connections get to finish when the server is asked to stop.
GRACEFUL_SHUTDOWN = 5
#: Datasette's signing secret, as ``datasette serve --secret`` reads it from the environment.
SECRET_ENV = "DATASETTE_SECRET"
#: Descriptors a worker keeps for itself beyond its connections: SQLite files
#: and their WAL, the event loop, the runtime's threads, Redis, logs.
FD_RESERVE = 128
#: Share of the descriptor limit in use at which a worker warns.
FD_WARN_SHARE = 0.9
#: Seconds between two descriptor warnings, and between two checks.
FD_WARN_EVERY = 60.0
FD_CHECK_EVERY = 5.0
#: Connections the kernel queues for each listening socket before refusing more.
BACKLOG = 1024



class PortInUse(Exception):
    """The address cannot be served: another program or another qsite server listens there, or it is not ours to bind."""


def _in_use(host: str, port: int, by: str) -> PortInUse:
    shown = f"[{host}]" if ":" in host else host
    return PortInUse(
        f"{shown}:{port} is already in use ({by}); stop it or choose another port "
        f"(qsite serve --port {port + 1 if port < 65535 else 8001}, make up PORT={port + 1 if port < 65535 else 8001})"
    )


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUse` when something already listens on ``host``:``port``.

    Granian binds with ``SO_REUSEPORT`` (its workers share one socket), and
    Linux lets any number of such sockets share a port: a second server would
    start silently and the kernel would split the connections between the two.
    This probe binds *without* ``SO_REUSEPORT`` (with ``SO_REUSEADDR``, so
    connections of a server stopped a moment ago in ``TIME_WAIT`` do not
    count), which fails while any socket listens there.
    """
    if port == 0:  # the kernel picks a free port
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortInUse(f"{host}: cannot serve on this address: {exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise _in_use(host, port, "another server listens there") from None
            raise PortInUse(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def claim_port(host: str, port: int) -> Iterator[None]:
    """Hold ``host``:``port`` for this process while the block runs; :class:`PortInUse` when it is taken.

    A lock file per address (in the temporary folder, an ``flock`` the kernel
    drops when the process ends) closes the gap between the probe of
    :func:`check_port_free` and granian's bind: two qsite servers started at
    the same moment cannot both pass the probe and share the port.
    """
    if port == 0:
        yield
        return
    lock = FileLock(Path(tempfile.gettempdir()) / f"qsite-port-{host.replace(':', '_')}-{port}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise _in_use(host, port, "another qsite server is starting or serving there") from None
    except OSError as exc:  # e.g. another user's lock file: the probe alone still guards the port
        log.debug("no lock file for %s:%d: %s", host, port, exc)
        lock = None
    try:
        check_port_free(host, port)
        yield
    finally:
        if lock is not None:
            lock.release()


def check_datasette_config(path: str | Path | None = None) -> None:
    """Check, before any worker starts, that the ``datasette.yaml`` to be served has what the API runs.

    Every worker reads the canned queries of this file (:func:`make_datasette`); one the API needs
    left out of a deployer's copy used to start a server whose every endpoint answered 503 (and
    health "no-data" over a full database), with only a log line to say why.

    :param path: the file (``--datasette-config``); default ``QSITE_DATASETTE_CONFIG``, else the bundled one.
    :raises MetadataError: naming the file and what it lacks (the missing queries), or why it cannot be read.
    """
    path = path or os.environ.get(DATASETTE_CONFIG_ENV) or CONFIG_PATH
    try:
        config = load_datasette_config("served", path)
        (entry,) = config["databases"].values()
        if not isinstance(entry, dict) or not isinstance(entry.get("queries") or {}, dict):
            raise MetadataError("databases: the database's entry and its queries must be mappings")
        query_sql(entry.get("queries"))
    except MetadataError as exc:
        # query_sql's message names datasette.yaml; say which file instead
        raise MetadataError(f"{path}: {str(exc).removeprefix('datasette.yaml: ')}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MetadataError(f"{path}: cannot be read: {exc}") from None


def make_datasette(
    config: Config, settings: dict | None = None, files: list[str] | None = None, datasette_yaml: str | Path | None = None
) -> Datasette:
    """A Datasette serving ``config``'s database with ``metadata.yml``, ``datasette.yaml`` and the plugin settings.

    Loaded the same way on Datasette 0.65 and 1.0 (:func:`service.compat.datasette_kwargs`).
    Datasette's ``sql_time_limit_ms`` is the config's ``api.sql_time_limit_ms``
    unless ``datasette.yaml`` or ``settings`` say otherwise.

    :param files: the database files instead (``[]`` for a follower, which adds its snapshots itself).
    :param datasette_yaml: the deployer's ``datasette.yaml`` (its queries, ``allow`` blocks, settings);
        default ``QSITE_DATASETTE_CONFIG`` (``qsite serve --datasette-config``), else the bundled one.
    """
    database = config.database_path
    metadata = load_metadata(database.stem)
    datasette_yaml = datasette_yaml or os.environ.get(DATASETTE_CONFIG_ENV) or CONFIG_PATH
    datasette_config = load_datasette_config(database.stem, datasette_yaml)
    # datasette_config: Datasette has the whole file (the plugin need not check, on 0.65, what it lacks)
    datasette_config.setdefault("plugins", {})[PLUGIN_NAME] = {
        "config": str(config.path), "database": str(database), "datasette_config": str(datasette_yaml),
        OWN_SERVER: True,  # qsite's own server: hardened as a whole (service.http.settings.is_own_server)
    }
    datasette_config["settings"] = {
        "sql_time_limit_ms": config.api.sql_time_limit_ms, **(datasette_config.get("settings") or {}), **(settings or {}),
    }
    # DATASETTE_SECRET as `datasette serve` reads it: what Datasette signs, and the counts cursors carry
    # (service.datasette.state.cursor_key), then hold from one worker or replica to the next
    secret = os.environ.get(SECRET_ENV) or None
    files = [str(database)] if files is None else files
    return Datasette(files, secret=secret, **datasette_kwargs(metadata, datasette_config))


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns the soft limit now in force.

    Many systems start processes with a soft limit of 1024 and a far higher
    hard one: the connection cap should be bounded by the hard limit.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. above fs.nr_open
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft


def connections_per_worker(max_connections: int, workers: int, fd_limit: int) -> int:
    """Each worker's share of ``api.max_connections``, never more than its descriptors can hold.

    Every worker is a process with its own ``fd_limit``; it keeps
    :data:`FD_RESERVE` of them for itself, so a flood of connections never
    makes it fail to open its database or accept its next client.
    """
    share = -(-max_connections // workers)
    return max(1, min(share, fd_limit - FD_RESERVE))


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: nothing to watch
        return 0


class FdWatch:
    """Warns, at most once a minute, when this process is close to its descriptor limit.

    Connections over the cap wait in the kernel's queue rather than fail, so
    this is the one line an operator sees when descriptors run short for any
    other reason, instead of a traceback per refused connection.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.warned_at = -float("inf")

    def check(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        used = open_fds()
        if used < FD_WARN_SHARE * self.limit or now - self.warned_at < FD_WARN_EVERY:
            return False
        self.warned_at = now
        log.warning(
            "%d of %d file descriptors in use (pid %d); new connections wait until some close"
            " (raise the hard open-file limit or lower api.max_connections)",
            used, self.limit, os.getpid(),
        )
        return True

    def every(self, seconds: float, loop: asyncio.AbstractEventLoop) -> None:
        """Check now and every ``seconds`` on ``loop`` (plain callbacks: nothing to cancel at shutdown)."""

        def tick():
            self.check()
            loop.call_later(seconds, tick)

        loop.call_soon(tick)


#: Seconds a thread runs Python before it hands the interpreter to another that waits for it.
SWITCH_INTERVAL = 0.001


def load_app(target: tuple[Config, Path | None]):
    """Granian's target loader, called once in each worker process after the fork, with its event loop set.

    ``target`` is ``(config, follow)``: with a ``follow`` folder, the worker serves the published
    snapshots (service/replica/follow.py), each worker following on its own into the shared folder;
    locks on the files let the workers download each snapshot once and delete a file only when no
    worker serves it.
    """
    config, follow = target
    datasette = make_datasette(config, files=None if follow is None else [])
    app = datasette.app()
    if follow is not None:
        from service.replica.follow import Follower

        follower = instance(datasette).follower = Follower(datasette, config, follow)
        app = follower.wrap(app)
    app = observed(app, datasette, config)
    FdWatch(resource.getrlimit(resource.RLIMIT_NOFILE)[0]).every(FD_CHECK_EVERY, asyncio.get_event_loop())
    # The thread making Datasette's pages (service/http/page_loop.py) hands the interpreter back to the
    # event loop within a millisecond (5 by default): an /api/v1 request waits at most that long for it.
    sys.setswitchinterval(SWITCH_INTERVAL)
    return after_startup(app)


def after_startup(app):
    """``app`` settling the worker once it has started, before it answers its first request.

    Two things, each once:

    - :func:`gc.freeze`, when the ASGI lifespan's startup is complete.
      Everything made by then (modules, Datasette, the API's documents in
      every language: about 90,000 objects) lives as long as the worker, yet
      every full collection walked it again: 30 to 40 ms each, a pause every
      queued request waits through, the tail of the uncached p99. Frozen,
      collections walk only what requests made.
    - :func:`batch_other_threads`, when the first request comes: granian
      starts its runtime's threads after the lifespan's startup.
    """
    threads_batched = False

    async def settled(scope, receive, send):
        nonlocal threads_batched
        if scope["type"] != "lifespan":
            if not threads_batched:
                threads_batched = True
                batched = batch_other_threads()
                log.debug("%d thread(s) of the worker besides the event loop's set to SCHED_BATCH", len(batched))
            return await app(scope, receive, send)

        async def sending(message):
            if message["type"] == "lifespan.startup.complete":
                gc.collect()  # what startup left as garbage goes first, not into the frozen set
                gc.freeze()
            await send(message)

        return await app(scope, receive, sending)

    return settled


def batch_other_threads() -> list[int]:
    """Set every thread of the worker but the calling one (the event loop's) to ``SCHED_BATCH``; their ids.

    A worker runs its Python (the event loop: each request's routing, SQL and
    JSON) on one thread and granian's runtime (the sockets, in Rust) on
    others. Under Linux's default policy every wake-up of the runtime (a
    request read, a response to write) preempted the event loop there and
    then: where a worker has one core (one core per worker, a container of
    one CPU, ``make bench``'s pinning), that was about two context switches
    per uncached request, each leaving the loop's caches cold. A thread in
    ``SCHED_BATCH`` never preempts on waking: the runtime runs when the loop
    waits (for a request, the GIL, the file) or its time slice ends, and then
    handles the I/O of several requests at once. Nothing is lost or
    reordered, only run later by at most a slice.

    Measured at a million items, one worker pinned to a core, wrk on the
    other: uncached pages 2,050 to 2,460 requests a second (p99 21.8 to
    19.9 ms), searches 1,360 to 1,540, cached pages 22,000 to 29,500;
    context switches of the loop from 1.9 to 0.1 a request. Granian's own
    ceiling (``bench/raw_asgi.py``) gains more (1.4x), so ``make bench``
    measures it both ways (``bench/README.md``).

    Every other thread, not only the runtime's: Python code runs on granian's
    threads too, so Python's list of threads does not tell them apart, and
    the threads startup began for Datasette's queries are background work to
    the loop as well. Threads begun later by the loop's thread inherit its
    default policy. Where there is no ``SCHED_BATCH`` or no ``/proc`` (not
    Linux), nothing changes.
    """
    if not hasattr(os, "SCHED_BATCH"):
        return []
    event_loop = threading.get_native_id()
    try:
        thread_ids = [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return []
    batched = []
    for thread_id in thread_ids:
        if thread_id == event_loop:
            continue
        try:
            os.sched_setscheduler(thread_id, os.SCHED_BATCH, os.sched_param(0))
        except OSError:  # ended meanwhile, or a sandbox that refuses it: the default policy stays
            continue
        batched.append(thread_id)
    return batched


def logging_config(level: int, log_format: str = "text") -> dict:
    """Granian's logging set up like the rest of qsite: one format (``text`` or ``json``), on stderr, at ``level``."""
    name = logging.getLevelName(level)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"qsite": {"()": "config.logs.make_formatter", "kind": log_format}},
        # no credential of a configured URL in any log line (db/redact.py)
        "filters": {"redact": {"()": "config.logs.RedactingFilter"}},
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
            # service.http.disconnects stops such a response instead
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
    stderr and status 1 (:func:`claim_port`), never a second server on the port.

    :param follow: serve the published snapshots, kept in this folder, instead of the database (service/replica/follow.py).
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
