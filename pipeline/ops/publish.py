"""``qsite publish``: the writer's database as an immutable snapshot in the store.

One publish, in this order, so that a replica can never find a pointer to a
file that is not whole and checked:

1. ``VACUUM INTO`` a temporary file (:func:`qsite.pipeline.store.snapshots.copy_database`) in a
   folder beside the database (:func:`work_folder`, which first removes those of killed publishes):
   a consistent, compact copy taken in one read transaction, so it neither
   waits for the WAL's readers nor blocks them (the writer lock is not needed);
2. :func:`qsite.db.snapshot.check_file` on the copy (``PRAGMA integrity_check``,
   schema version, the data version it holds) and its SHA-256;
3. upload under the immutable name :func:`qsite.db.snapshot.snapshot_name`;
4. only then ``latest.json`` (:class:`qsite.db.snapshot.Pointer`), by compare-and-swap,
   and never over a pointer to newer data (two publishes may overlap: the
   scheduler's and a manual one);
5. delete published snapshots beyond ``snapshots.keep``, never the pointed one.

Nothing is uploaded when the store's pointer already names this data version
and schema; the pointer's heartbeat (the writer's latest ingests) is renewed
instead, so replicas see that the writer is alive even when the data did not change.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

from qsite.config import Config
from qsite.db.snapshot_store import PointerState, SnapshotStore, StoreUnavailable
from qsite.db.model import utc_now
from qsite.db.snapshot import SCHEMA_VERSION, Pointer, SnapshotError, check_file, file_sha256, snapshot_name

from qsite.pipeline.store import newer_schema
from qsite.pipeline.store.snapshots import copy_database, live_data_version, live_ingests, live_migrations

log = logging.getLogger("qsite.publish")


class PublishError(Exception):
    """Nothing was published; the message says why in one line (the store's pointer is unchanged)."""


@dataclass(frozen=True)
class PublishResult:
    """What a publish did: ``pointer`` is the store's ``latest.json`` after it.

    ``published``: a new snapshot (or, with ``rolled_back``, an older one) is
    latest now. Otherwise the snapshot stayed and, unless ``superseded`` (this
    publish's pointer, refused because a newer one was written meanwhile), the
    pointer's heartbeat was renewed.
    """

    pointer: Pointer
    published: bool
    pruned: tuple[str, ...] = ()
    superseded: Pointer | None = None
    rolled_back: bool = False

    def line(self) -> str:
        pointer = self.pointer
        if self.superseded is not None:
            return (
                f"publish: not published, data version {self.superseded.data_version} lost the race to the newer "
                f"data version {pointer.data_version}, published meanwhile as {pointer.file}"
            )
        if self.rolled_back:
            return (
                f"publish: rolled back to {pointer.file} (data version {pointer.data_version}) from data version "
                f"{pointer.rolled_back_from}; publishes keep it until the data is newer than that"
            )
        if not self.published and holds(pointer):
            return (
                f"publish: rolled back to {pointer.file} (data version {pointer.data_version}) until the data is newer than "
                f"version {pointer.rolled_back_from}; heartbeat written"
            )
        if not self.published:
            return f"publish: unchanged, data version {pointer.data_version} is already published as {pointer.file}"
        line = f"publish: {pointer.file} ({pointer.bytes} bytes, data version {pointer.data_version}) is now latest"
        if self.pruned:
            line += f"; pruned {len(self.pruned)} older"
        return line


#: Compare-and-swaps of ``latest.json`` a publish tries before giving up (each loses only to another writer's pointer).
SWAP_ATTEMPTS = 5


def holds(pointer: Pointer, data_version: int | None = None) -> bool:
    """Whether ``pointer`` is a rollback that still holds against the data version ``data_version``.

    A rollback holds until the writer has data newer than the version it
    rolled back from; without ``data_version``: whether it is a rollback at all.
    """
    if pointer.rolled_back_from is None:
        return False
    return data_version is None or data_version <= pointer.rolled_back_from


def read_state(store: SnapshotStore) -> PointerState:
    """The store's pointer and what a compare-and-swap compares; an invalid pointer reads as none to replace."""
    try:
        state = store.read_state(lenient=True)
    except StoreUnavailable as exc:
        raise PublishError(str(exc)) from None
    if state.problem:
        log.warning("the store's %s is not valid (%s); publishing a new one", "latest.json", state.problem)
    return state


def heartbeat(store: SnapshotStore, state: PointerState, ingests: dict) -> PublishResult:
    """Renew ``state``'s pointer with the writer's ``ingests`` and the time, the snapshot unchanged.

    A pointer written meanwhile by another publish is newer than this one and is left as it is.
    """
    pointer = replace(state.pointer, heartbeat_at=utc_now(), ingests=ingests)
    try:
        if store.swap_pointer(pointer, state):
            return PublishResult(pointer, published=False)
        newer = store.read_pointer()
    except (StoreUnavailable, SnapshotError) as exc:
        raise PublishError(str(exc)) from None
    return PublishResult(newer or state.pointer, published=False)


def current_data_version(database: Path) -> int:
    """The data version of the live database, read without writing (0 for a missing or empty one)."""
    if not database.exists():
        raise PublishError(f"{database}: no database yet; run `qsite ingest all` first")
    try:
        unknown, pending = live_migrations(database)
        version = live_data_version(database)
    except sqlite3.Error as exc:
        raise PublishError(f"{database}: cannot read the database: {exc}") from None
    if unknown:  # its snapshot would be refused by the replicas that know no more than this qsite
        raise PublishError(str(newer_schema(database, unknown, to="publish it")))
    if pending:  # publishing only reads: its copy would be of the old schema, which replicas refuse
        raise PublishError(
            f"{database}: this qsite's migrations {', '.join(pending)} are not applied yet; "
            "run `qsite migrate` (or any ingest) first"
        )
    return version


def publish(config: Config, store: SnapshotStore | None = None) -> PublishResult:
    """Publish the configured database to the configured store; see the module docstring.

    The pointer is replaced by compare-and-swap (:meth:`SnapshotStore.swap_pointer
    <qsite.db.snapshot_store.SnapshotStore.swap_pointer>`) and only by a higher or equal
    :attr:`~qsite.db.snapshot.Pointer.order`: a publish that lost the race to a newer
    pointer leaves it (``superseded``). With the data already published, or a
    rollback holding (:func:`holds`), only the heartbeat is renewed.

    :raises PublishError: the database cannot be copied, the copy does not check out,
        the store cannot be read or written, or the store's pointer names newer data
        than the database holds (only :func:`qsite.pipeline.ops.rollback.rollback` goes back).
    """
    database = config.database_path
    store = store or SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
    state = read_state(store)
    latest = state.pointer
    live_version = current_data_version(database)
    ingests = live_ingests(database)
    if latest and latest.data_version > live_version and not holds(latest, live_version):
        raise PublishError(
            f"the store's latest.json names data version {latest.data_version}, newer than {database}'s "
            f"{live_version}: not published (to go back on purpose: qsite publish --rollback-to VERSION)"
        )
    if latest and (holds(latest, live_version) or (latest.data_version, latest.schema_version) == (live_version, SCHEMA_VERSION)):
        return heartbeat(store, state, ingests)
    with work_folder(database.parent) as work:
        copy = work / "snapshot.db"
        try:
            copy_database(database, copy)
            found = check_file(copy)
        except (sqlite3.Error, OSError) as exc:
            raise PublishError(f"{database}: cannot copy the database: {exc}") from None
        except SnapshotError as exc:
            raise PublishError(f"the copy of {database} does not check out, nothing published: {exc}") from None
        if latest and (holds(latest, found.data_version) or (latest.data_version, latest.schema_version) == (found.data_version, found.schema_version)):
            return heartbeat(store, state, ingests)  # the data changed back between the two reads
        sha256 = file_sha256(copy)
        now = utc_now()
        pointer = Pointer(
            file=snapshot_name(found.data_version, sha256),
            sha256=sha256,
            data_version=found.data_version,
            published_at=now,
            bytes=copy.stat().st_size,
            schema_version=found.schema_version,
            epoch=latest.epoch if latest else 0,
            heartbeat_at=now,
            ingests=ingests,
        )
        try:
            store.upload(pointer.file, copy)
            for _ in range(SWAP_ATTEMPTS):
                if store.swap_pointer(pointer, state):
                    break
                state = read_state(store)  # another publish (or a rollback) wrote latest.json meanwhile
                if state.pointer and state.pointer.order >= pointer.order:
                    log.info("data version %d not published: %s was published meanwhile", pointer.data_version, state.pointer.file)
                    return PublishResult(state.pointer, published=False, superseded=pointer)
            else:
                raise PublishError(f"snapshot store {store.where}: latest.json kept changing during {SWAP_ATTEMPTS} attempts; try again")
        except StoreUnavailable as exc:
            raise PublishError(str(exc)) from None
    return PublishResult(pointer, published=True, pruned=prune(store, pointer, config.snapshots.keep))


#: The name of a publish's temporary folder beside the database, which holds its whole copy.
WORK_PREFIX = ".qsite-publish-"
#: Seconds before a work folder may be swept: its publish locks it just after making it.
STALE_AFTER = 60.0


@contextmanager
def work_folder(parent: Path) -> Iterator[Path]:
    """A temporary folder in ``parent`` for one publish's copy, locked while in use, then removed.

    A publish killed before it could remove its folder (SIGTERM from a CronJob's
    ``activeDeadlineSeconds``, SIGKILL) leaves a whole copy of the database behind;
    each publish first removes such folders (:func:`remove_stale_work_folders`).
    """
    remove_stale_work_folders(parent)
    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=parent))
    fd = os.open(work, os.O_RDONLY)
    try:
        # Held until the folder is gone; the kernel drops it when this process dies, however it dies.
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(fd)


def remove_stale_work_folders(parent: Path) -> None:
    """Remove the work folders in ``parent`` that no running publish holds.

    Publishes do not take the writer lock (an upload may take minutes, and ingests
    would wait on it), so two may run at once: a folder is removed only when its
    ``flock`` can be had without waiting, that is, when the publish that made it is
    gone. A folder younger than :data:`STALE_AFTER` is left alone, since its
    publish may be between making it and locking it.
    """
    for folder in parent.glob(WORK_PREFIX + "*"):
        try:
            if time.time() - folder.stat().st_mtime < STALE_AFTER:
                continue
            fd = os.open(folder, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile, or not a folder we can open: not ours to judge
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a publish is using it now
        else:
            shutil.rmtree(folder, ignore_errors=True)
            log.info("removed %s, left by a publish that was stopped", folder)
        finally:
            os.close(fd)


def prune(store: SnapshotStore, pointer: Pointer, keep: int) -> tuple[str, ...]:
    """Delete snapshots beyond the ``keep`` newest besides ``pointer``'s; never ``pointer.file``.

    A failure here only leaves old files behind, so it is logged, not raised.
    """
    try:
        others = [name for name in store.snapshots() if name != pointer.file]
        doomed = others[keep:]
        for name in doomed:
            store.delete(name)
    except StoreUnavailable as exc:
        log.warning("old snapshots not pruned: %s", exc)
        return ()
    return tuple(doomed)


class AfterIngest:
    """Publishes after every ingest, for ``qsite schedule`` when ``snapshots.store`` is set.

    An ingest that changed nothing costs a read and a write of ``latest.json``
    (the heartbeat replicas judge their health by), and no upload.
    """

    def __init__(self, config: Config):
        self.config = config
        self.store = SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)

    def __call__(self) -> PublishResult | None:
        try:
            result = publish(self.config, self.store)
        except PublishError as exc:
            log.error("%s", exc)
            return None
        log.info("%s", result.line())
        return result


def publisher_for(config: Config) -> AfterIngest | None:
    """The scheduler's publisher: one when ``snapshots.store`` is set, else None."""
    return AfterIngest(config) if config.snapshots.store else None
