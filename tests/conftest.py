"""Shared fixtures: a real HTTP server on 127.0.0.1, configs in temporary folders, the CLI.

The helpers behind them live in ``tests/support``; test modules import helpers from
there, never from this file.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support.config_files import write_config
from tests.support.known_data import seeded_database
from tests.support.local_server import LocalServer
from tests.support.paths import SITE_EXPORT
from tests.support.processes import run_qsite
from tests.support.programs import PROGRAMS, missing_for


# One Datasette secret for every instance the tests start, in this process and in the `qsite serve`
# and `datasette serve` they run, as a deployment of several workers or replicas would set it: then
# instances answer the same link with the same bytes, the counts sealed in next links included
# (service/api/cursors.py). Tests of instances with secrets of their own take it away.
os.environ["DATASETTE_SECRET"] = "qsite-tests"


def pytest_sessionstart(session):
    """One line at the start naming the outside programs missing here, so nobody waits for the tests that need them.

    Written by the main process only (xdist's workers print nothing), with ``-q`` too.
    """
    missing = missing_for(PROGRAMS)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if missing and reporter is not None and not hasattr(session.config, "workerinput"):
        reporter.write_line("missing programs (the tests that need them fail at once): " + "; ".join(missing), yellow=True)


def pytest_runtest_setup(item):
    """A test marked ``requires(...)`` whose program is missing fails before it starts, in one line (no traceback)."""
    for marker in item.iter_markers("requires"):
        missing = missing_for(marker.args)
        if missing:
            pytest.fail("; ".join(missing), pytrace=False)


@pytest.fixture
def http_server():
    """A real HTTP server on 127.0.0.1 (:class:`~tests.support.local_server.LocalServer`); set its ``routes``."""
    server = LocalServer()
    yield server
    server.close()


@pytest.fixture
def sample_export() -> dict:
    """The bundled site export, parsed: a fresh copy each test may change."""
    return json.loads(SITE_EXPORT.read_text(encoding="utf-8"))


@pytest.fixture
def make_config(tmp_path):
    """Write a config YAML into tmp_path and return its path (see :func:`~tests.support.config_files.write_config`).

    Defaults: the database at tmp_path/site.db, the bundled sample export, no news sources.
    """

    def make(**overrides):
        return write_config(tmp_path, **overrides)

    return make


@pytest.fixture
def seeded_config(make_config, tmp_path):
    """A config over a database seeded with the small known catalog and news (``tests/support/known_data.py``), no rate limit."""
    seeded_database(tmp_path / "site.db").close()
    return make_config(api={"cache_max_age": 300, "rate_limit": "off"})


@pytest.fixture
def qsite():
    """:func:`~tests.support.processes.run_qsite`: run the real ``qsite`` command."""
    return run_qsite
