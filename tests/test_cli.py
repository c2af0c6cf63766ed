"""The command line's shared behaviour: ``--log-level``/``QSITE_LOG_LEVEL``, and how ``qsite ingest news`` reports progress."""

from __future__ import annotations

import os
import pty
import re
import subprocess

import pytest

from tests.support.paths import FEEDS
from tests.support.processes import QSITE

#: Real ``qsite`` processes, a second or more each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOURCES = [
    {"name": "Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
    {"name": "Industry Wire", "url": str(FEEDS / "industry-wire.atom"), "tag": "Industry"},
    {"name": "Capital Brief", "url": str(FEEDS / "capital-brief.rdf"), "tag": "Investing"},
]


def log_levels(stderr: str) -> set[str]:
    """The levels of the log lines (``<date> <time> LEVEL name: message``) in ``stderr``."""
    return {line.split()[2] for line in stderr.splitlines() if len(line.split()) > 3 and line.split()[3].endswith(":")}


@pytest.mark.parametrize(
    "env, args, levels",
    [
        ({}, (), {"INFO"}),
        ({"QSITE_LOG_LEVEL": "WARNING"}, (), set()),
        ({"QSITE_LOG_LEVEL": "DEBUG"}, (), {"DEBUG", "INFO"}),
        ({"QSITE_LOG_LEVEL": "DEBUG"}, ("--log-level", "warning"), set()),  # the option beats the environment
        ({}, ("--log-level", "debug"), {"DEBUG", "INFO"}),
    ],
)
def test_log_level_from_option_or_environment(qsite, make_config, env, args, levels):
    result = qsite("ingest", "site", "--config", str(make_config()), *args, env={"QSITE_LOG_LEVEL": "INFO", **env})
    assert result.returncode == 0, result.stderr
    assert log_levels(result.stderr) == levels, result.stderr
    assert "site " in result.stdout and ": ok" in result.stdout  # the report itself is not a log line
    if "DEBUG" in levels:
        assert "DEBUG qsite.lock: writer lock" in result.stderr


@pytest.mark.parametrize("command", ["news", "all"])
def test_news_progress_bar_on_a_terminal(make_config, command):
    """On a terminal: a progress bar naming each source as it is stored, then one line per source.

    ``ingest all`` prints the site export's line first, and the bar once the news sweep starts.
    """
    config = make_config(news={"sources": SOURCES})
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [QSITE, "ingest", command, "--config", str(config)], stdin=terminal, stdout=terminal, stderr=terminal,
        env={**os.environ, "COLUMNS": "100", "QSITE_LOG_LEVEL": "WARNING"},
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert process.wait(30) == 0
    text = shown.decode()
    assert "news  [" in text and "#" in text and "100%" in text
    for source in SOURCES:
        # the bar names the source just stored (after click's ETA, once a step has taken a second)
        assert re.search(rf"%  (\d\d:\d\d:\d\d  )?{re.escape(source['name'])}", text), text
        assert f"news {source['name']}: ok" in text
    assert text.index("100%") < text.index("news Lab Notes: ok")  # the bar first, the lines after it
    if command == "all":
        assert text.index("site ") < text.index("news  [") and ": ok (courses" in text


def test_news_plain_lines_when_piped(qsite, make_config):
    config = make_config(news={"sources": SOURCES})
    result = qsite("ingest", "news", "--config", str(config), env={"QSITE_LOG_LEVEL": "WARNING"})
    assert result.returncode == 0, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == [f"news {source['name']}" for source in SOURCES]
    assert "[" not in result.stdout + result.stderr and "%" not in result.stdout + result.stderr


def test_global_options_go_before_or_after_the_command(qsite, make_config, tmp_path):
    config = make_config(database=str(tmp_path / "unused.db"))
    db = tmp_path / "given.db"
    before = qsite("--config", str(config), "--db", str(db), "--log-level", "warning", "ingest", "site")
    assert before.returncode == 0, before.stderr
    assert db.exists() and not (tmp_path / "unused.db").exists()
    assert log_levels(before.stderr) == set(), before.stderr
    # after the command's name beats before it; an option beats the environment on either side
    after = qsite("--log-level", "warning", "ingest", "site", "--config", str(config), "--log-level", "info",
                  env={"QSITE_CONFIG": str(tmp_path / "missing.yml")})
    assert after.returncode == 0, after.stderr
    assert log_levels(after.stderr) == {"INFO"}, after.stderr
    news = qsite("--config", str(config), "ingest", "news")
    assert news.returncode == 0, news.stderr



def test_global_options_go_between_ingest_and_its_command(qsite, make_config, tmp_path):
    """``qsite ingest --config X news``, as ``qsite --help`` promises; the option nearest the command wins."""
    config = make_config(database=str(tmp_path / "unused.db"))
    db = tmp_path / "given.db"
    between = qsite("ingest", "--config", str(config), "--db", str(db), "--log-level", "warning", "site")
    assert between.returncode == 0, between.stderr
    assert db.exists() and not (tmp_path / "unused.db").exists()
    assert log_levels(between.stderr) == set(), between.stderr
    # after ingest beats before it and the environment; after the command beats after ingest
    missing = str(tmp_path / "missing.yml")
    nearer = qsite("--config", missing, "--log-level", "error", "ingest", "--config", str(config), "--log-level", "warning",
                   "site", "--log-level", "info", env={"QSITE_CONFIG": missing})
    assert nearer.returncode == 0, nearer.stderr
    assert log_levels(nearer.stderr) == {"INFO"}, nearer.stderr
    assert qsite("ingest", "--config", missing, "site", "--config", str(config)).returncode == 0

def test_global_options_show_in_the_top_level_help(qsite):
    result = qsite("--help")
    assert result.returncode == 0
    for option in ("--config", "--db", "--log-level", "QSITE_CONFIG", "QSITE_DB", "QSITE_LOG_LEVEL"):
        assert option in result.stdout
