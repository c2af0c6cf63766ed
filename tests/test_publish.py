"""``qsite publish``: a checked, consistent copy under an immutable name, then latest.json; pruning; the config."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from qsite.config import ConfigError, load_config
from qsite.db.snapshot import (
    SCHEMA_VERSION,
    Pointer,
    SnapshotError,
    check_file,
    file_sha256,
    snapshot_name,
    verify_download,
)
from tests.support.feeds import growing_feed
from tests.support.processes import free_port, wait_until

POINTER_FIELDS = {
    "file", "sha256", "data_version", "published_at", "bytes", "schema_version",
    "epoch", "rolled_back_from", "heartbeat_at", "ingests",
}
#: What a publish without new data renews: the writer's heartbeat.
HEARTBEAT_FIELDS = {"heartbeat_at", "ingests"}


@pytest.fixture
def growing(make_config, http_server, tmp_path):
    """A config whose one feed grows on every fetch, publishing to tmp_path/store with keep 1."""
    http_server.routes["/feed.xml"] = growing_feed("Lab", step=1)
    return make_config(
        news={"every": "1s", "sources": [{"name": "Lab", "url": http_server.url("/feed.xml"), "tag": "Science"}]},
        snapshots={"store": "store", "keep": 1},
    )


def pointer(store: Path) -> dict:
    return json.loads((store / "latest.json").read_text())


def snapshots_in(store: Path) -> list[str]:
    return sorted(path.name for path in store.glob("site-v*.db"))


@pytest.mark.slow
def test_publish_uploads_a_checked_copy_then_the_pointer(qsite, growing, tmp_path):
    assert qsite("ingest", "all", "--config", str(growing)).returncode == 0
    result = qsite("publish", "--config", str(growing))
    assert result.returncode == 0, result.stderr
    store = tmp_path / "store"
    latest = pointer(store)
    assert set(latest) == POINTER_FIELDS
    assert result.stdout.splitlines() == [
        f"publish: {latest['file']} ({latest['bytes']} bytes, data version {latest['data_version']}) is now latest"
    ]
    copy = store / latest["file"]
    assert latest["file"] == snapshot_name(latest["data_version"], latest["sha256"])
    assert latest["sha256"] == file_sha256(copy) and latest["bytes"] == copy.stat().st_size
    assert latest["schema_version"] == SCHEMA_VERSION
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", latest["published_at"])
    found = check_file(copy)
    assert found.data_version == latest["data_version"]
    conn = sqlite3.connect(tmp_path / "site.db")
    (live_news,) = conn.execute("select count(*) from news").fetchone()
    conn.close()
    snap = sqlite3.connect(f"{copy.as_uri()}?immutable=1", uri=True)
    assert snap.execute("select count(*) from news").fetchone()[0] == live_news
    assert snap.execute("pragma journal_mode").fetchone()[0] == "delete"  # no -wal/-shm beside a replica's copy
    snap.close()


@pytest.mark.slow
def test_nothing_changed_uploads_nothing_and_says_so_in_one_line(qsite, growing, tmp_path):
    assert qsite("ingest", "all", "--config", str(growing), "--publish").returncode == 0
    store = tmp_path / "store"
    def published() -> tuple[dict, list[str]]:
        return {key: value for key, value in pointer(store).items() if key not in HEARTBEAT_FIELDS}, snapshots_in(store)

    before = published()
    again = qsite("publish", "--config", str(growing))
    assert again.returncode == 0, again.stderr
    assert len(again.stdout.splitlines()) == 1 and "unchanged" in again.stdout and again.stderr == ""
    assert published() == before  # the same snapshot; only the heartbeat is renewed
    assert pointer(store)["ingests"]["news"]["status"] in ("ok", "unchanged", "warning")


@pytest.mark.slow
def test_ingest_all_publish_publishes_each_change_and_prunes_beyond_keep(qsite, growing, tmp_path):
    store = tmp_path / "store"
    published = []
    for run in range(3):
        if run:  # the feed is due again at once (rather than news.every later): each run fetches it, and it has grown
            with sqlite3.connect(tmp_path / "site.db") as db:
                db.execute("UPDATE sources SET next_fetch_at = NULL")
        result = qsite("ingest", "all", "--config", str(growing), "--publish")
        assert result.returncode == 0, result.stderr
        assert "is now latest" in result.stdout
        published.append(pointer(store)["file"])
    assert len(set(published)) == 3
    # keep: 1 -> the pointed snapshot and one other: the newest before it
    assert snapshots_in(store) == sorted(published[-2:])


@pytest.mark.slow
def test_keep_zero_never_deletes_the_pointed_snapshot(qsite, make_config, tmp_path):
    config = make_config(snapshots={"store": "store", "keep": 0})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    assert qsite("publish", "--config", str(config)).returncode == 0
    assert snapshots_in(tmp_path / "store") == [pointer(tmp_path / "store")["file"]]


@pytest.mark.slow
def test_publish_takes_a_consistent_copy_while_a_write_is_open(qsite, make_config, tmp_path):
    """VACUUM INTO reads one snapshot: an uncommitted write neither blocks it nor lands in it."""
    config = make_config(snapshots={"store": "store"})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    writer = sqlite3.connect(tmp_path / "site.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE data_versions SET version = version + 100")
    writer.execute("DELETE FROM glossary")
    try:
        result = qsite("publish", "--config", str(config), timeout=60)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert result.returncode == 0, result.stderr
    copy = tmp_path / "store" / pointer(tmp_path / "store")["file"]
    snap = sqlite3.connect(f"{copy.as_uri()}?immutable=1", uri=True)
    assert snap.execute("select count(*) from glossary").fetchone()[0] > 0
    assert snap.execute("select max(version) from data_versions").fetchone()[0] < 100
    snap.close()


@pytest.mark.slow
def test_default_store_is_a_folder_beside_the_database(qsite, make_config, tmp_path):
    config = make_config()
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    assert qsite("publish", "--config", str(config)).returncode == 0
    assert (tmp_path / "snapshots" / "latest.json").exists()


@pytest.mark.slow
def test_publish_without_a_database_fails_with_one_line(qsite, make_config, tmp_path):
    result = qsite("publish", "--config", str(make_config(snapshots={"store": "store"})))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"Error: {tmp_path / 'site.db'}: no database yet; run `qsite ingest all` first"]


def test_publish_of_a_database_not_yet_migrated_says_to_migrate(qsite, make_config, tmp_path):
    """After an upgrade, before qsite migrate: publishing only reads, so its copy would be of the old schema."""
    config = make_config(snapshots={"store": "store"})
    assert qsite("migrate", "--config", str(config)).returncode == 0
    conn = sqlite3.connect(tmp_path / "site.db")
    (last,) = conn.execute("select name from _sqlite_migrations order by rowid desc limit 1").fetchone()
    conn.execute("delete from _sqlite_migrations where name = ?", [last])
    conn.commit()
    conn.close()
    result = qsite("publish", "--config", str(config))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"Error: {tmp_path / 'site.db'}: this qsite's migrations {last} are not applied yet; run `qsite migrate` (or any ingest) first"
    ]


@pytest.mark.slow
def test_a_store_that_is_down_fails_the_publish_and_leaves_nothing_half_done(qsite, make_config, tmp_path):
    port = free_port()  # nothing listens there
    config = make_config(snapshots={"store": "s3://bucket/prefix", "endpoint_url": f"http://127.0.0.1:{port}"})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    result = qsite("publish", "--config", str(config), env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: snapshot store s3://bucket/prefix: cannot read latest.json:"), line
    assert not list(tmp_path.glob(".qsite-publish-*"))


def unmakeable_store(tmp_path: Path) -> Path:
    """A store folder that cannot be created (its parent is a regular file), as on a read-only disk."""
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path / "afile" / "store"


@pytest.mark.slow
def test_a_store_folder_that_cannot_be_created_fails_the_publish_in_one_line(qsite, make_config, tmp_path):
    from qsite.pipeline.ops.publish import publisher_for

    store = unmakeable_store(tmp_path)
    config = make_config(snapshots={"store": str(store)})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    result = qsite("publish", "--config", str(config))
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: snapshot store {store}: cannot read latest.json:"), line
    # The scheduler's publisher is made at start (`qsite schedule --no-run-now`) and fails only when it publishes.
    assert publisher_for(load_config(config))() is None


@pytest.mark.slow
def test_ingest_all_publish_blames_the_store_not_the_database(qsite, make_config, tmp_path):
    store = unmakeable_store(tmp_path)
    result = qsite("ingest", "all", "--publish", "--config", str(make_config(snapshots={"store": str(store)})))
    assert result.returncode == 1
    assert "cannot write the database" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: snapshot store {store}: "), result.stderr


@pytest.mark.slow
def test_a_publish_removes_the_copies_of_killed_publishes_but_not_of_running_ones(qsite, make_config, tmp_path):
    import fcntl
    import os

    config = make_config(snapshots={"store": "store"})
    assert qsite("ingest", "site", "--config", str(config)).returncode == 0
    hour_ago = time.time() - 3600
    left, running, young = (tmp_path / f".qsite-publish-{name}" for name in ("left", "running", "young"))
    for folder in (left, running, young):
        folder.mkdir()
        (folder / "snapshot.db").write_bytes(b"a copy")
    for folder in (left, running):
        os.utime(folder, (hour_ago, hour_ago))
    held = os.open(running, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_SH)  # as a publish in another process holds its folder
        result = qsite("publish", "--config", str(config))
    finally:
        os.close(held)
    assert result.returncode == 0, result.stderr
    assert not left.exists() and f"removed {left}" in result.stderr
    assert (running / "snapshot.db").exists() and (young / "snapshot.db").exists()
    assert sorted(path.name for path in tmp_path.glob(".qsite-publish-*")) == [running.name, young.name]


@pytest.mark.slow
def test_the_scheduler_publishes_after_ingests_that_changed_data(make_config, http_server, tmp_path):
    from qsite.pipeline.ops.schedule import Scheduler

    http_server.routes["/feed.xml"] = growing_feed("Lab", step=1)
    config = load_config(
        make_config(
            news={"every": "1s", "sources": [{"name": "Lab", "url": http_server.url("/feed.xml"), "tag": "Science"}]},
            snapshots={"store": "store"},
        )
    )
    scheduler = Scheduler(config)
    scheduler.start()
    try:
        store = tmp_path / "store"
        versions = set()

        def three_publishes():
            if (store / "latest.json").exists():
                versions.add(pointer(store)["data_version"])
            return len(versions) >= 3

        assert wait_until(three_publishes, 30)
    finally:
        scheduler.stop()
    assert len(snapshots_in(store)) >= 3


def test_without_a_store_the_scheduler_publishes_nothing(make_config, tmp_path):
    from qsite.pipeline.ops.schedule import Scheduler

    scheduler = Scheduler(load_config(make_config()))
    assert scheduler.publish is None


@pytest.mark.parametrize(
    "snapshots, message",
    [
        ({"store": "ftp://host/x"}, "snapshots.store: must be a folder, a file:///absolute/path or s3://bucket/prefix URL"),
        ({"store": "s3://"}, "snapshots.store: must name a bucket"),
        ({"store": "folder", "endpoint_url": "http://127.0.0.1:8333"}, "snapshots.endpoint_url: is only for an s3:// store"),
        ({"store": "s3://b", "endpoint_url": "127.0.0.1:8333"}, "snapshots.endpoint_url: must be an http:// or https:// URL"),
        ({"keep": -1}, "snapshots.keep: Input should be greater than or equal to 0"),
        ({"poll": "0.5s"}, "snapshots.poll: must be a duration"),
        ({"bucket": "x"}, "snapshots.bucket: unknown key"),
    ],
)
def test_bad_snapshots_config_names_the_key(make_config, snapshots, message):
    with pytest.raises(ConfigError) as error:
        load_config(make_config(snapshots=snapshots))
    assert message in str(error.value)


def test_store_urls(make_config, tmp_path):
    assert load_config(make_config(snapshots={"store": "s3://b/p", "poll": "1m"})).snapshot_store == "s3://b/p"
    assert load_config(make_config(snapshots={"store": "snaps"})).snapshot_store == (tmp_path / "snaps").as_uri()
    assert load_config(make_config(snapshots={"store": "file:///srv/snaps"})).snapshot_store == "file:///srv/snaps"
    assert load_config(make_config(snapshots={"store": "s3://b", "poll": "1m"})).snapshots.poll == 60


# -- what a copy must pass (db/snapshot.py), on both sides ------------------------------


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Pointer]:
    """One published snapshot of the sample export (in-process: the checks below only read it)."""
    from qsite.pipeline.ops.ingest import SITE, run_ingest
    from qsite.pipeline.ops.publish import publish

    folder = tmp_path_factory.mktemp("published")
    config = load_config(None, database=str(folder / "site.db"))
    config = config.model_copy(update={"snapshots": config.snapshots.model_copy(update={"store": str(folder / "store")})})
    run_ingest(config, kinds=(SITE,))
    latest = publish(config).pointer
    return folder / "store" / latest.file, latest


def test_a_good_copy_verifies(published):
    path, latest = published
    assert verify_download(path, latest).data_version == latest.data_version


def test_a_truncated_copy_is_refused(published, tmp_path):
    path, latest = published
    cut = tmp_path / "cut.db"
    cut.write_bytes(path.read_bytes()[:-4096])
    with pytest.raises(SnapshotError, match="truncated"):
        verify_download(cut, latest)


def test_an_altered_copy_is_refused(published, tmp_path):
    path, latest = published
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    altered = tmp_path / "altered.db"
    altered.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="SHA-256"):
        verify_download(altered, latest)


def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"<html>not a database</html>" * 100)
    with pytest.raises(SnapshotError, match="not an SQLite database"):
        check_file(junk)


def test_a_damaged_database_is_refused(published, tmp_path):
    path, _ = published
    data = bytearray(path.read_bytes())
    data[4096 * 3 : 4096 * 3 + 200] = b"\xff" * 200  # inside a b-tree page
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="integrity check|not a sound SQLite"):
        check_file(damaged)


@pytest.mark.parametrize(
    "change, message",
    [
        # a newer qsite's snapshot
        ("insert into _sqlite_migrations (migration_set, name, applied_at) values ('qsite', 'm999_future', 'x')",
         "newer than this qsite knows"),
        # an older qsite's: this qsite's queries read tables it lacks (news_totals: no such table)
        ("delete from _sqlite_migrations where rowid = (select max(rowid) from _sqlite_migrations)",
         "older than this qsite's .*publish again with a writer of this qsite"),
    ],
    ids=["newer", "older"],
)
def test_a_schema_other_than_this_qsites_is_refused(published, tmp_path, change, message):
    path, _ = published
    other = tmp_path / "other.db"
    other.write_bytes(path.read_bytes())
    conn = sqlite3.connect(other)
    conn.execute(change)
    conn.commit()
    conn.close()
    with pytest.raises(SnapshotError, match=message):
        check_file(other)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sha256": "abc"}, "field 'sha256'"),
        ({"bytes": 0}, "field 'bytes'"),
        ({"file": "../../etc/passwd"}, "field 'file'"),
        ({"data_version": 999}, "does not match"),
        ({"epoch": -1}, "field 'epoch'"),
        ({"rolled_back_from": "42"}, "field 'rolled_back_from'"),
        ({"heartbeat_at": "yesterday"}, "field 'heartbeat_at'"),
        ({"ingests": {"news": {"status": "ok", "last_success_at": "soon"}}}, "field 'ingests'"),
        ({"ingests": {"weather": None}}, "field 'ingests'"),
    ],
)
def test_a_bad_pointer_is_refused(published, change, message):
    _, latest = published
    data = {**json.loads(latest.to_json()), **change}
    with pytest.raises(SnapshotError, match=re.escape(message)):
        Pointer.from_json(json.dumps(data).encode())
    with pytest.raises(SnapshotError, match="not JSON"):
        Pointer.from_json(b"{")



def test_a_pointer_of_an_older_qsite_reads_as_epoch_zero_without_a_heartbeat(published):
    _, latest = published
    data = {key: value for key, value in json.loads(latest.to_json()).items() if key not in POINTER_FIELDS - {
        "file", "sha256", "data_version", "published_at", "bytes", "schema_version"}}
    older = Pointer.from_json(json.dumps(data).encode())
    assert (older.epoch, older.rolled_back_from, older.heartbeat_at, older.ingests) == (0, None, None, None)
    assert older.order == (0, latest.data_version)
