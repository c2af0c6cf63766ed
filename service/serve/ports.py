"""One qsite server per address: a port already served is refused, never shared.

Promises: :func:`claim_port` holds ``host``:``port`` for this process while its block runs
and raises :class:`PortInUse` (a message naming the address and another port to try) when
another program or another qsite server listens there or is starting there.

Why: granian binds with ``SO_REUSEPORT`` so its workers share one socket, and Linux lets any
number of such sockets share a port: without this check a second server would start silently
and the kernel would split the connections between the two.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import tempfile
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

log = logging.getLogger("qsite.serve")


class PortInUse(Exception):
    """The address cannot be served: another program or another qsite server listens there, or it is not ours to bind."""


def _in_use(host: str, port: int, by: str) -> PortInUse:
    shown = f"[{host}]" if ":" in host else host
    return PortInUse(
        f"{shown}:{port} is already in use ({by}); stop it or choose another port "
        f"(qsite serve --port {port + 1 if port < 65535 else 8001}, make up PORT={port + 1 if port < 65535 else 8001})"
    )


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUse` when something already listens on ``host``:``port``.

    Granian binds with ``SO_REUSEPORT`` (its workers share one socket), and
    Linux lets any number of such sockets share a port: a second server would
    start silently and the kernel would split the connections between the two.
    This probe binds *without* ``SO_REUSEPORT`` (with ``SO_REUSEADDR``, so
    connections of a server stopped a moment ago in ``TIME_WAIT`` do not
    count), which fails while any socket listens there.
    """
    if port == 0:  # the kernel picks a free port
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortInUse(f"{host}: cannot serve on this address: {exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise _in_use(host, port, "another server listens there") from None
            raise PortInUse(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def claim_port(host: str, port: int) -> Iterator[None]:
    """Hold ``host``:``port`` for this process while the block runs; :class:`PortInUse` when it is taken.

    A lock file per address (in the temporary folder, an ``flock`` the kernel
    drops when the process ends) closes the gap between the probe of
    :func:`check_port_free` and granian's bind: two qsite servers started at
    the same moment cannot both pass the probe and share the port.
    """
    if port == 0:
        yield
        return
    lock = FileLock(Path(tempfile.gettempdir()) / f"qsite-port-{host.replace(':', '_')}-{port}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise _in_use(host, port, "another qsite server is starting or serving there") from None
    except OSError as exc:  # e.g. another user's lock file: the probe alone still guards the port
        log.debug("no lock file for %s:%d: %s", host, port, exc)
        lock = None
    try:
        check_port_free(host, port)
        yield
    finally:
        if lock is not None:
            lock.release()
