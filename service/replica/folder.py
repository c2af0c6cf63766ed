"""The data folder a replica's workers share: checked copies of snapshots, claimed, downloaded once.

Promises:

- :func:`fetch` returns a local copy of a pointer's snapshot that passed
  :func:`qsite.db.snapshot.verify_download` (size, SHA-256, ``PRAGMA integrity_check``, schema
  version), claimed by this worker (:class:`~qsite.service.replica.claims.Claim`) before it was
  checked; a copy gets its immutable name only once checked, and never over another file;
- downloads take turns on :data:`DOWNLOAD_LOCK`: the first worker to see a new snapshot
  downloads it, the others wait, then find it here and check it;
- :func:`record_served` and :func:`read_served` keep :data:`CURRENT`, the snapshot last
  served, so a restarted replica that cannot reach the store serves it again once it checks out;
- :func:`clear_leftovers` removes only what a process no longer alive left half-written.

Relies on ``flock``: the kernel drops a dead process's locks, so nothing is ever left
claimed or half-done. Why locks rather than one follower per host handing files to its
workers: that would need a process of its own or messages between the workers, and a dead
follower would stop every worker's updates.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from qsite.db.snapshot import Pointer, SnapshotError, verify_download
from qsite.db.snapshot_store import SnapshotStore
from qsite.service.replica.claims import Claim, alive, remove_unclaimed

#: The data folder's record of the snapshot being served (a copy of its pointer).
CURRENT = "current.json"
#: In the data folder: held (exclusively) by the worker downloading or checking a snapshot.
DOWNLOAD_LOCK = ".download.lock"


def clear_leftovers(data_dir: Path) -> None:
    """Remove the downloads and records of processes no longer alive (their pid is in the name)."""
    for pattern in (".*.part", f".{CURRENT}.*.tmp"):
        for part in data_dir.glob(pattern):
            pid = part.name.rsplit(".", 2)[-2]
            if not (pid.isdigit() and alive(int(pid))):
                part.unlink(missing_ok=True)  # a download (or a record) a killed process left behind


def fetch(store: SnapshotStore, data_dir: Path, pointer: Pointer) -> tuple[Path, Claim, dict]:
    """A checked local copy of ``pointer``'s snapshot, claimed, downloading it unless one is already here.

    Downloads take turns (:data:`DOWNLOAD_LOCK`), so the workers of a host
    download each snapshot once; a copy already here is claimed under that
    lock and checked after it, so the workers check side by side.
    Returns the file, the claim and the seconds spent ``download``-ing and ``check``-ing.
    """
    path = data_dir / pointer.file
    for _ in range(2):  # a copy here that does not check out is removed, and fetched again once
        with open(data_dir / DOWNLOAD_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
            started = time.monotonic()
            try:
                claim = Claim.take(path)
            except FileNotFoundError:
                return _download(store, data_dir, pointer, path, started)
        try:
            verify_download(path, pointer)
            return path, claim, {"download": 0.0, "check": time.monotonic() - started}
        except SnapshotError:
            claim.release()
            if not remove_unclaimed(path):  # damaged, and another worker serves it: leave it
                raise
    raise SnapshotError(f"{pointer.file}: the copy in {data_dir} does not check out")


def _download(store: SnapshotStore, data_dir: Path, pointer: Pointer, path: Path, started: float) -> tuple[Path, Claim, dict]:
    part = data_dir / f".{pointer.file}.{os.getpid()}.part"
    try:
        try:
            with open(part, "wb") as out:
                for chunk in store.stream(pointer.file):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except FileNotFoundError:
            raise SnapshotError(f"{pointer.file} is named by latest.json but not in the store") from None
        downloaded = time.monotonic()
        # Claimed before it has its name: from then on no worker deletes it.
        unnamed = Claim.take(part)
        try:
            verify_download(part, pointer)
            os.link(part, path)  # never over a file of that name: another worker may serve it
            # Claimed again under its name (what lsof and /proc then show), before the first claim goes.
            claim = Claim.take(path)
        finally:
            unnamed.release()
    finally:
        part.unlink(missing_ok=True)
    return path, claim, {"download": downloaded - started, "check": time.monotonic() - downloaded}


def read_served(data_dir: Path) -> tuple[Pointer, Path, Claim] | None:
    """The snapshot :data:`CURRENT` records, claimed and checked again; None if there is none or it does not check out."""
    try:
        pointer = Pointer.from_json((data_dir / CURRENT).read_bytes())
        path = data_dir / pointer.file
        claim = Claim.take(path)
    except (OSError, SnapshotError):
        return None
    try:
        verify_download(path, pointer)
    except SnapshotError:
        claim.release()
        return None
    return pointer, path, claim


def record_served(data_dir: Path, pointer: Pointer) -> None:
    """Record ``pointer`` as the snapshot served (:data:`CURRENT`), replaced whole.

    :raises OSError: when it cannot be written (only a restart without the store needs it).
    """
    # Each worker writes its own temporary copy: they may swap at the same moment.
    temporary = data_dir / f".{CURRENT}.{os.getpid()}.tmp"
    temporary.write_bytes(pointer.to_json())
    os.replace(temporary, data_dir / CURRENT)
