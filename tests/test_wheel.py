"""The built wheel, installed into a fresh venv beside Datasette 0.65.5 and beside the 1.0 alpha, resolves and serves.

``pip install qsite`` into someone's Datasette is not the editable checkout:
nothing of the repository is beside the installed packages. Here ``datasette
serve`` (no ``qsite serve``, no ``-m``/``-c``, no ``QSITE_*`` variables, run from
an empty folder) starts with qsite loaded from its entry points, over an
in-memory database and over a database of the user's own, and ``/api/v1``
answers from the files the wheel ships.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import zipfile

import httpx
import pytest

from tests.support.processes import free_port, stop, wait_until
from tests.support.wheel import build_wheel, venv_with

pytestmark = pytest.mark.slow

DATASETTES = ("datasette==0.65.5", "datasette==1.0a41")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module", params=DATASETTES)
def installed(request, wheel, tmp_path_factory):
    return venv_with(tmp_path_factory.mktemp("venv") / "venv", wheel, request.param), request.param


def _serve(bin_dir, args, cwd):
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("QSITE_", "PYTHONPATH"))}
    log = cwd / f"datasette-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(bin_dir / "datasette"), "serve", *args, "-h", "127.0.0.1", "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
        )
    base = f"http://127.0.0.1:{port}"

    def up():
        if process.poll() is not None:
            raise AssertionError(f"datasette exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return httpx.get(base + "/-/versions.json", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_until(up, 60, interval=0.1), log.read_text()[-3000:]
    return process, base


def test_the_wheel_ships_the_files_the_plugin_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"qsite/service/datasette/metadata.yml", "qsite/service/datasette/datasette.yaml"} <= names


def test_the_wheel_installs_one_package_named_qsite(wheel):
    """No generic top-level names (``config``, ``db``, ``service``, ``pipeline``) in a user's environment."""
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"qsite"}
    for package in ("config", "db", "pipeline", "service"):
        assert f"qsite/{package}/__init__.py" in names
    (entry_points,) = [zipfile.ZipFile(wheel).read(name).decode() for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "= qsite.service." in entry_points and "= service." not in entry_points


def test_the_installed_versions_are_the_ones_asked_for(installed):
    bin_dir, datasette = installed
    version = subprocess.run(
        [str(bin_dir / "python"), "-c", "import datasette.version as v; print(v.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert version == datasette.split("==")[1]
    # and nothing of the checkout is reachable from there
    found = subprocess.run(
        [str(bin_dir / "python"), "-c", "import qsite.service.datasette.metadata as m; print(m.CONFIG_PATH)"],
        capture_output=True, text=True, check=True, cwd=bin_dir,
    ).stdout.strip()
    assert found.startswith(str(bin_dir.parent)), found


@pytest.mark.parametrize("database", ["--memory", "own.db"])
def test_datasette_serve_starts_with_the_wheel_and_answers_the_api(installed, database, tmp_path):
    bin_dir, _ = installed
    args = ["--memory"]
    if database == "own.db":
        with sqlite3.connect(tmp_path / "own.db") as conn:
            conn.execute("create table notes (id integer primary key, body text)")
            conn.execute("insert into notes (body) values ('kept')")
        args = [str(tmp_path / "own.db")]
    process, base = _serve(bin_dir, args, tmp_path)
    try:
        root = httpx.get(base + "/api/v1", timeout=10)
        assert root.status_code == 200, root.text
        assert root.json()["name"] == "qsite"
        assert httpx.get(base + "/api/v1/openapi.json", timeout=10).status_code == 200
        if database == "own.db":
            rows = httpx.get(base + "/own/notes.json?_shape=array", timeout=10)
            assert rows.status_code == 200, rows.text
            assert rows.json() == [{"id": 1, "body": "kept"}]
    finally:
        stop(process)
