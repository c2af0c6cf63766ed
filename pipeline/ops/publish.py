"""``qsite publish``: the writer's database as an immutable snapshot in the store.

One publish, in this order, so that a replica can never find a pointer to a
file that is not whole and checked:

1. ``VACUUM INTO`` a temporary file (:func:`pipeline.store.snapshots.copy_database`) in a
   folder beside the database (:func:`work_folder`, which first removes those of killed publishes):
   a consistent, compact copy taken in one read transaction, so it neither
   waits for the WAL's readers nor blocks them (the writer lock is not needed);
2. :func:`db.snapshot.check_file` on the copy (``PRAGMA integrity_check``,
   schema version, the data version it holds) and its SHA-256;
3. upload under the immutable name :func:`db.snapshot.snapshot_name`;
4. only then ``latest.json`` (:class:`db.snapshot.Pointer`);
5. delete published snapshots beyond ``snapshots.keep``, never the pointed one.

Nothing is uploaded when the store's pointer already names this data version
and schema.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from config import Config
from db.snapshot_store import SnapshotStore, StoreUnavailable
from db.model import utc_now
from db.snapshot import SCHEMA_VERSION, Pointer, SnapshotError, check_file, file_sha256, snapshot_name

from pipeline.store import newer_schema
from pipeline.store.snapshots import copy_database, live_data_version, live_migrations

log = logging.getLogger("qsite.publish")


class PublishError(Exception):
    """Nothing was published; the message says why in one line (the store's pointer is unchanged)."""


@dataclass(frozen=True)
class PublishResult:
    pointer: Pointer
    published: bool
    pruned: tuple[str, ...] = ()

    def line(self) -> str:
        pointer = self.pointer
        if not self.published:
            return f"publish: unchanged, data version {pointer.data_version} is already published as {pointer.file}"
        line = f"publish: {pointer.file} ({pointer.bytes} bytes, data version {pointer.data_version}) is now latest"
        if self.pruned:
            line += f"; pruned {len(self.pruned)} older"
        return line


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

    :raises PublishError: the database cannot be copied, the copy does not check out,
        or the store cannot be read or written.
    """
    database = config.database_path
    store = store or SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
    try:
        latest = store.read_pointer()
    except SnapshotError as exc:
        log.warning("the store's %s is not valid (%s); publishing a new one", "latest.json", exc)
        latest = None
    except StoreUnavailable as exc:
        raise PublishError(str(exc)) from None
    live_version = current_data_version(database)
    if latest and latest.data_version == live_version and latest.schema_version == SCHEMA_VERSION:
        return PublishResult(latest, published=False)
    with work_folder(database.parent) as work:
        copy = work / "snapshot.db"
        try:
            copy_database(database, copy)
            found = check_file(copy)
        except (sqlite3.Error, OSError) as exc:
            raise PublishError(f"{database}: cannot copy the database: {exc}") from None
        except SnapshotError as exc:
            raise PublishError(f"the copy of {database} does not check out, nothing published: {exc}") from None
        if latest and latest.data_version == found.data_version and latest.schema_version == found.schema_version:
            return PublishResult(latest, published=False)  # the data changed back between the two reads
        sha256 = file_sha256(copy)
        pointer = Pointer(
            file=snapshot_name(found.data_version, sha256),
            sha256=sha256,
            data_version=found.data_version,
            published_at=utc_now(),
            bytes=copy.stat().st_size,
            schema_version=found.schema_version,
        )
        try:
            store.upload(pointer.file, copy)
            store.write_pointer(pointer)
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
    """Publishes after an ingest that changed data, for ``qsite schedule`` when ``snapshots.store`` is set.

    Remembers the data version it last saw published, so an ingest that
    changed nothing costs one read of ``data_versions`` and no store request.
    """

    def __init__(self, config: Config):
        self.config = config
        self.store = SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
        self.published_version: int | None = None

    def __call__(self) -> PublishResult | None:
        try:
            if current_data_version(self.config.database_path) == self.published_version:
                return None
            result = publish(self.config, self.store)
        except PublishError as exc:
            log.error("%s", exc)
            return None
        self.published_version = result.pointer.data_version
        log.info("%s", result.line())
        return result


def publisher_for(config: Config) -> AfterIngest | None:
    """The scheduler's publisher: one when ``snapshots.store`` is set, else None."""
    return AfterIngest(config) if config.snapshots.store else None
