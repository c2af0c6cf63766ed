"""The single-writer lock: one ingest at a time, bounded waits, and no lock outlives its process."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from qsite.pipeline.store.lock import WriterLockTimeout, lock_is_held, lock_path, writer_lock
from tests.support.local_server import Reply
from tests.support.processes import QSITE

HOLDER = """
import sys
from qsite.pipeline.store.lock import writer_lock
with writer_lock(sys.argv[1], 0):
    print("held", flush=True)
    sys.stdin.readline()  # until the test lets go (release), or kills it
"""
#: The line a writer logs when it has to wait for the lock: the event the tests wait on.
WAITING = "waiting up to"


def hold_lock(db_path) -> subprocess.Popen:
    """Another process holding the writer lock until :func:`release`; returns once it holds it."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "held"
    return process


def release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    assert holder.wait(timeout=30) == 0


def wait_for_line(process: subprocess.Popen, text: str) -> str:
    """Read ``process``'s stderr until a line containing ``text``; fails if it ends first. Returns what was read."""
    seen = ""
    for line in process.stderr:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"the process ended (status {process.wait()}) without logging {text!r}: {seen}")


def table_count(db_path, table: str) -> int:
    with sqlite3.connect(db_path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def integrity(db_path) -> str:
    with sqlite3.connect(db_path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def test_lock_is_reentrant_in_a_thread_and_exclusive_between_threads(tmp_path):
    db = tmp_path / "site.db"
    outcome = []
    with writer_lock(db, 0):
        with writer_lock(db, 0):  # `ingest all` holding it while its parts take it again
            pass

        def other_thread():
            try:
                with writer_lock(db, 0.2):
                    outcome.append("acquired")
            except WriterLockTimeout as exc:
                outcome.append(str(exc))

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert lock_is_held(db)
    assert "another qsite run is writing" in outcome[0] and str(lock_path(db)) in outcome[0]
    assert not lock_is_held(db)


@pytest.mark.slow
def test_second_ingest_gives_up_after_wait_with_a_clear_message(qsite, make_config, tmp_path):
    config = make_config()
    holder = hold_lock(tmp_path / "site.db")
    try:
        result = qsite("ingest", "site", "--config", str(config), "--wait", "0.5")
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1
    assert "another qsite run is writing to this database" in result.stderr
    assert f"pid {holder.pid}" in result.stderr  # who holds it
    assert str(tmp_path / "site.db.lock") in result.stderr and "--wait" in result.stderr
    assert not (tmp_path / "site.db").exists()  # it never touched the database


@pytest.mark.slow
def test_second_ingest_waits_for_the_first_to_finish(qsite, make_config, tmp_path):
    config = make_config()
    holder = hold_lock(tmp_path / "site.db")
    second = subprocess.Popen([QSITE, "ingest", "site", "--config", str(config), "--wait", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waited = wait_for_line(second, WAITING)  # it is waiting while the first holds the lock
    assert f"pid {holder.pid}" in waited  # and says for whom
    release(holder)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert table_count(tmp_path / "site.db", "courses") > 0


@pytest.mark.slow
def test_lock_of_a_killed_process_does_not_block(qsite, make_config, tmp_path):
    config = make_config()
    holder = hold_lock(tmp_path / "site.db")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert lock_path(tmp_path / "site.db").exists()  # the file stays; the kernel dropped the flock
    result = qsite("ingest", "site", "--config", str(config), "--wait", "0")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("wait", ["0", "30"])
@pytest.mark.slow
def test_two_concurrent_ingest_all_runs_never_overlap(qsite, make_config, http_server, sample_export, tmp_path, wait):
    """One ingests; the other waits for it (long --wait) or exits 1 (no wait). Never both at once."""
    body = __import__("json").dumps(sample_export)
    spans = []

    def slow_export(seen):
        spans.append(time.monotonic())
        return Reply(200, body, {"Content-Type": "application/json"}, stall=1.0)

    http_server.routes["/export.json"] = slow_export
    config = make_config(site_export={"source": http_server.url("/export.json")})
    command = [sys.executable, "-m", "qsite", "ingest", "all", "--config", str(config), "--wait", wait]
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=60) for run in runs]
    codes = sorted(run.returncode for run in runs)
    db = tmp_path / "site.db"
    assert integrity(db) == "ok"
    assert table_count(db, "courses") == len(sample_export["courses"])
    if wait == "0":
        assert codes == [0, 1], outputs
        assert len(spans) == 1
        assert any("another qsite run is writing" in err for _, err in outputs)
    else:
        assert codes == [0, 0], outputs
        assert len(spans) == 2
        # The second fetch began only after the first run (which stalls 1 s in its fetch) let go.
        assert spans[1] - spans[0] >= 1.0


@pytest.mark.slow
def test_migrations_of_a_new_database_wait_for_the_writer_lock(qsite, tmp_path):
    """Parallel `qsite migrate` on a new file: all succeed (no "table ... already exists"), because migrating takes the lock."""
    db_path = tmp_path / "held.db"
    holder = hold_lock(db_path)
    migrate = subprocess.Popen([QSITE, "migrate", "--db", str(db_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_line(migrate, WAITING)  # migrate did wait for the writer lock
    assert not db_path.exists() or table_count(db_path, "sqlite_master") == 0  # and made no table meanwhile
    release(holder)
    _, err = migrate.communicate(timeout=30)
    assert migrate.returncode == 0, err
    assert table_count(db_path, "courses") == 0
    # An up-to-date database has nothing to migrate: opening it never waits for a writer.
    holder = hold_lock(db_path)
    try:
        assert qsite("migrate", "--db", str(db_path), timeout=10).returncode == 0
    finally:
        holder.kill()
        holder.wait()

    for round in range(3):
        new_db = tmp_path / f"new{round}.db"
        racers = [
            subprocess.Popen([QSITE, "migrate", "--db", str(new_db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]
        results = [(racer.wait(timeout=60), racer.stderr.read()) for racer in racers]
        assert all(status == 0 for status, _ in results), results
        assert integrity(new_db) == "ok" and table_count(new_db, "courses") == 0
