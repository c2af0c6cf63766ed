"""Plain Datasette serves /api/v1 too: the plugin through its entry point, no ``qsite serve``.

A real ``datasette serve`` process on 127.0.0.1 over the seeded database, with
the project's ``metadata.yml`` and, on Datasette 1.0, ``-c datasette.yaml``
(Datasette 0.65 has no ``-c``: the plugin gives it the queries of
``datasette.yaml`` through the ``canned_queries`` hook). Its answers are the
ones ``qsite serve``'s Datasette gives for the same database.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from service.compat import datasette_1
from service.datasette.metadata import CONFIG_PATH, METADATA_PATH
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.processes import free_port, stop, wait_until

DATASETTE = Path(sys.executable).with_name("datasette")
PATHS = ("/api/v1/courses", "/api/v1/glossary?q=qubit", "/api/v1/news?limit=5", "/api/v1/sources", "/api/v1/stats", "/api/v1")


@pytest.fixture
def plain(seeded_config, tmp_path):
    port = free_port()
    database = tmp_path / "site.db"
    args = [str(DATASETTE), "serve", str(database), "-m", str(METADATA_PATH), "-h", "127.0.0.1", "-p", str(port)]
    if datasette_1():
        args += ["-c", str(CONFIG_PATH)]
    log = tmp_path / "datasette.log"
    env = {**os.environ, "QSITE_CONFIG": str(seeded_config)}
    env.pop("QSITE_DATASETTE_CONFIG", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"

    def answers():
        if process.poll() is not None:
            raise RuntimeError(f"datasette exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(base + "/api/v1", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_until(answers, 30, interval=0.1), log.read_text()[-2000:]
        yield base
    finally:
        stop(process)


def test_plain_datasette_serves_the_same_api(plain, seeded_config):
    with ApiClient(datasette_for_config(seeded_config)) as reference:
        for path in PATHS:
            got = httpx.get(plain + path, timeout=10)
            expected = reference.get(path)
            assert got.status_code == expected.status_code == 200, (path, got.text[:300])
            assert got.json() == expected.json(), path
            assert got.headers["etag"] == expected.headers["etag"], path
    # the canned queries are Datasette's too, as qsite serve has them
    assert httpx.get(plain + "/site/api_courses.json?_shape=array", timeout=10).json()[0]["id"]
