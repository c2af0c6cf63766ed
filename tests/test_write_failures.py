"""A database location that cannot be written: a clear message, exit status 1, the data intact.

Tests run as root in CI, where ``chmod`` blocks nothing, so the location is
made unwritable for real:

* full: a tiny tmpfs mounted for the test and filled to within a few KiB (as
  root); otherwise a file-size limit (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored) on
  the ``qsite`` process, which no user can write past, so the database file
  cannot grow. The limit variant also runs as root.
* read-only: the same tmpfs remounted read-only (as root); otherwise ``chmod``,
  which does bind an ordinary user.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.feeds import RSS_TYPE, Entry, rss
from tests.support.local_server import Reply
from tests.support.paths import SITE_EXPORT
from tests.support.processes import run_qsite
from tests.support.snapshot import snapshot

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

ROOT = os.geteuid() == 0
TMPFS_SIZE = "4m"
#: Room left on the filled disk: enough to open the database, not to store a big feed.
HEADROOM_KB = 120


def big_feed(count: int, words: int = 20) -> str:
    entries = [Entry(f"https://big.example/{n}", f"Big story {n}", summary="words and more words " * words) for n in range(count)]
    return rss(entries, title="Big", link="https://big.example/")


@pytest.fixture
def location(tmp_path):
    """A folder for the database: a fresh tmpfs when root, else a plain folder."""
    folder = tmp_path / "mnt"
    folder.mkdir()
    mounted = False
    if ROOT:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(folder)], check=True)
        mounted = True
    yield folder
    if mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)
    else:
        for path in [folder, *folder.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def loaded(location, make_config, http_server):
    """Sample export and a small feed ingested into the database in ``location``."""
    feed = {"body": big_feed(10, words=2)}
    http_server.routes["/feed.xml"] = lambda seen: Reply(200, feed["body"], RSS_TYPE)
    config = make_config(
        database=str(location / "site.db"),
        news={"every": "1s", "sources": [{"name": "Big", "url": http_server.url("/feed.xml"), "tag": "Science"}]},
    )
    result = run_qsite("ingest", "all", "--config", str(config))
    assert result.returncode == 0, result.stderr
    return config, location / "site.db", feed


def contents(db_path: Path) -> dict:
    """The rows of the data tables, once the database passes its integrity check."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    return snapshot(db_path, ("courses", "sections", "glossary", "site_totals", "news", "data_versions"))


def assert_clear_failure(result, *words):
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    text = result.stdout + result.stderr
    assert any(word in text for word in words), text[-2000:]


def fill(folder: Path, headroom_kb: int = HEADROOM_KB) -> Path:
    stats = os.statvfs(folder)
    free_kb = stats.f_bavail * stats.f_frsize // 1024
    filler = folder / "filler"
    with open(filler, "wb") as out:
        out.write(b"\0" * max(0, free_kb - headroom_kb) * 1024)
    return filler


def limit_file_size(max_bytes: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process instead of failing the write
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return apply


def squeeze(folder: Path, db_path: Path):
    """Make the location full: tmpfs filled (root) or a file-size limit (anyone). Returns (preexec, undo)."""
    if ROOT:
        filler = fill(folder)
        return None, filler.unlink
    return limit_file_size(db_path.stat().st_size + 8192), lambda: None


DISK_FULL = ("database or disk is full", "disk I/O error", "No space left", "File too large")


def test_full_location_fails_news_ingest_clearly_and_keeps_data(loaded):
    config, db_path, feed = loaded
    before = contents(db_path)
    feed["body"] = big_feed(600)
    preexec, undo = squeeze(db_path.parent, db_path)
    result = run_qsite("ingest", "news", "--config", str(config), preexec_fn=preexec)
    assert_clear_failure(result, *DISK_FULL)
    assert str(db_path) in result.stderr
    undo()
    assert contents(db_path) == before
    again = run_qsite("ingest", "news", "--config", str(config))  # room again: it recovers
    assert again.returncode == 0, again.stderr
    assert len(contents(db_path)["news"]) == 600


def test_full_location_fails_site_ingest_clearly_and_keeps_data(loaded, tmp_path, sample_export):
    import json

    config, db_path, _ = loaded
    before = contents(db_path)
    for course in sample_export["courses"]:
        course["summary"] += " padding" * 4000
    export = tmp_path / "big-export.json"
    export.write_text(json.dumps(sample_export), encoding="utf-8")
    # Same location, a bigger export: it cannot fit.
    text = config.read_text().replace(str(SITE_EXPORT), str(export))
    config.write_text(text)
    preexec, undo = squeeze(db_path.parent, db_path)
    result = run_qsite("ingest", "site", "--config", str(config), preexec_fn=preexec)
    undo()
    assert_clear_failure(result, *DISK_FULL)
    assert contents(db_path) == before


def test_a_database_file_that_cannot_grow(loaded):
    """RLIMIT_FSIZE binds root too: the database file and its WAL cannot grow past the limit."""
    config, db_path, feed = loaded
    before = contents(db_path)
    feed["body"] = big_feed(600)
    result = run_qsite("ingest", "news", "--config", str(config), preexec_fn=limit_file_size(db_path.stat().st_size + 8192))
    assert_clear_failure(result, *DISK_FULL)
    assert contents(db_path) == before


@contextmanager
def read_only(folder):
    """``folder`` read-only while the block runs: remounted as root (its own tmpfs), else by mode bits."""
    if ROOT:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        for path in [*folder.iterdir(), folder]:
            path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        if ROOT:
            subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)


@pytest.mark.parametrize("command", [("ingest", "site"), ("ingest", "news"), ("ingest", "all")])
def test_read_only_location_fails_clearly_and_keeps_data(loaded, command):
    config, db_path, feed = loaded
    before = contents(db_path)
    feed["body"] = big_feed(20)
    with read_only(db_path.parent):
        result = run_qsite(*command, "--config", str(config))
    assert_clear_failure(result, "Read-only file system", "readonly database", "Permission denied", "unable to open")
    assert str(db_path) in result.stderr
    assert contents(db_path) == before


@pytest.mark.parametrize("command", [("status",), ("migrate",)])
def test_an_open_on_a_read_only_location_names_the_folder_as_the_likely_reason(loaded, command):
    config, db_path, feed = loaded
    with read_only(db_path.parent):
        result = run_qsite(*command, "--config", str(config))
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: {db_path}: cannot open database: "), line
    assert line.endswith(f"(the folder {db_path.parent} is not writable: WAL mode needs to create site.db-shm and site.db-wal in it)"), line
