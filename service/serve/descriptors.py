"""A worker's file descriptors: the limit raised at start, the connection cap it can hold, a warning near it.

Promises: :func:`raise_fd_limit` raises the soft ``RLIMIT_NOFILE`` to the hard limit;
:func:`connections_per_worker` never gives a worker more connections than its descriptors
can hold beside :data:`FD_RESERVE`; :class:`FdWatch` logs at most one line a minute when
a worker is close to its limit. Connections over the cap wait in the kernel's listen queue
(they cost no descriptor) rather than fail.

Relies on ``/proc/self/fd`` to count descriptors; elsewhere nothing is watched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time

log = logging.getLogger("qsite.serve")

#: Descriptors a worker keeps for itself beyond its connections: SQLite files
#: and their WAL, the event loop, the runtime's threads, Redis, logs.
FD_RESERVE = 128
#: Share of the descriptor limit in use at which a worker warns.
FD_WARN_SHARE = 0.9
#: Seconds between two descriptor warnings, and between two checks.
FD_WARN_EVERY = 60.0
FD_CHECK_EVERY = 5.0


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit; returns the soft limit now in force.

    Many systems start processes with a soft limit of 1024 and a far higher
    hard one: the connection cap should be bounded by the hard limit.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. above fs.nr_open
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft


def connections_per_worker(max_connections: int, workers: int, fd_limit: int) -> int:
    """Each worker's share of ``api.max_connections``, never more than its descriptors can hold.

    Every worker is a process with its own ``fd_limit``; it keeps
    :data:`FD_RESERVE` of them for itself, so a flood of connections never
    makes it fail to open its database or accept its next client.
    """
    share = -(-max_connections // workers)
    return max(1, min(share, fd_limit - FD_RESERVE))


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: nothing to watch
        return 0


class FdWatch:
    """Warns, at most once a minute, when this process is close to its descriptor limit.

    Connections over the cap wait in the kernel's queue rather than fail, so
    this is the one line an operator sees when descriptors run short for any
    other reason, instead of a traceback per refused connection.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.warned_at = -float("inf")

    def check(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        used = open_fds()
        if used < FD_WARN_SHARE * self.limit or now - self.warned_at < FD_WARN_EVERY:
            return False
        self.warned_at = now
        log.warning(
            "%d of %d file descriptors in use (pid %d); new connections wait until some close"
            " (raise the hard open-file limit or lower api.max_connections)",
            used, self.limit, os.getpid(),
        )
        return True

    def every(self, seconds: float, loop: asyncio.AbstractEventLoop) -> None:
        """Check now and every ``seconds`` on ``loop`` (plain callbacks: nothing to cancel at shutdown)."""

        def tick():
            self.check()
            loop.call_later(seconds, tick)

        loop.call_soon(tick)
