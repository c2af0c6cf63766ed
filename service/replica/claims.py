"""Claims on the snapshot files that several workers serve from one data folder.

``qsite serve --workers N --follow`` runs N followers over one folder
(:mod:`qsite.service.replica.follow`). A worker holds a :class:`Claim` (a shared
``flock``) on the file it serves, and a file is deleted only by
:func:`remove_unclaimed`, which gets an exclusive lock without waiting: so no
worker deletes a file another still serves, and the kernel drops a dead
worker's claims with its descriptors, so nothing is ever left claimed. Apart
from the follower because it is only about files and locks, not snapshots.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a worker whose leftovers must not be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed, nor replaced by another)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


class Claim:
    """A shared ``flock`` on a snapshot file: this process serves it, so no worker deletes it.

    Taken on the file itself (not a file beside it, which could be left behind
    or outlive it). SQLite does not use ``flock`` on Linux (its locks are
    ``fcntl`` byte ranges, a separate kind), and a snapshot's connections are
    read-only, so the two never meet. Local filesystems only: over NFS,
    ``flock`` is emulated with ``fcntl`` locks.
    """

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path

    @classmethod
    def take(cls, path: Path) -> "Claim":
        """Claim the file ``path`` names; :class:`FileNotFoundError` if it is gone, or goes while the claim is taken.

        Waits while a worker holds its exclusive lock to delete the file (a
        moment), then finds it gone.
        """
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not _same_file(fd, path):
                raise FileNotFoundError(f"{path} was removed")
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the lock goes with the descriptor
            self.fd = -1


def remove_unclaimed(path: Path) -> bool:
    """Delete ``path`` if no process holds a :class:`Claim` on it; True if it was deleted.

    Never waits: a file some worker serves is left for that worker to delete
    when it retires it. The exclusive lock is held across the unlink, and the
    name checked under it, so a worker claiming the file at the same moment
    either gets it first (and this gives up) or finds it gone.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _same_file(fd, path):
            return False  # removed meanwhile by another worker
        path.unlink()
        return True
    finally:
        os.close(fd)
