"""``--quiet`` prints nothing at all when the command succeeds, and only the failures when it does not; ``--version``."""

from __future__ import annotations

from importlib import metadata

import pytest

from tests.support.paths import FEEDS
from tests.support.processes import run_qsite

#: Real ``qsite`` processes, a second or more each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOURCES = [
    {"name": "Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
    {"name": "Industry Wire", "url": str(FEEDS / "industry-wire.atom"), "tag": "Industry"},
]


@pytest.mark.parametrize(
    "command",
    [("migrate",), ("ingest", "site"), ("ingest", "news"), ("ingest", "all")],
    ids=lambda command: " ".join(command),
)
def test_quiet_success_prints_nothing(qsite, make_config, command):
    path = make_config(news={"sources": SOURCES})
    loud = qsite(*command, "--config", str(path), env={"QSITE_LOG_LEVEL": "INFO"})
    assert loud.returncode == 0 and loud.stdout, loud.stderr  # the same run without --quiet says what it did
    # Quiet on the same database (everything unchanged), then on a new one (everything to store).
    for db, flag in (("site.db", "--quiet"), ("fresh.db", "-q")):
        done = qsite(*command, "--config", str(path), "--db", str(path.parent / db), flag, env={"QSITE_LOG_LEVEL": "INFO"})
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_quiet_ingest_stored_the_data(qsite, make_config):
    from qsite.pipeline.store import open_database

    path = make_config(news={"sources": SOURCES})
    done = qsite("ingest", "all", "--config", str(path), "--quiet")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    db = open_database(path.parent / "site.db")
    assert db.execute("SELECT count(*) FROM courses").fetchone()[0] > 0
    assert {row[0] for row in db.execute("SELECT DISTINCT source FROM news")} == {"Lab Notes", "Industry Wire"}


def test_quiet_failure_prints_only_the_failures_on_stderr(qsite, make_config, tmp_path):
    missing = tmp_path / "gone.json"
    path = make_config(site_export={"source": str(missing)}, news={"sources": [*SOURCES, {**SOURCES[0], "name": "Gone", "url": str(tmp_path / "gone.xml")}]})
    done = qsite("ingest", "all", "--config", str(path), "--quiet", env={"QSITE_LOG_LEVEL": "INFO"})
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith("site ") and str(missing) in lines[0] and "failed" in lines[0]
    assert lines[1].startswith("news Gone: failed")


def test_version():
    done = run_qsite("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"qsite, version {metadata.version('qsite')}\n", "")
