"""One writer at a time: an inter-process lock next to the database.

Cron, the scheduler and a manual ``qsite ingest`` may all start at once. SQLite
would serialise their transactions, but two ingests interleaving their
conditional fetches and bookkeeping would waste work and confuse
``ingest_runs``; so every writer first takes ``<database>.lock``.

The lock is an OS-level ``flock`` (through the ``filelock`` library), which the
kernel drops when the holding process exits for any reason, ``SIGKILL``
included: a lock left behind by a killed process never blocks anyone. A waiter
gives up after a bounded time with :class:`WriterLockTimeout`.

Within one process the lock is reentrant per thread (``ingest all`` may call
code that takes it again) and exclusive between threads, so two scheduler jobs
never write at once either.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from qsite.db.model import utc_now

log = logging.getLogger("qsite.lock")

#: Seconds a second writer waits for the first before giving up, unless told otherwise.
DEFAULT_WAIT = 30.0


class WriterLockTimeout(Exception):
    """Another process held the writer lock for longer than we were willing to wait."""


def lock_path(db_path: str | os.PathLike) -> Path:
    """The lock file for the database at ``db_path``: the same name plus ``.lock``."""
    db_path = Path(db_path)
    return db_path.with_name(db_path.name + ".lock")


def _holder_path(db_path: str | os.PathLike) -> Path:
    # The holder's description lives beside the lock, not in it: the lock file
    # itself belongs to filelock, which may reopen it at any time.
    db_path = Path(db_path)
    return db_path.with_name(db_path.name + ".lock.holder")


def _describe_self() -> str:
    command = " ".join(Path(sys.argv[0]).name.split() + sys.argv[1:3]) if sys.argv else "python"
    return f"pid {os.getpid()} on {socket.gethostname()} ({command}) since {utc_now()}"


def lock_holder(db_path: str | os.PathLike) -> str | None:
    """Who last took the lock (pid, host, command, time), if recorded; only meaningful while it is held."""
    try:
        text = _holder_path(db_path).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


@contextmanager
def writer_lock(db_path: str | os.PathLike, timeout: float = DEFAULT_WAIT) -> Iterator[Path]:
    """Hold the single-writer lock of the database at ``db_path`` for the ``with`` block.

    :param timeout: seconds to wait for another holder; ``0`` tries once.
    :raises WriterLockTimeout: when the lock is still held after ``timeout`` seconds,
        with a message naming the database, the lock file and, if known, the holder.
    """
    path = lock_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), is_singleton=True)
    first = not lock.is_locked
    try:
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if timeout <= 0:
                raise
            # one line, so a command that seems to hang says why (and tests wait on it instead of sleeping)
            holder = lock_holder(db_path)
            log.info("waiting up to %g s for the writer lock %s: another qsite run is writing%s",
                     timeout, path, f" ({holder})" if holder else "")
            lock.acquire(timeout=timeout, poll_interval=0.1)
    except Timeout:
        holder = lock_holder(db_path)
        raise WriterLockTimeout(
            f"{db_path}: another qsite run is writing to this database"
            + (f" ({holder})" if holder else "")
            + f"; gave up after waiting {timeout:g} s for the lock {path}."
            " Try again later, or wait longer with --wait."
        ) from None
    try:
        if first:
            log.debug("writer lock %s taken", path)
            try:
                _holder_path(db_path).write_text(_describe_self() + "\n", encoding="utf-8")
            except OSError:
                pass  # the description is a courtesy; the flock is what excludes
        yield path
    finally:
        if first:
            try:
                _holder_path(db_path).write_text("", encoding="utf-8")
            except OSError:
                pass
        lock.release()
        if first:
            log.debug("writer lock %s released", path)


def lock_is_held(db_path: str | os.PathLike) -> bool:
    """Whether some other process (or thread) holds the writer lock right now.

    flock offers no way to look without touching: this takes the lock for an
    instant when it is free, so a writer trying with ``timeout=0`` at that very
    moment fails (the README says so).
    """
    if not lock_path(db_path).exists():
        return False
    lock = FileLock(str(lock_path(db_path)), is_singleton=True)
    if lock.is_locked:  # held by this very thread
        return True
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False
