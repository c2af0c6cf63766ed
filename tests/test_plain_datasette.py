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

from qsite.service.compat import datasette_1
from qsite.service.datasette.metadata import CONFIG_PATH, METADATA_PATH
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.processes import free_port, stop, wait_until

DATASETTE = Path(sys.executable).with_name("datasette")
PATHS = ("/api/v1/courses", "/api/v1/glossary?q=qubit", "/api/v1/news?limit=5", "/api/v1/sources", "/api/v1/stats", "/api/v1")


def start_datasette(args: list[str], config: Path, log: Path, ready: str = "/api/v1"):
    """A plain ``datasette serve`` (qsite installed, ``QSITE_CONFIG`` naming ``config``), once ``ready``
    answers 200: its process and base URL. The caller stops it."""
    port = free_port()
    env = {**os.environ, "QSITE_CONFIG": str(config)}
    env.pop("QSITE_DATASETTE_CONFIG", None)
    with open(log, "wb") as out:
        process = subprocess.Popen([str(DATASETTE), "serve", *args, "-h", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"

    def answers():
        if process.poll() is not None:
            raise RuntimeError(f"datasette exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            return httpx.get(base + ready, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_until(answers, 30, interval=0.1), log.read_text()[-2000:]
    except BaseException:
        stop(process)
        raise
    return process, base


@pytest.fixture
def plain(seeded_config, tmp_path):
    args = [str(tmp_path / "site.db"), "-m", str(METADATA_PATH)]
    if datasette_1():
        args += ["-c", str(CONFIG_PATH)]
    process, base = start_datasette(args, seeded_config, tmp_path / "datasette.log")
    try:
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


def with_database_allow(tmp_path, allow) -> Path:
    """The bundled datasette.yaml with ``allow`` on the database (not on any query)."""
    import yaml

    from qsite.service.datasette.metadata import read_config_file

    data = read_config_file()
    (entry,) = data["databases"].values()
    entry["allow"] = allow
    path = tmp_path / "db-deny.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.skipif(datasette_1(), reason="Datasette 1.0 takes the whole file as -c datasette.yaml")
def test_plain_datasette_065_refuses_to_start_without_the_files_permissions(seeded_config, tmp_path):
    """A database ``allow`` in QSITE_DATASETTE_CONFIG, which 0.65 (no -c) cannot take: one Error line, no server."""
    deny = with_database_allow(tmp_path, {"id": "editor"})
    env = {**os.environ, "QSITE_CONFIG": str(seeded_config), "QSITE_DATASETTE_CONFIG": str(deny)}
    args = [str(DATASETTE), "serve", str(tmp_path / "site.db"), "-m", str(METADATA_PATH), "--get", "/api/v1/news"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""  # nothing served
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert str(deny) in line and "databases.site.allow" in line
    assert "metadata.yml" in line and "qsite serve --datasette-config" in line
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(datasette_1(), reason="Datasette 1.0 takes the whole file as -c datasette.yaml")
def test_plain_datasette_065_serves_when_the_permissions_are_in_metadata(seeded_config, tmp_path, monkeypatch):
    """The same ``allow`` written in metadata.yml too: in force, so Datasette starts, and it holds everywhere."""
    import asyncio

    from datasette.app import Datasette

    from qsite.service.datasette.metadata import load_metadata
    from qsite.service.datasette.plugin import ConfigNotApplied

    deny = with_database_allow(tmp_path, {"id": "editor"})
    monkeypatch.setenv("QSITE_CONFIG", str(seeded_config))
    monkeypatch.setenv("QSITE_DATASETTE_CONFIG", str(deny))
    files = [str(tmp_path / "site.db")]
    plain = Datasette(files, metadata=load_metadata("site"))  # what `datasette serve -m metadata.yml` builds
    with pytest.raises(ConfigNotApplied, match="databases.site.allow"):
        asyncio.run(plain.invoke_startup())
    metadata = load_metadata("site")
    metadata["databases"]["site"]["allow"] = {"id": "editor"}
    with ApiClient(Datasette(files, metadata=metadata)) as client:
        for path in ("/api/v1/news", "/site/api_news.json", "/site/courses.json", "/site.json?sql=select+1"):
            assert client.get(path).status_code == 403, path


def test_plain_datasette_without_qsites_database_answers_503s_and_logs_the_reason_once(seeded_config, tmp_path):
    """`datasette serve --memory` with qsite installed: /api/v1 answers 503, and its log says why once,
    never a traceback per request (a misconfigured instance must not flood its log)."""
    log = tmp_path / "datasette.log"
    process, base = start_datasette(["--memory"], seeded_config, log, ready="/-/versions.json")
    try:
        for _ in range(5):
            response = httpx.get(base + "/api/v1/news", timeout=10)
            assert response.status_code == 503 and response.json()["type"] == "/api/v1/problems/unavailable"
            assert str(tmp_path) not in response.text  # the reason names a local path: logged, never sent
    finally:
        stop(process)
    text = log.read_text()
    assert text.count("is not served by this Datasette") == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
