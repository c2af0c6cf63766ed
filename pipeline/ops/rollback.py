"""``qsite publish --rollback-to VERSION``: point ``latest.json`` back at an older published snapshot, on purpose.

Publishes never replace a pointer with one to older data, and replicas never
swap to one (:attr:`qsite.db.snapshot.Pointer.order`); a rollback is the one way back.
It raises the pointer's ``epoch``, so replicas follow it down, and records the
data version it rolled back from (``rolled_back_from``): later publishes keep
the rollback (renewing only the heartbeat) until the writer's data is newer
than that version (:func:`qsite.pipeline.ops.publish.holds`).

The snapshot is downloaded and checked (:func:`qsite.db.snapshot.check_file`, its
name against its hash) before the pointer names it, as a replica would check it.
"""

from __future__ import annotations

import sqlite3

from qsite.config import Config
from qsite.db.model import utc_now
from qsite.db.snapshot import Pointer, SnapshotError, check_file, file_sha256, name_version, snapshot_name
from qsite.db.snapshot_store import SnapshotStore, StoreUnavailable

from qsite.pipeline.ops.publish import PublishError, PublishResult, read_state, work_folder


def rollback(config: Config, data_version: int, store: SnapshotStore | None = None) -> PublishResult:
    """Point the store's ``latest.json`` at its snapshot of ``data_version``, older than the one it names.

    :raises PublishError: nothing published yet, ``data_version`` not older, no such
        snapshot in the store, it does not check out, or the pointer changed meanwhile.
    """
    store = store or SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
    state = read_state(store)
    latest = state.pointer
    if latest is None:
        raise PublishError(f"snapshot store {store.where}: no valid latest.json to roll back from")
    if data_version >= latest.data_version:
        raise PublishError(
            f"data version {data_version} is not older than the published {latest.data_version}; a rollback only goes back"
        )
    try:
        names = [name for name in store.snapshots() if name_version(name) == data_version]
    except StoreUnavailable as exc:
        raise PublishError(str(exc)) from None
    if not names:
        raise PublishError(f"snapshot store {store.where}: no snapshot of data version {data_version} to roll back to")
    name = names[0]
    folder = config.database_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    with work_folder(folder) as work:
        copy = work / name
        try:
            with open(copy, "wb") as out:
                for chunk in store.stream(name):
                    out.write(chunk)
            found = check_file(copy)
        except (StoreUnavailable, FileNotFoundError, OSError, sqlite3.Error) as exc:
            raise PublishError(f"{name}: cannot download it: {exc}") from None
        except SnapshotError as exc:
            raise PublishError(f"{name} does not check out, not rolled back: {exc}") from None
        sha256 = file_sha256(copy)
        if snapshot_name(found.data_version, sha256) != name:
            raise PublishError(f"{name} does not match its name (data version {found.data_version}, SHA-256 {sha256[:16]}…)")
        pointer = Pointer(
            file=name,
            sha256=sha256,
            data_version=found.data_version,
            published_at=utc_now(),
            bytes=copy.stat().st_size,
            schema_version=found.schema_version,
            epoch=latest.epoch + 1,
            rolled_back_from=max(latest.data_version, latest.rolled_back_from or 0),
            heartbeat_at=latest.heartbeat_at,
            ingests=latest.ingests,
        )
        try:
            swapped = store.swap_pointer(pointer, state)
        except StoreUnavailable as exc:
            raise PublishError(str(exc)) from None
    if not swapped:
        raise PublishError("latest.json changed while rolling back (a publish?); nothing rolled back, try again")
    return PublishResult(pointer, published=True, rolled_back=True)
