"""Every example of ``qsite --help`` and each command's ``--help`` runs as written.

Each ``Example: ...`` (and each ``qsite ...`` line) of the help is run through a shell
with the environment's ``bin`` first on ``PATH`` (``.venv/bin`` after ``make up``, as
getting-started says), in a folder holding a ``qsite.yml`` (the bundled config with its
paths made absolute and its database in that folder), with ``QSITE_CONFIG`` pointing
there so that an example without ``--config`` never touches the checkout's database.
Only the port of a server is changed, to a free one. A command that serves or schedules
must still run, and a server answer, before it is stopped; any other must end with 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import httpx
import pytest
import yaml

from qsite.cli import cli
from tests.support.paths import ROOT
from tests.support.processes import free_port, stop_group, wait_until

pytestmark = pytest.mark.slow

#: The commands that run until stopped.
LONG_RUNNING = re.compile(r"\bqsite (?:\S+ )*?(serve|up|schedule)\b")
SERVER = re.compile(r"\b(qsite (?:--\S+ \S+ )*(?:serve|up))((?: --port \d+)?)")


def help_examples() -> list[str]:
    """The examples of every command's help, in the order the commands are listed."""
    found: list[str] = []

    def walk(command: click.Command) -> None:
        for line in (command.help or "").splitlines():
            line = line.strip()
            example = line.removeprefix("Example: ") if "Example: " in line else line
            example = re.sub(r"^.*?Example: ", "", example)
            if example.startswith("qsite ") and example not in found:
                found.append(example)
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name))

    walk(cli)
    return found


EXAMPLES = help_examples()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder with a ``qsite.yml`` as a newcomer would have beside them."""
    folder = tmp_path_factory.mktemp("examples")
    bundled = ROOT / "config" / "qsite.yml"
    data = yaml.safe_load(bundled.read_text(encoding="utf-8"))
    data["database"] = str(folder / "data" / "site.db")
    data["site_export"]["source"] = str((bundled.parent / data["site_export"]["source"]).resolve())
    for source in data["news"]["sources"]:
        source["url"] = str((bundled.parent / source["url"]).resolve())
    (folder / "qsite.yml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return folder


def test_the_help_has_examples_of_every_kind():
    assert len(EXAMPLES) >= 8, EXAMPLES
    assert any(LONG_RUNNING.search(example) for example in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_help_example_runs_as_written(example, folder):
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "QSITE_CONFIG": str(folder / "qsite.yml"),
    }
    port = free_port()
    command = SERVER.sub(lambda match: f"{match.group(1)} --port {port}", example)
    log = folder / f"{abs(hash(example))}.log"
    with open(log, "w+b") as output:
        process = subprocess.Popen(["bash", "-c", command], cwd=folder, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            if not LONG_RUNNING.search(example):
                assert process.wait(timeout=120) == 0, log.read_text()
                return
            if SERVER.search(example):

                def answered():
                    try:
                        return httpx.get(f"http://127.0.0.1:{port}/api/v1/stats", timeout=5).status_code == 200
                    except httpx.HTTPError:
                        return process.poll() is not None  # ended: stop waiting, the assertion below says how

                assert wait_until(answered, 90, 0.2) and process.poll() is None, log.read_text()
            else:
                assert wait_until(lambda: process.poll() is not None, 4) is False, log.read_text()  # still running
        finally:
            stop_group(process)
    assert "Traceback" not in log.read_text()
