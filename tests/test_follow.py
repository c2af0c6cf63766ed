"""``qsite serve --follow``: replicas that download, check and swap in published snapshots (a folder store)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import yaml

from qsite.config import load_config
from qsite.db.snapshot import NAME_PATTERN, Pointer, snapshot_name
from qsite.pipeline.store import open_database
from qsite.service.datasette.state import instance
from qsite.service.replica.claims import Claim, remove_unclaimed
from qsite.service.replica.follow import Follower
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.openapi_check import OpenAPICheck
from tests.support.known_data import news_items, seed_news
from tests.support.processes import free_port, qsite_serve, wait_until, worker_pids
from tests.support.site_exports import other_export

SNAPSHOTS = {"store": "store", "poll": "1s", "keep": 20}


class Writer:
    """The writer's side, in-process: ingest an export, publish to the folder store."""

    def __init__(self, tmp_path: Path, make_config, sample_export: dict):
        self.export = tmp_path / "export.json"
        self.export.write_text(json.dumps(sample_export))
        self.sample = sample_export
        self.config_path = make_config(site_export={"source": str(self.export)}, snapshots=SNAPSHOTS)
        self.config = load_config(self.config_path)
        self.store = tmp_path / "store"

    def publish(self, export: dict | None = None) -> Pointer:
        from qsite.pipeline.ops.ingest import SITE, run_ingest
        from qsite.pipeline.ops.publish import publish

        if export is not None:
            self.export.write_text(json.dumps(export))
        run_ingest(self.config, kinds=(SITE,))
        return publish(self.config).pointer

    def put(self, name: str, data: bytes, pointer: Pointer | None = None, raw_pointer: bytes | None = None) -> None:
        """Put a file and a pointer into the store by hand, as a broken or hostile writer might."""
        (self.store / name).write_bytes(data)
        (self.store / "latest.json").write_bytes(raw_pointer if raw_pointer is not None else pointer.to_json())


@pytest.fixture
def writer(tmp_path, make_config, sample_export) -> Writer:
    return Writer(tmp_path, make_config, sample_export)


def follow(writer: Writer, tmp_path: Path, name: str, config: Path | None = None):
    return qsite_serve(config or writer.config_path, tmp_path / f"{name}.log", args=["--follow", "--data-dir", str(tmp_path / name)])


def serving(replica) -> str | None:
    response = httpx.get(replica.url("/api/v1/snapshot"), timeout=5)
    return response.json()["file"] if response.status_code == 200 else None


def open_files(pid: int, name: str) -> list[str]:
    """The replica's open file descriptors on files called ``name`` (deleted ones included)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if name in target:
            found.append(target)
    return found


def pointer_for(data: bytes, data_version: int) -> Pointer:
    sha256 = hashlib.sha256(data).hexdigest()
    return Pointer(snapshot_name(data_version, sha256), sha256, data_version, "2026-11-22T10:00:00Z", len(data), 2)


@pytest.mark.slow
def test_replicas_answer_503_until_the_first_snapshot_then_serve_it_with_the_same_validators(writer, tmp_path):
    with ExitStack() as stack:
        replicas = [stack.enter_context(follow(writer, tmp_path, f"replica-{n}")) for n in range(2)]
        for path in ("/api/v1/stats", "/api/v1", "/site/news.json", "/"):
            response = httpx.get(replicas[0].url(path))
            assert response.status_code == 503, path
            assert response.headers["retry-after"] == "1"
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["type"] == "/api/v1/problems/unavailable"
        # the health document itself, as docs/news-api.md has it: a monitor reads its status
        health = httpx.get(replicas[0].url("/api/v1/health"))
        assert (health.status_code, health.headers["retry-after"], health.headers["cache-control"]) == (503, "1", "no-store")
        assert health.json()["status"] == "no-data" and health.json()["snapshot"] is None
        assert httpx.head(replicas[0].url("/api/v1/health")).status_code == 503
        assert wait_until(lambda: "nothing published yet" in replicas[0].log.read_text(), 10)

        latest = writer.publish()
        assert wait_until(lambda: all(serving(replica) == latest.file for replica in replicas), 20)
        log = replicas[0].log.read_text()
        assert log.count("nothing published yet") == 1, log  # one line, however many polls
        assert f"serving {latest.file} (data version {latest.data_version}" in log

        openapi = OpenAPICheck(httpx.get(replicas[0].url("/api/v1/openapi.json")).json())
        answers = []
        for replica in replicas:
            for path in ("/api/v1/stats", "/api/v1/glossary", "/api/v1/courses", "/api/v1/snapshot"):
                response = httpx.get(replica.url(path))
                openapi.check("GET", response)
                answers.append((path, response.headers["etag"], response.headers.get("last-modified"), response.content))
        assert answers[:4] == answers[4:]  # byte for byte, validators included, on both replicas
        etag = answers[0][1]
        assert httpx.get(replicas[1].url("/api/v1/stats"), headers={"If-None-Match": etag}).status_code == 304
        assert httpx.get(replicas[0].url("/api/v1")).json()["endpoints"]["snapshot"] == "/api/v1/snapshot"
        # which snapshot answered: in the index, in /health and in a header of every built answer
        assert httpx.get(replicas[0].url("/api/v1")).json()["snapshot"] == latest.file
        assert httpx.get(replicas[1].url("/api/v1/stats")).headers["x-qsite-snapshot"] == latest.file
        health = httpx.get(replicas[1].url("/api/v1/health"))
        assert health.status_code == 200 and health.headers["x-qsite-snapshot"] == latest.file
        assert health.json()["snapshot"] == latest.file and health.json()["data_version"] == latest.data_version
        assert httpx.get(replicas[0].url("/site/courses.json")).status_code == 200  # Datasette serves the snapshot too

        described = httpx.get(replicas[0].url("/api/v1/snapshot")).json()
        assert described == {
            "file": latest.file,
            "data_version": latest.data_version,
            "schema_version": latest.schema_version,
            "bytes": latest.bytes,
            "sha256": latest.sha256,
            "published_at": latest.published_at,
            "download": f"/api/v1/snapshot/{latest.file}",
        }
        download = httpx.get(replicas[1].url(described["download"]))
        openapi.check("GET", download)
        assert hashlib.sha256(download.content).hexdigest() == latest.sha256
        # bytes, as client generators read a file (the schema names the real type, application/vnd.sqlite3)
        assert download.headers["content-type"] == "application/octet-stream"
        assert download.headers["etag"] == f'"{latest.sha256}"'
        assert "ratelimit" in download.headers  # counted against fair use like any request
        head = httpx.head(replicas[1].url(described["download"]))
        openapi.check("HEAD", head)
        assert head.headers["content-length"] == str(latest.bytes) and head.content == b""
        again = httpx.get(replicas[1].url(described["download"]), headers={"If-None-Match": f'"{latest.sha256}"'})
        openapi.check("GET", again)
        assert again.status_code == 304
        for path, status in (
            ("/api/v1/snapshot/site-v00000001-0000000000000000.db", 404),
            ("/api/v1/snapshot/../site.db", 404),
            ("/api/v1/snapshot?format=csv", 400),
        ):
            response = httpx.get(replicas[0].url(path))
            openapi.check("GET", response, path=path.split("?")[0])
            assert response.status_code == status, path
        posted = httpx.post(replicas[0].url("/api/v1/snapshot"))
        openapi.check("POST", posted)
        assert posted.status_code == 405
        docs = httpx.get(replicas[0].url("/api/v1/docs?lang=ja"))
        openapi.check("GET", docs, path="/api/v1/docs")
        assert f"&#34;file&#34;: &#34;{latest.file}&#34;" in docs.text  # the example, answered by this replica


@pytest.mark.slow
def test_a_swap_lets_a_download_in_flight_finish_on_the_old_file_and_then_removes_it(writer, tmp_path, sample_export):
    writer.publish()
    # 24 MB of run history: far more than loopback socket buffers hold, so the replica is still
    # reading the old file when the swap happens and after
    conn = sqlite3.connect(writer.config.database_path)
    conn.execute(
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 12) "
        "insert into ingest_runs (kind, source, started_at, status, error) "
        "select 'site', 'padding', '2026-11-22T00:00:00Z', 'failed', hex(randomblob(1000000)) from n"
    )
    conn.execute("update data_versions set version = version + 1 where dataset = 'catalog'")
    conn.commit()
    conn.close()
    first = writer.publish()
    assert first.bytes > 24_000_000
    with follow(writer, tmp_path, "replica") as replica:
        assert wait_until(lambda: serving(replica) == first.file, 20)
        assert httpx.get(replica.url("/api/v1/courses")).json()["count"] == len(sample_export["courses"])
        with httpx.stream("GET", replica.url(f"/api/v1/snapshot/{first.file}")) as download:
            chunks = download.iter_bytes(64 * 1024)
            received = [next(chunks)]
            second = writer.publish(other_export(sample_export))
            assert wait_until(lambda: serving(replica) == second.file, 20)
            # The new data is served at once; the old file still streams to the client that asked for it.
            assert httpx.get(replica.url("/api/v1/courses")).json()["count"] == len(sample_export["courses"]) - 1
            received.extend(chunks)
        assert hashlib.sha256(b"".join(received)).hexdigest() == first.sha256
        assert httpx.get(replica.url(f"/api/v1/snapshot/{first.file}")).status_code == 404
        data_dir = tmp_path / "replica"
        assert wait_until(lambda: not (data_dir / first.file).exists(), 30), "the old file was never removed"
        assert open_files(replica.process.pid, first.file) == []  # its connections are closed too, not just unlinked
        assert (data_dir / second.file).exists()
        assert json.loads((data_dir / "current.json").read_text())["file"] == second.file


@pytest.mark.slow
def test_snapshots_that_do_not_check_out_are_never_served(writer, tmp_path, sample_export):
    good = writer.publish()
    real = (writer.store / good.file).read_bytes()
    newer = tmp_path / "newer.db"
    newer.write_bytes(real)
    conn = sqlite3.connect(newer)
    conn.execute("insert into _sqlite_migrations (migration_set, name, applied_at) values ('qsite', 'm999_future', 'x')")
    conn.commit()
    conn.close()
    junk = b"<html>no database here</html>\n" * 400
    cases = [
        # (what the store holds, the pointer, the words of the one log line)
        # (versions other than the good one's, so that the names differ from the file being served)
        ("truncated", real[:-8192], pointer_for(real, good.data_version + 1), "bytes downloaded, the pointer says"),
        ("altered", real[:-1] + b"\x01", pointer_for(real, good.data_version + 2), "does not match the pointer's"),
        ("not sqlite", junk, pointer_for(junk, 7), "is not an SQLite database"),
        ("newer schema", newer.read_bytes(), pointer_for(newer.read_bytes(), good.data_version), "newer than this qsite knows"),
        ("missing", None, pointer_for(b"x" * 10, 9), "not in the store"),
        ("bad pointer", None, None, "latest.json is not JSON"),
    ]
    with follow(writer, tmp_path, "replica") as replica:
        assert wait_until(lambda: serving(replica) == good.file, 20)
        stats = httpx.get(replica.url("/api/v1/stats")).content
        for what, data, pointer, words in cases:
            if data is not None:
                writer.put(pointer.file, data, pointer)
            elif pointer is not None:
                (writer.store / "latest.json").write_bytes(pointer.to_json())
            else:
                (writer.store / "latest.json").write_bytes(b'{"file": ')
            assert wait_until(lambda: words in replica.log.read_text(), 15), what
            assert serving(replica) == good.file, what
            assert httpx.get(replica.url("/api/v1/stats")).content == stats, what
        log = replica.log.read_text()
        for what, _, pointer, words in cases:
            lines = [line for line in log.splitlines() if words in line]
            assert len(lines) == 1, (what, lines)  # one clear line, not one per poll
            assert lines[0].endswith(f"still serving {good.file}"), lines[0]
        assert not list((tmp_path / "replica").glob(".*.part"))
        fixed = writer.publish(other_export(sample_export))
        assert wait_until(lambda: serving(replica) == fixed.file, 20)


@pytest.mark.slow
def test_a_restarted_replica_serves_its_last_checked_snapshot_while_the_store_is_down(writer, tmp_path):
    latest = writer.publish()
    with follow(writer, tmp_path, "replica") as replica:
        assert wait_until(lambda: serving(replica) == latest.file, 20)
    down = yaml.safe_load(writer.config_path.read_text())
    down["snapshots"] = {"store": "s3://qsite/snapshots", "endpoint_url": f"http://127.0.0.1:{free_port()}", "poll": "1s"}
    down_config = tmp_path / "down.yml"
    down_config.write_text(yaml.safe_dump(down))
    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    with qsite_serve(down_config, tmp_path / "restarted.log", env, args=["--follow", "--data-dir", str(tmp_path / "replica")]) as again:
        assert wait_until(lambda: serving(again) == latest.file, 30)
        assert httpx.get(again.url("/api/v1/stats")).status_code == 200
        log = again.log.read_text()
        assert "cannot read latest.json" in log and f"serving {latest.file} from" in log
    with qsite_serve(down_config, tmp_path / "fresh.log", env, args=["--follow", "--data-dir", str(tmp_path / "fresh")]) as fresh:
        assert wait_until(lambda: "cannot read latest.json" in fresh.log.read_text(), 30)
        response = httpx.get(fresh.url("/api/v1/stats"))
        assert response.status_code == 503 and response.headers["retry-after"] == "1"


@pytest.mark.slow
def test_a_store_folder_that_cannot_be_created_leaves_the_replica_answering_503(make_config, tmp_path):
    (tmp_path / "afile").write_text("not a folder")  # so the store folder under it cannot be created
    config = make_config(snapshots={"store": str(tmp_path / "afile" / "store"), "poll": "1s"})
    with follow(None, tmp_path, "replica", config) as replica:
        response = httpx.get(replica.url("/api/v1/stats"))
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert wait_until(lambda: "cannot read latest.json" in replica.log.read_text(), 10)
        time.sleep(2.5)  # two more polls: still one line
        assert replica.log.read_text().count("cannot read latest.json") == 1, replica.log.read_text()
        assert "Traceback" not in replica.log.read_text()


def test_a_store_that_stays_down_is_logged_once_not_once_per_poll(make_config, tmp_path, caplog, monkeypatch):
    """obstore's message names how long each request took: the same problem must still be one line."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    config = make_config(snapshots={"store": "s3://qsite/snapshots", "endpoint_url": f"http://127.0.0.1:{free_port()}"})
    follower = Follower(None, load_config(config), tmp_path / "replica")
    for _ in range(3):
        assert follower.check() is False
    errors = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot read latest.json" in errors[0], errors


def test_a_live_instance_has_no_snapshot_endpoint(seeded_config):
    api = ApiClient(datasette_for_config(seeded_config))
    try:
        response = api.get("/api/v1/snapshot")  # checked against the OpenAPI document too
        assert response.status_code == 404
        assert "qsite serve --follow" in response.json()["detail"]
        assert "snapshot" not in api.get("/api/v1").json()["endpoints"]
        docs = api.get("/api/v1/docs").text
        assert "GET /api/v1/snapshot</code></h3>" in docs  # documented, as in the OpenAPI document
        assert "<code>GET /api/v1/snapshot</code></pre>" not in docs  # without an example: it would be a 404
    finally:
        api.close()


# -- several workers, one data folder ---------------------------------------------------------


async def logged(caplog, words: str, times: int = 1, timeout: float = 20) -> None:
    """Let the event loop run (timers, swaps) until ``words`` have been logged ``times`` times."""
    deadline = asyncio.get_running_loop().time() + timeout
    while sum(words in record.getMessage() for record in caplog.records) < times:
        assert asyncio.get_running_loop().time() < deadline, f"never logged {times} x {words!r}: {caplog.text[-2000:]}"
        await asyncio.sleep(0.01)  # polls for the event (the log line), letting the loop's timers run


def test_a_snapshot_another_worker_serves_is_kept_until_that_worker_retires_it(writer, tmp_path, sample_export, caplog):
    """Two followers over one data folder, as two workers of one ``qsite serve`` are, driven step by step.

    Worker A moves on to a new snapshot and retires the old one while worker B
    still serves it: the file must stay, and B must still answer from it with
    connections it opens only now. B retires it later, and then it goes.
    """
    caplog.set_level(logging.INFO, logger="qsite.follow")
    config = load_config(writer.config_path)
    data_dir = tmp_path / "shared"
    workers = []
    for _ in range(2):
        datasette = make_datasette(config, files=[])
        follower = instance(datasette).follower = Follower(datasette, config, data_dir)
        client = ApiClient(datasette, check=False)
        follower.loop, follower.grace = client.loop, 0.05  # a short grace: what is tested is who may delete
        data_dir.mkdir(exist_ok=True)
        workers.append((follower, client))
    (a, client_a), (b, client_b) = workers
    try:
        first = writer.publish()
        assert client_a.run(asyncio.to_thread(a.check)) and client_b.run(asyncio.to_thread(b.check))
        assert "downloaded in 0.00 s" in caplog.records[-1].getMessage()  # B found A's copy: one download per host
        assert client_a.get("/api/v1/stats").status_code == 200

        second = writer.publish(other_export(sample_export))
        assert client_a.run(asyncio.to_thread(a.check))
        client_a.run(logged(caplog, f"retired {first.file}"))
        assert (data_dir / first.file).exists()  # B serves it
        assert "kept, another worker serves it" in caplog.records[-1].getMessage()
        # B's first request on it: the API opens its connections to the file only now.
        response = client_b.get("/api/v1/courses")
        assert response.status_code == 200, response.text
        assert response.json()["count"] == len(sample_export["courses"])
        assert client_a.get("/api/v1/courses").json()["count"] == len(sample_export["courses"]) - 1

        assert client_b.run(asyncio.to_thread(b.check))
        client_b.run(logged(caplog, f"retired {first.file}", times=2))
        assert "deleted" in caplog.records[-1].getMessage()
        assert not (data_dir / first.file).exists()
        assert (data_dir / second.file).exists()
        assert client_b.get("/api/v1/courses").json()["count"] == len(sample_export["courses"]) - 1
    finally:
        for follower, client in workers:
            client.close()


def test_a_file_is_deleted_only_when_no_process_claims_it(tmp_path):
    """The locks are the kernel's: another process's claim keeps a file, and a dead process's claim is gone."""
    path = tmp_path / "site-v00000001-0123456789abcdef.db"
    path.write_bytes(b"x")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert not remove_unclaimed(path) and path.exists()
        claim = Claim.take(path)  # a shared claim beside another: both serve it
        claim.release()
    finally:
        holder.kill()  # no clean exit: the kernel drops its lock
        holder.wait()
    assert remove_unclaimed(path) and not path.exists()
    with pytest.raises(FileNotFoundError):
        Claim.take(path)


class Load:
    """Client threads asking for /api/v1/news and /api/v1/stats, one request after another, until stopped."""

    PATHS = ("/api/v1/news?limit=5", "/api/v1/stats")

    def __init__(self, base: str, threads: int = 2):
        self.base = base
        self.done = threading.Event()
        self.answers: list[tuple[str, int]] = []
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._work, args=(n,), daemon=True) for n in range(threads)]

    def _work(self, offset: int) -> None:
        with httpx.Client(timeout=10) as client:
            n = offset
            while not self.done.is_set():
                path = self.PATHS[n % len(self.PATHS)]
                n += 1
                try:
                    response = client.get(self.base + path)
                except httpx.HTTPError as exc:
                    self.failures.append(f"{path}: {exc!r}")
                    continue
                self.answers.append((path, response.status_code))

    def __enter__(self) -> "Load":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(30)


def workers_serving(log: Path, file: str) -> set[int]:
    """The workers (process ids) that have logged that they serve ``file``."""
    return {int(pid) for pid in re.findall(rf"serving {re.escape(file)} \(.*\(worker (\d+)\)", log.read_text())}


def workers_retired(log: Path, file: str) -> set[int]:
    return {int(pid) for pid in re.findall(rf"retired {re.escape(file)} \(worker (\d+)\)", log.read_text())}


@pytest.mark.slow
def test_two_workers_on_one_data_folder_swap_three_times_under_load_without_a_failed_request(writer, tmp_path, sample_export):
    """``qsite serve --workers 2 --follow``: three swaps while clients keep asking; every answer a 200.

    Each step waits for events (both workers' log lines), never for a time;
    the load runs until both workers have retired every earlier snapshot.
    """
    db = open_database(writer.config.database_path)
    seed_news(db, news_items(30))  # the ingests below leave the news alone: /api/v1/news has data throughout
    db.close()
    config = yaml.safe_load(writer.config_path.read_text())
    config["api"] = {**config.get("api", {}), "rate_limit": "off"}
    config_path = tmp_path / "workers.yml"
    config_path.write_text(yaml.safe_dump(config))
    data_dir = tmp_path / "shared"
    published = [writer.publish()]
    args = ["--workers", "2", "--follow", "--data-dir", str(data_dir)]
    with qsite_serve(config_path, tmp_path / "workers.log", args=args) as server:
        assert wait_until(lambda: len(workers_serving(server.log, published[0].file)) == 2, 30), server.log.read_text()[-3000:]
        with Load(server.base) as load:
            for export in (other_export(sample_export), sample_export, other_export(sample_export)):
                answered = len(load.answers)
                published.append(writer.publish(export))
                assert wait_until(lambda: len(workers_serving(server.log, published[-1].file)) == 2, 30), server.log.read_text()[-3000:]
                assert wait_until(lambda: len(load.answers) > answered + 20, 30)  # the load ran across this swap
            # Both workers retire every earlier snapshot (a grace after their own swap-out), the load still running.
            for earlier in published[:-1]:
                assert wait_until(lambda: len(workers_retired(server.log, earlier.file)) == 2, 30), server.log.read_text()[-3000:]
            assert wait_until(lambda: len(load.answers) > answered + 40, 30)
        statuses = Counter(status for _, status in load.answers)
        assert load.failures == [] and set(statuses) == {200}, (load.failures[:5], statuses)
        assert len(load.answers) > 200
        served = [path.name for path in data_dir.iterdir() if NAME_PATTERN.match(path.name)]
        assert served == [published[-1].file]  # each earlier one deleted once no worker served it
        for pid in worker_pids(server.process.pid):
            assert [f for f in open_files(pid, "site-v") if "(deleted)" in f] == []
