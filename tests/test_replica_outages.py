"""Replicas where publish meets follow: the writer's heartbeat, health per kind, a pointer that never goes back.

Through the real CLI (``qsite ingest``, ``qsite publish``) and real ``qsite serve --follow``
replicas over a folder store; the compare-and-swap on ``latest.json`` also against
SeaweedFS's S3 server (:mod:`tests.support.seaweed`). The invariants are stated
once in docs/invariants.md.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
import sqlite3
from pathlib import Path

import httpx
import pytest

from qsite.config import load_config
from qsite.db.snapshot_store import SnapshotStore
from tests.support.paths import FEEDS
from tests.support.processes import qsite_serve, wait_until
from tests.support.seaweed import seaweed_s3

SNAPSHOTS = {"store": "store", "poll": "1s", "keep": 20}


def age_runs(database: Path, seconds: int, kind: str | None = None) -> None:
    """The database's ingest runs (of ``kind``, or all) and data changes as if ``seconds`` older, without a version bump."""
    conn = sqlite3.connect(database)
    where = "AND kind = ?" if kind else ""
    for column in ("started_at", "finished_at"):
        conn.execute(
            f"UPDATE ingest_runs SET {column} = strftime('%Y-%m-%dT%H:%M:%SZ', {column}, ?) WHERE {column} IS NOT NULL {where}",
            [f"-{seconds} seconds", *([kind] if kind else [])],
        )
    conn.execute("UPDATE data_versions SET changed_at = strftime('%Y-%m-%dT%H:%M:%SZ', changed_at, ?)", [f"-{seconds} seconds"])
    conn.commit()
    conn.close()


def bump(database: Path) -> None:
    """A change of data, as an ingest that stored something makes one."""
    conn = sqlite3.connect(database)
    conn.execute("UPDATE data_versions SET version = version + 1 WHERE dataset = 'catalog'")
    conn.commit()
    conn.close()


def latest(store: Path) -> dict:
    return json.loads((store / "latest.json").read_text())


def follow(config: Path, tmp_path: Path, name: str = "replica"):
    """A replica of one worker: every answer comes from the one follower (each worker polls on its own)."""
    return qsite_serve(config, tmp_path / f"{name}.log", args=["--follow", "--data-dir", str(tmp_path / name), "--workers", "1"])


def serving(replica) -> dict | None:
    response = httpx.get(replica.url("/api/v1/snapshot"), timeout=5)
    return response.json() if response.status_code == 200 else None


def health(replica) -> httpx.Response:
    return httpx.get(replica.url("/api/v1/health"), timeout=5)


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    with seaweed_s3(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture
def site_writer(make_config, sample_export, tmp_path) -> Path:
    """A writer's config: the site export from a local file, snapshots to tmp_path/store, a one-hour health bound."""
    export = tmp_path / "export.json"
    export.write_text(json.dumps(sample_export))
    return make_config(site_export={"source": str(export)}, snapshots=SNAPSHOTS, api={"health_max_data_age": "1h", "rate_limit": "off"})


@pytest.mark.slow
def test_a_follower_stays_healthy_while_the_writer_ingests_without_new_data(qsite, site_writer, tmp_path):
    database = load_config(site_writer).database_path
    assert qsite("ingest", "site", "--config", str(site_writer)).returncode == 0
    age_runs(database, 2 * 3600)  # the last ingest that changed data was two hours ago
    assert qsite("publish", "--config", str(site_writer)).returncode == 0
    with follow(site_writer, tmp_path) as replica:
        assert wait_until(lambda: serving(replica), 20)
        assert health(replica).status_code == 503  # the writer's last word is two hours old: rightly stale
        # the writer ingests again, finds nothing new: no new snapshot, but a heartbeat in latest.json
        assert qsite("ingest", "site", "--config", str(site_writer)).returncode == 0
        published = qsite("publish", "--config", str(site_writer))
        assert published.returncode == 0, published.stderr
        assert "unchanged" in published.stdout
        assert latest(tmp_path / "store")["ingests"]["site"]["status"] == "unchanged"
        assert wait_until(lambda: health(replica).status_code == 200, 20), health(replica).json()
        body = health(replica).json()
        assert body["status"] == "ok" and body["ingests"]["site"]["age_seconds"] < 60
        assert body["data_version"] == latest(tmp_path / "store")["data_version"]
        # the writer stops ingesting: its heartbeat ages, and the replica leaves the rotation again
        age_runs(database, 2 * 3600)
        assert qsite("publish", "--config", str(site_writer)).returncode == 0
        assert wait_until(lambda: health(replica).status_code == 503, 20)


@pytest.mark.slow
def test_health_reports_each_kind_against_its_own_bound_and_a_failing_kind_decides(qsite, make_config, tmp_path, sample_export):
    export = tmp_path / "export.json"
    export.write_text(json.dumps(sample_export))
    config = make_config(
        site_export={"source": str(export)},
        news={"sources": [{"name": "Lab", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"}]},
        api={"health_max_data_age": "1h", "health_max_site_age": "2d", "rate_limit": "off"},
    )
    assert qsite("ingest", "all", "--config", str(config)).returncode == 0
    database = load_config(config).database_path
    age_runs(database, 3 * 86400, kind="site")  # the site export last worked three days ago
    export.unlink()
    assert qsite("ingest", "site", "--config", str(config)).returncode != 0  # and fails since
    assert qsite("ingest", "news", "--config", str(config)).returncode == 0  # news is fine
    with qsite_serve(config, tmp_path / "serve.log") as served:
        response = httpx.get(served.url("/api/v1/health"))
        body = response.json()
        assert response.status_code == 503 and body["status"] == "stale", body
        news, site = body["ingests"]["news"], body["ingests"]["site"]
        assert (news["max_age_seconds"], news["fresh"], news["decides"]) == (3600, True, True) and news["status"] != "failed"
        assert news["age_seconds"] < 60
        assert (site["max_age_seconds"], site["status"], site["fresh"], site["decides"]) == (2 * 86400, "failed", False, True)
        assert site["age_seconds"] >= 3 * 86400




@pytest.mark.slow
def test_a_publish_of_older_data_never_replaces_a_newer_pointer(qsite, site_writer, tmp_path):
    database = load_config(site_writer).database_path
    assert qsite("ingest", "site", "--config", str(site_writer)).returncode == 0
    older = tmp_path / "older.db"
    shutil.copy(database, older)  # what a slow publish copied before the data changed
    bump(database)
    assert qsite("publish", "--config", str(site_writer)).returncode == 0
    newest = latest(tmp_path / "store")
    late = tmp_path / "late.yaml"
    late.write_text(site_writer.read_text().replace(str(database), str(older)))
    assert load_config(late).database_path == older
    result = qsite("publish", "--config", str(late))
    assert result.returncode != 0
    assert f"data version {newest['data_version']}" in result.stderr and "rollback" in result.stderr
    assert latest(tmp_path / "store")["file"] == newest["file"]


class RacingStore(SnapshotStore):
    """A real store whose upload lets another whole ``qsite publish`` (of newer data) finish first: the lost race."""

    def __init__(self, *args, other: callable, **kwargs):
        super().__init__(*args, **kwargs)
        self.other = other

    def upload(self, name, path):
        super().upload(name, path)
        self.other()


def publish_racing(config_path: Path, newer_config: Path, qsite):
    from qsite.pipeline.ops.publish import publish

    config = load_config(config_path)
    won = {}

    def other():
        result = qsite("publish", "--config", str(newer_config))
        assert result.returncode == 0, result.stderr
        won["stdout"] = result.stdout

    store = RacingStore(config.snapshot_store, config.snapshots.endpoint_url, other=other)
    return publish(config, store), won


def racing_configs(qsite, site_writer: Path, tmp_path: Path) -> tuple[Path, Path]:
    database = load_config(site_writer).database_path
    assert qsite("ingest", "site", "--config", str(site_writer)).returncode == 0
    newer = tmp_path / "newer.db"
    shutil.copy(database, newer)
    bump(newer)
    newer_config = tmp_path / "newer.yaml"
    newer_config.write_text(site_writer.read_text().replace(str(database), str(newer)))
    return site_writer, newer_config


@pytest.mark.slow
def test_two_overlapping_publishes_leave_the_newer_pointer_on_a_folder_store(qsite, site_writer, tmp_path):
    slow, fast = racing_configs(qsite, site_writer, tmp_path)
    result, won = publish_racing(slow, fast, qsite)
    assert "is now latest" in won["stdout"]
    pointer = latest(tmp_path / "store")
    assert result.superseded is not None and pointer["data_version"] > result.superseded.data_version
    assert pointer["file"] == result.pointer.file and (tmp_path / "store" / result.superseded.file).exists()
    assert not result.published and "newer" in result.line()


@pytest.mark.slow
@pytest.mark.requires("weed")
def test_two_overlapping_publishes_leave_the_newer_pointer_on_seaweedfs(qsite, make_config, sample_export, tmp_path, seaweed):
    export = tmp_path / "export.json"
    export.write_text(json.dumps(sample_export))
    config = make_config(site_export={"source": str(export)}, snapshots={"store": f"s3://{seaweed.bucket}/race", "endpoint_url": seaweed.endpoint})
    slow, fast = racing_configs(qsite, config, tmp_path)
    result, won = publish_racing(slow, fast, qsite)
    assert "is now latest" in won["stdout"]
    store = SnapshotStore(load_config(config).snapshot_store, seaweed.endpoint)
    pointer = store.read_pointer()
    assert result.superseded is not None and pointer.data_version > result.superseded.data_version
    assert pointer.file == result.pointer.file
    assert not result.published and "newer" in result.line()
    # the conditional write itself: a pointer written against a stale read is refused by the server
    stale = store.read_state()
    assert store.swap_pointer(replace(pointer, heartbeat_at="2026-11-28T00:00:00Z"), stale)
    assert not store.swap_pointer(replace(pointer, heartbeat_at="2026-11-28T00:00:01Z"), stale)
    assert store.read_pointer().heartbeat_at == "2026-11-28T00:00:00Z"


@pytest.mark.slow
def test_a_follower_never_swaps_back_and_a_rollback_is_explicit(qsite, site_writer, tmp_path):
    database = load_config(site_writer).database_path
    store = tmp_path / "store"
    assert qsite("ingest", "site", "--config", str(site_writer)).returncode == 0
    assert qsite("publish", "--config", str(site_writer)).returncode == 0
    first = latest(store)
    bump(database)
    assert qsite("publish", "--config", str(site_writer)).returncode == 0
    second = latest(store)
    with follow(site_writer, tmp_path) as replica:
        assert wait_until(lambda: (serving(replica) or {}).get("file") == second["file"], 20)
        # a pointer written by hand (or by an old qsite that lost a race) names older data
        (store / "latest.json").write_text(json.dumps(first))
        assert wait_until(lambda: "older than" in (tmp_path / "replica.log").read_text(), 20)
        assert serving(replica)["file"] == second["file"]
        (store / "latest.json").write_text(json.dumps(second))
        # the deliberate way back
        refused = qsite("publish", "--rollback-to", str(first["data_version"] - 1), "--config", str(site_writer))
        assert refused.returncode != 0 and "no snapshot of data version" in refused.stderr
        rolled = qsite("publish", "--rollback-to", str(first["data_version"]), "--config", str(site_writer))
        assert rolled.returncode == 0, rolled.stderr
        assert f"rolled back to {first['file']}" in rolled.stdout
        pointer = latest(store)
        assert (pointer["file"], pointer["epoch"], pointer["rolled_back_from"]) == (first["file"], 1, second["data_version"])
        assert wait_until(lambda: (serving(replica) or {}).get("file") == first["file"], 20)
        # the rollback holds: publishing the same (rolled back) data again does not undo it
        held = qsite("publish", "--config", str(site_writer))
        assert held.returncode == 0 and "rolled back" in held.stdout
        assert latest(store)["file"] == first["file"]
        # new data after it is published, and followed
        bump(database)
        assert qsite("publish", "--config", str(site_writer)).returncode == 0
        third = latest(store)
        assert third["data_version"] > second["data_version"] and third["epoch"] == 1
        assert wait_until(lambda: (serving(replica) or {}).get("file") == third["file"], 20)
