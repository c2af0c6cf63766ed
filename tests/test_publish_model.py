"""Publish × follow × health as a system: a hypothesis state machine over real operations.

Random sequences of ingests (changing the data or not, or failing), publishes (alone, two
overlapping in threads, or one overtaken by another mid-way), explicit
rollbacks, a follower's polls and time passing (the writer's runs made older),
on a real writer database, a real folder store and a real in-process follower
(:class:`qsite.service.replica.follow.Follower` swapping snapshots in Datasette). After
every step the invariants of docs/invariants.md ("Publish and follow", "Health"):

- the pointer's order (epoch, data version) never decreases, and its data version
  is never lower than the newest published since the last rollback;
- the follower's data version never decreases, except after an explicit rollback
  (a higher epoch), and it never serves an order lower than it served;
- the follower's /api/v1/health is 200 exactly while the heartbeat of the pointer
  it follows was written when the writer's last ingest was recent, whether or
  not the data changed; each kind is reported with its own age and bound.

``QSITE_SOAK=1`` runs many more and longer sequences.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from qsite.config import load_config
from qsite.db.snapshot import name_version
from qsite.db.snapshot_store import SnapshotStore
from qsite.pipeline.ops.ingest import SITE, run_ingest
from qsite.pipeline.ops.publish import publish
from qsite.pipeline.ops.rollback import rollback
from qsite.service.datasette.state import instance
from qsite.service.replica.follow import Follower
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient
from tests.support.config_files import write_config
from tests.support.paths import SITE_EXPORT
from tests.test_replica_outages import age_runs

SOAK = bool(os.environ.get("QSITE_SOAK"))
#: The health bound of the model's config: time passing makes the writer's runs older than this.
BOUND = 3600


class Overtaking(SnapshotStore):
    """The real folder store; between this publish's upload and its pointer, ``then()`` runs (another whole publish)."""

    def __init__(self, *args, then, **kwargs):
        super().__init__(*args, **kwargs)
        self.then = then

    def upload(self, name, path):
        super().upload(name, path)
        then, self.then = self.then, None
        if then:
            then()


class PublishAndFollow(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.folder = Path(tempfile.mkdtemp(prefix="qsite-publish-model-"))
        self.export_path = self.folder / "export.json"
        self.export = json.loads(SITE_EXPORT.read_text(encoding="utf-8"))
        self.export_path.write_text(json.dumps(self.export))
        path = write_config(
            self.folder,
            site_export={"source": str(self.export_path)},
            snapshots={"store": "store", "poll": "1s", "keep": 3},
            api={"health_max_data_age": BOUND, "rate_limit": "off"},
        )
        self.config = load_config(path)
        self.store = SnapshotStore(self.config.snapshot_store)
        datasette = make_datasette(self.config, files=[])
        self.follower = instance(datasette).follower = Follower(datasette, self.config, self.folder / "replica")
        self.client = ApiClient(datasette, check=False)
        self.follower.loop, self.follower.grace = self.client.loop, 0.01
        self.follower.data_dir.mkdir()
        self.revision = 0
        #: Whether the writer's last successful ingest is recent (time passing makes it old).
        self.writer_fresh = False
        #: Whether the heartbeat of the pointer now in the store was written while the writer was fresh.
        self.beat_fresh = None
        #: The highest pointer order seen, the newest data version published since the last rollback.
        self.pointer_floor = (0, 0)
        self.published_floor = 0
        #: What the follower served last: (epoch, data version).
        self.served = None
        self._ingest(change=False)  # the writer has data from the start: every rule can run

    def teardown(self):
        if hasattr(self, "client"):
            self.client.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- the writer ------------------------------------------------------------------

    def _ingest(self, change: bool) -> None:
        if change:
            self.revision += 1
            self.export["courses"][0]["title"] = f"Quantum basics, revision {self.revision}"
            self.export_path.write_text(json.dumps(self.export))
        reports = run_ingest(self.config, kinds=(SITE,))
        assert not any(report.failed for report in reports), [report.line() for report in reports]
        self.writer_fresh = True

    def _published(self, result) -> None:
        if result.published and not result.rolled_back:
            self.published_floor = max(self.published_floor, result.pointer.data_version)
        if result.superseded is None:  # this publish wrote the pointer (a snapshot, or only the heartbeat)
            self.beat_fresh = self.writer_fresh

    @rule(change=st.booleans())
    def ingest(self, change):
        self._ingest(change)

    @rule(poll=st.booleans())
    def publish(self, poll):
        self._published(publish(self.config))
        if poll:
            self.follower_polls()

    @rule(change=st.booleans())
    def scheduled_run(self, change):
        """What ``qsite schedule`` does: an ingest, a publish after it (changed data or not), and the follower polls."""
        self._ingest(change)
        self._published(publish(self.config))
        self.follower_polls()

    @rule(change=st.booleans())
    def two_publishes_at_once(self, change):
        self._ingest(change)
        results, errors = [], []
        barrier = threading.Barrier(2)

        def one():
            barrier.wait()
            try:
                results.append(publish(self.config))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        for result in results:
            self._published(result)

    @rule(change=st.booleans())
    def publish_overtaken(self, change):
        """A slow publish (the scheduler's) is overtaken by a manual one of newer data, which finishes first."""
        inner = []

        def overtake():
            self._ingest(change)
            inner.append(publish(self.config))

        outer = publish(self.config, Overtaking(self.config.snapshot_store, then=overtake))
        for result in (*inner, outer):
            self._published(result)
        if inner and inner[0].published:
            assert not outer.published and outer.superseded is not None  # the late pointer never lands

    @rule()
    def failing_run(self):
        """A scheduled run whose ingest fails (the export is broken): the publish after it renews the heartbeat, not the freshness."""
        self.export_path.write_text("{not json")
        reports = run_ingest(self.config, kinds=(SITE,))
        assert all(report.failed for report in reports)
        self.export_path.write_text(json.dumps(self.export))
        self._published(publish(self.config))
        self.follower_polls()

    @rule()
    def time_passes(self):
        age_runs(self.config.database_path, 2 * BOUND)
        self.writer_fresh = False

    def older_versions(self) -> list[int]:
        """The data versions of the store's snapshots older than the pointer's: what a rollback may go back to."""
        pointer = self.store.read_pointer()
        versions = sorted({name_version(name) for name in self.store.snapshots()} - {None})
        return [version for version in versions if pointer and version < pointer.data_version]

    @precondition(lambda self: self.beat_fresh is not None)
    @rule(data=st.data())
    def roll_back(self, data):
        older = self.older_versions()
        if older:
            self.roll_back_to(data.draw(st.sampled_from(older)))

    def roll_back_to(self, version: int) -> None:
        pointer = self.store.read_pointer()
        result = rollback(self.config, version)
        assert result.pointer.data_version == version and result.pointer.epoch == pointer.epoch + 1
        self.published_floor = version

    @rule()
    def follower_polls(self):
        self.client.run(asyncio.to_thread(self.follower.check))
        self.client.run(asyncio.sleep(0.02))  # the old snapshot's retirement (its grace) runs on the loop

    # -- after every step --------------------------------------------------------------

    @invariant()
    def the_pointer_never_goes_back(self):
        if not hasattr(self, "store"):
            return
        pointer = self.store.read_pointer()
        if pointer is None:
            return
        assert pointer.order >= self.pointer_floor, (pointer, self.pointer_floor)
        assert pointer.data_version >= self.published_floor, (pointer, self.published_floor)
        self.pointer_floor = pointer.order

    @invariant()
    def the_follower_never_goes_back_and_its_health_follows_the_heartbeat(self):
        if not hasattr(self, "follower") or self.follower.serving is None:
            return
        now = self.follower.serving.pointer
        if self.served is not None:
            epoch, version = self.served
            assert now.order >= self.served, (now, self.served)
            assert now.data_version >= version or now.epoch > epoch, (now, self.served)
        self.served = now.order
        pointer = self.store.read_pointer()
        response = self.client.get("/api/v1/health")
        body = response.json()
        site = body["ingests"]["site"]
        assert (site["max_age_seconds"], site["decides"]) == (BOUND, True)
        assert body["ingests"]["news"] is None  # not configured, never run
        if self.follower.latest == pointer:  # it has read the pointer now in the store
            expected = 200 if self.beat_fresh else 503
            assert response.status_code == expected, (body, self.beat_fresh)
            assert site["fresh"] is bool(self.beat_fresh)


#: Sequences the random search may take long to draw, run as written: (rule, arguments) steps.
SEQUENCES = {
    "a failing writer's heartbeat ages": [("scheduled_run", True), ("time_passes",), ("failing_run",)],
    "no new data, yet healthy": [("scheduled_run", True), ("time_passes",), ("publish", True), ("scheduled_run", False)],
    "an overtaken publish": [("scheduled_run", True), ("publish_overtaken", True), ("follower_polls",)],
    "two at once": [("two_publishes_at_once", True), ("follower_polls",), ("two_publishes_at_once", False), ("follower_polls",)],
    "a rollback, held, then new data": [
        ("scheduled_run", True), ("scheduled_run", True), ("roll_back_to", "oldest"), ("follower_polls",),
        ("scheduled_run", False), ("time_passes",), ("publish", True), ("scheduled_run", True),
    ],
}


@pytest.mark.parametrize("steps", SEQUENCES.values(), ids=SEQUENCES.keys())
def test_known_sequences(steps):
    machine = PublishAndFollow()
    try:
        machine.start()
        for name, *arguments in steps:
            if name == "roll_back_to":
                arguments = [machine.older_versions()[0]]
            getattr(machine, name)(*arguments)
            machine.the_pointer_never_goes_back()
            machine.the_follower_never_goes_back_and_its_health_follows_the_heartbeat()
    finally:
        machine.teardown()


PublishAndFollow.TestCase.settings = settings(
    max_examples=60 if SOAK else 10,
    stateful_step_count=40 if SOAK else 12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
TestPublishAndFollow = PublishAndFollow.TestCase
