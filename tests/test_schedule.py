"""The scheduler: jobs run on second-scale intervals, never overlap, survive failures and stop on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from qsite.config import load_config
from qsite.pipeline.ops.schedule import JobSpec, Scheduler, run_forever
from qsite.pipeline.report import RunReport
from tests.support.local_server import Reply
from tests.support.processes import QSITE, stop, wait_until

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow


@contextmanager
def qsite_schedule(config, grace: str):
    """A real ``qsite schedule`` with its output captured; killed at the end if the test did not stop it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "qsite", "schedule", "--config", str(config), "--grace", grace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def sigterm(process: subprocess.Popen, timeout: float) -> tuple[str, float]:
    """Send SIGTERM; returns the process's stderr and the seconds it took to exit."""
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=timeout)
    return err, time.monotonic() - sent


def test_jobs_run_in_turn_and_a_raising_job_does_not_stop_the_scheduler(make_config):
    config = load_config(make_config())
    spans: list[tuple[str, float, float]] = []
    calls = {"flaky": 0, "steady": 0}

    def flaky(config, wait):
        calls["flaky"] += 1
        start = time.monotonic()
        time.sleep(0.2)  # review: the job's work (its span is what is checked), not a wait
        spans.append(("flaky", start, time.monotonic()))
        if calls["flaky"] == 1:
            raise RuntimeError("feed host exploded")
        return [RunReport("news", "Flaky", "ok")]

    def steady(config, wait):
        calls["steady"] += 1
        start = time.monotonic()
        time.sleep(0.3)  # review: the job's work (its span is what is checked), not a wait
        spans.append(("steady", start, time.monotonic()))
        return [RunReport("site", "export", "unchanged")]

    scheduler = Scheduler(config, jobs=[JobSpec("steady", 1, steady), JobSpec("flaky", 1, flaky)], grace=2)
    stop = threading.Event()
    result = []
    thread = threading.Thread(target=lambda: result.append(run_forever(scheduler, stop)))
    thread.start()
    try:
        assert wait_until(lambda: calls["flaky"] >= 3 and calls["steady"] >= 3, timeout=15)
        next_runs = scheduler.next_runs()
    finally:
        stop.set()
        thread.join(10)
    assert result == [True]  # stopped with nothing left running
    assert scheduler.activity.failures >= 1
    assert set(next_runs) == {"steady", "flaky"}
    # The start-up runs come first, site-like job before the other, and no two runs ever overlap.
    assert [name for name, _, _ in spans[:2]] == ["steady", "flaky"]
    ordered = sorted(spans, key=lambda span: span[1])
    for (_, _, end), (_, start, _) in zip(ordered, ordered[1:]):
        assert start >= end


def test_qsite_schedule_process(qsite, make_config, http_server, sample_export, tmp_path):
    """A real `qsite schedule`: a failed first run, then data; runs never overlap; SIGTERM exits 0 in time."""
    body = json.dumps(sample_export)
    seen: list[float] = []
    stall = 0.6

    def export(request):
        seen.append(time.monotonic())
        if len(seen) == 1:
            return Reply(500, "down for maintenance")
        return Reply(200, body, {"Content-Type": "application/json"}, stall=stall)

    http_server.routes["/export.json"] = export
    config = make_config(site_export={"source": http_server.url("/export.json"), "every": "1s"})
    with qsite_schedule(config, grace="3") as process:
        assert wait_until(lambda: len(seen) >= 4, timeout=20), "the scheduler stopped fetching"
        # Let a fetch be in flight when the signal comes, so the stop has to let it finish.
        assert wait_until(lambda: time.monotonic() - seen[-1] < stall / 2, timeout=5)
        err, took = sigterm(process, timeout=15)
    assert process.returncode == 0, err
    assert took < 6, f"SIGTERM took {took:.1f} s"
    assert "received SIGTERM, stopping" in err and "scheduler stopped" in err
    # The failure was logged with the source, and later runs still happened and stored the export.
    assert "site " in err and "failed" in err and "500" in err
    with sqlite3.connect(tmp_path / "site.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM courses").fetchone()[0] == len(sample_export["courses"])
        statuses = [row[0] for row in conn.execute("SELECT status FROM ingest_runs WHERE kind = 'site' ORDER BY id")]
    assert statuses[0] == "failed" and "ok" in statuses[1:]
    # max_instances=1 and one worker: each fetch starts after the previous one's stall ended.
    for before, after in zip(seen[1:], seen[2:]):
        assert after - before >= stall


def test_sigterm_does_not_wait_past_the_grace_for_a_stuck_ingest(make_config, http_server, sample_export, tmp_path):
    """A fetch stalled far past --grace: the process still exits 0 promptly, and the database stays sound."""
    fetches = []

    def stuck(request):
        fetches.append(time.monotonic())
        return Reply(200, json.dumps(sample_export), {"Content-Type": "application/json"}, stall=8)

    http_server.routes["/export.json"] = stuck
    config = make_config(site_export={"source": http_server.url("/export.json")})
    with qsite_schedule(config, grace="0.5") as process:
        assert wait_until(lambda: fetches, timeout=15)
        err, took = sigterm(process, timeout=10)
    assert process.returncode == 0, err
    assert took < 5, f"SIGTERM took {took:.1f} s"
    assert "job still running" in err
    with sqlite3.connect(tmp_path / "site.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM courses").fetchone()[0] == 0  # nothing half-written


def test_sigint_stops_qsite_schedule_with_status_0(make_config, tmp_path):
    """Ctrl-C (SIGINT) stops a real `qsite schedule` as SIGTERM does: cleanly, exit status 0."""
    config = make_config()
    log = tmp_path / "schedule.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([QSITE, "schedule", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: "job site: done" in log.read_text() or process.poll() is not None, timeout=20)
        assert process.poll() is None, log.read_text()
        assert stop(process, signal.SIGINT, timeout=10) == 0, log.read_text()
    finally:
        stop(process, signal.SIGKILL)
    text = log.read_text()
    assert "received SIGINT, stopping" in text and "scheduler stopped" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


def test_qsite_up_with_a_database_it_cannot_open_or_write_ends_with_one_error_line(qsite, make_config, tmp_path):
    config = make_config()
    done = qsite("up", "--config", str(config), "--db", "/proc/nope/site.db", "--port", "0", timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: /proc/nope/site.db: cannot open database: ")

    # Opening works but the first ingest cannot take the writer lock: its file is a folder.
    db_path = tmp_path / "site.db"
    assert qsite("migrate", "--db", str(db_path)).returncode == 0
    lock = tmp_path / "site.db.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    done = qsite("up", "--config", str(config), "--port", "0", timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"Error: {db_path}: cannot write the database: ")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_children_of_a_killed_qsite_up_stop_with_it(make_config, tmp_path):
    from tests.support.processes import answered, qsite_serve, worker_pids

    with qsite_serve(make_config(), tmp_path / "up.log", command="up", timeout=60) as up:
        children = worker_pids(up.process.pid)  # its `qsite schedule` and `qsite serve`
        assert len(children) == 2
        up.process.kill()  # SIGKILL: no chance to stop them itself
        up.process.wait()

        def running() -> list[int]:
            return [pid for pid in children if "zombie" not in status_of(pid)]

        try:
            assert wait_until(lambda: not running(), 20), f"still running: {running()}"
        finally:
            for pid in running():  # a failed run leaves no server behind
                os.kill(pid, signal.SIGTERM)
        assert not answered(up, "/api/v1")  # the port is free again


def status_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "zombie"  # gone meanwhile
