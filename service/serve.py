"""``qsite serve``: Datasette with the qsite plugin over the configured database.

The database is served mutable (never ``-i``): the pipeline writes to it while
it is served, and Datasette's read connections are read-only anyway. Uvicorn
runs in-process, so there is one process to stop, and Ctrl-C or SIGTERM end it
cleanly.
"""

from __future__ import annotations

import contextlib
import logging

import uvicorn
from datasette.app import Datasette

from config import Config

from .metadata import load_metadata
from .settings import PLUGIN_NAME

#: Seconds open connections get to finish when the server is asked to stop.
GRACEFUL_SHUTDOWN = 5


def make_datasette(config: Config, settings: dict | None = None) -> Datasette:
    """A Datasette serving ``config``'s database with ``metadata.yml`` and the plugin settings."""
    database = config.database_path
    metadata = load_metadata(database.stem)
    metadata.setdefault("plugins", {})[PLUGIN_NAME] = {"config": str(config.path), "database": str(database)}
    return Datasette([str(database)], metadata=metadata, settings=settings or {})


class _Server(uvicorn.Server):
    """Uvicorn's server, but a stop by SIGINT or SIGTERM ends with status 0.

    Uvicorn re-raises the signal after its graceful shutdown, so the process
    would die of it (status -15, or "Aborted!" from click for Ctrl-C); a stop
    that was asked for is a success.
    """

    @contextlib.contextmanager
    def capture_signals(self):
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()


def serve(config: Config, host: str, port: int, log_level: int = logging.INFO) -> int:
    """Serve until stopped; returns the exit status (0 after Ctrl-C or SIGTERM, 1 if it could not start)."""
    datasette = make_datasette(config)
    server = _Server(
        uvicorn.Config(
            datasette.app(),
            host=host,
            port=port,
            log_level=logging.getLevelName(log_level).lower(),
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
            # The rate limiter decides whom X-Forwarded-For is trusted from
            # (api.trusted_proxies); uvicorn's default trust of 127.0.0.1 would let
            # any local client pick its own address.
            proxy_headers=False,
        )
    )
    server.run()
    return 0 if server.started else 1
