"""``qsite serve --follow``: a replica that serves the snapshots the writer publishes.

It needs nothing but the store (``snapshots:`` in the config). A background thread reads
``latest.json`` every ``snapshots.poll``; a new snapshot is fetched into the shared data
folder and checked (:mod:`qsite.service.replica.folder`), then swapped in on the event loop.

Promises:

- a request sees the old file or the new one, never neither: the Datasette database is
  replaced in one step on the event loop; requests in flight finish on the old file;
- the plugin's :class:`~qsite.service.datasette.handler.Api` (and its response cache) is dropped
  at a swap; ETags come from the bytes and Last-Modified from the data's ``data_versions``,
  so the same snapshot gives the same validators on every replica;
- :data:`GRACE` seconds (or two polls) after the swap-out, the old file's connections are
  closed and the file deleted, unless another worker still serves it;
- never a swap to a lower pointer (:attr:`qsite.db.snapshot.Pointer.order`); only a rollback (a
  higher epoch) goes back. The newest pointer is kept as the writer's heartbeat
  (:attr:`Follower.latest`, read by /api/v1/health);
- anything that does not check out is never served: the replica keeps what it has and
  logs one line per distinct problem. Until the first snapshot, every request gets 503
  with ``Retry-After``.

Several workers share one data folder, each following on its own: each keeps serving if
the others die (:mod:`qsite.service.replica.claims`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from qsite.config import Config
from qsite.db.snapshot import NAME_PATTERN, Pointer, SnapshotError
from qsite.db.snapshot_store import SnapshotStore, StoreUnavailable
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.health import health_response
from qsite.service.api.routing import resolve
from qsite.service.compat import replace_database, snapshot_database
from qsite.service.http.answered import note
from qsite.service.http.problems import PROBLEMS, send_problem, send_response
from qsite.service.http.tally import count
from qsite.service.replica.claims import Claim, remove_unclaimed
from qsite.service.replica.folder import (
    CURRENT,
    clear_leftovers,
    fetch,
    read_served,
    record_served,
)

log = logging.getLogger("qsite.follow")


def _asks_health(scope) -> bool:
    """Whether an HTTP ``scope`` is a GET or HEAD of /api/v1/health."""
    if scope["method"] not in ("GET", "HEAD"):
        return False
    resolved = resolve((scope.get("raw_path") or scope["path"].encode()).decode("latin-1").partition("?")[0])
    return resolved is not None and resolved[0] is ENDPOINTS["health"]


#: Seconds an old snapshot stays open (and on disk) after a swap, for the requests still using it:
#: at least this, at least two polls, and longer than a query may run (``api.sql_time_limit_ms``).
GRACE = 5.0

@dataclass
class Serving:
    """The snapshot being served: its pointer, its file, the Datasette database over it and this worker's claim on the file.

    ``closers`` are called when the snapshot is retired: what was built over it
    (the plugin's Api and its connections, service/datasette/state.py).
    """

    pointer: Pointer
    path: Path
    database: object
    claim: Claim
    closers: list[Callable[[], None]] = field(default_factory=list)


#: The parts of a store's error message that change from one poll to the next: obstore's
#: ``in 218.346136ms`` (or ``1.2s``) and ``after 2 retries``.
_VOLATILE = re.compile(r"\b\d+(?:\.\d+)?(?:ns|µs|us|ms|s)\b|\bafter \d+ retries\b")


def steady(message: str) -> str:
    """``message`` with its timings and retry counts blanked: the same problem gives the same text."""
    return _VOLATILE.sub("…", message)


class Follower:
    """Follows the store's ``latest.json`` for one Datasette instance; see the module docstring.

    Snapshots are served under the Datasette name of the configured database
    (its file stem), so URLs are the same as on the writer's own instance.

    :param data_dir: where downloads and the served files are kept.
    """

    def __init__(self, datasette, config: Config, data_dir: Path):
        self.datasette = datasette
        self.config = config
        self.name = config.database_path.stem
        self.data_dir = Path(data_dir)
        self.poll = config.snapshots.poll
        self.grace = max(GRACE, 2.0 * self.poll, config.api.sql_time_limit_ms / 1000 + 1.0)
        self.store = SnapshotStore(config.snapshot_store, config.snapshots.endpoint_url)
        self.serving: Serving | None = None
        #: for /metrics: the pointer latest.json held at the last poll, and when this worker last swapped (Unix time)
        self.polled: Pointer | None = None
        self.swapped_at: float | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_problem: str | None = None
        #: The newest pointer accepted (served, or naming the served file): its ``ingests`` are the writer's heartbeat.
        self.latest: Pointer | None = None

    # -- serving ---------------------------------------------------------------

    @property
    def retry_after(self) -> int:
        return max(1, min(self.poll, 30))

    def wrap(self, app):
        """``app`` with the follower around it: started by the ASGI lifespan, 503 until a snapshot is in."""

        async def follow(scope, receive, send):
            if scope["type"] == "lifespan":

                async def lifespan_receive():
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        self.start(asyncio.get_running_loop())
                    elif message["type"] == "lifespan.shutdown":
                        self.stop()
                    return message

                return await app(scope, lifespan_receive, send)
            if scope["type"] == "http" and self.serving is None:
                if _asks_health(scope):  # the health document, so a monitor reads its status: no-data
                    status, headers, body = health_response(
                        [], {}, self.config.api.health_max_data_age, None, retry_after=self.retry_after
                    )
                    note(scope, status)  # for /metrics (service/http/answered.py)
                    return await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
                note(scope, PROBLEMS["unavailable"][0])
                return await send_problem(
                    send,
                    "unavailable",
                    "this replica has no data snapshot yet; try again shortly",
                    headers=[(b"retry-after", str(self.retry_after).encode())],
                    head=scope["method"] == "HEAD",
                )
            return await app(scope, receive, send)

        return follow

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.data_dir.mkdir(parents=True, exist_ok=True)
        clear_leftovers(self.data_dir)
        self._thread = threading.Thread(target=self._run, name="qsite-follow", daemon=True)
        self._thread.start()
        log.info("following %s every %d s into %s", self.store.where, self.poll, self.data_dir)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while True:
            try:
                self.check()
            except Exception:  # the poller must outlive any surprise; the replica keeps serving
                log.exception("snapshot check failed")
            if self._stop.wait(self.poll):
                return

    # -- checking and downloading (the poller thread) ------------------------------

    def problem(self, message: str) -> None:
        """Log ``message`` once, until something else happens; the replica keeps serving.

        Messages are compared without their timings (:func:`steady`): obstore's
        name the time a request took, which differs on every poll.
        """
        if steady(message) != self._last_problem:
            self._last_problem = steady(message)
            serving = self.serving.pointer.file if self.serving else "nothing yet (503)"
            log.error("%s; still serving %s", message, serving)

    def check(self) -> bool:
        """Read the pointer once; fetch, check and swap in a new snapshot. True if one was swapped in."""
        try:
            pointer = self.store.read_pointer()
        except (StoreUnavailable, SnapshotError) as exc:
            self.problem(str(exc))
            return self.serving is None and self._resume()
        if pointer is None:
            self.problem(f"snapshot store {self.store.where}: nothing published yet")
            return self.serving is None and self._resume()
        self.polled = pointer
        if self.serving is not None:
            served = self.serving.pointer
            if pointer.file == served.file:
                self.latest = pointer  # the same snapshot, maybe a renewed heartbeat
                return False
            if pointer.order < served.order:  # only an explicit rollback (a higher epoch) goes back
                self.problem(f"latest.json names {pointer.file} (data version {pointer.data_version}, epoch {pointer.epoch}), "
                             f"older than the served data version {served.data_version} (epoch {served.epoch}); not swapped")
                return False
        try:
            path, claim, timings = fetch(self.store, self.data_dir, pointer)
        except (StoreUnavailable, SnapshotError, OSError) as exc:
            count("failed_swaps")
            self.problem(f"snapshot {pointer.file} not served: {exc}")
            return False
        self._swap_on_loop(pointer, path, claim, timings)
        return True

    def _resume(self) -> bool:
        """With no snapshot served and no word from the store: serve the last one this folder had, if it checks out."""
        served = read_served(self.data_dir)
        if served is None:
            return False
        pointer, path, claim = served
        log.warning("serving %s from %s until the store answers", pointer.file, self.data_dir)
        self._swap_on_loop(pointer, path, claim, {"download": 0.0, "check": 0.0})
        return True

    def _swap_on_loop(self, pointer: Pointer, path: Path, claim: Claim, timings: dict) -> None:
        done = asyncio.run_coroutine_threadsafe(self._swap(pointer, path, claim, timings), self.loop)
        try:
            done.result(timeout=60)
        except concurrent.futures.TimeoutError:
            if done.cancel():  # never ran (the swap has no await: it ran whole or not at all)
                claim.release()
            raise
        except BaseException:
            if self.serving is None or self.serving.claim is not claim:  # not swapped in: not served
                claim.release()
            raise

    # -- swapping (the event loop) -----------------------------------------------------

    async def _swap(self, pointer: Pointer, path: Path, claim: Claim, timings: dict) -> None:
        started = time.perf_counter()
        datasette = self.datasette
        old = self.serving
        database = snapshot_database(datasette, path, pointer.sha256)
        if "_memory" in datasette.databases:
            datasette.remove_database("_memory")
        # No await between the old file and the new: no request sees them apart (service/compat.py).
        replace_database(datasette, self.name, database)
        # The next request finds a new snapshot served and builds a new Api (and response
        # cache) over it (service/datasette/state.py serving_api).
        self.serving = Serving(pointer, path, database, claim)
        self.latest = pointer
        self.swapped_at = time.time()
        swap_ms = (time.perf_counter() - started) * 1000
        self._last_problem = None
        if old is not None:
            # Counted from now, when no new request can reach the old file any more.
            asyncio.get_running_loop().call_later(self.grace, self._retire, old)
        try:
            record_served(self.data_dir, pointer)
        except OSError as exc:  # only a restart without the store needs it: serve on
            log.error("cannot record the snapshot served in %s: %s", self.data_dir / CURRENT, exc)
        log.info(
            "serving %s (data version %d, %d bytes): downloaded in %.2f s, checked in %.2f s, swapped in %.2f ms (worker %d)",
            pointer.file, pointer.data_version, pointer.bytes, timings["download"], timings["check"], swap_ms, os.getpid(),
        )

    def _retire(self, old: Serving) -> None:
        """Close a replaced snapshot's connections, give up the claim on its file and delete it unless another worker serves it.

        Any other snapshot file no worker serves goes too: one left by a
        worker that died, or by one that gave up its claim while another still
        served the file.
        """
        old.database.close()
        for close in old.closers:
            close()  # the API's own connections to the old file (service/api/reader.py)
        old.claim.release()
        current = self.serving.path if self.serving else None
        removed = remove_unclaimed(old.path) if old.path != current else False
        for path in self.data_dir.iterdir():
            if path != current and path != old.path and NAME_PATTERN.match(path.name):
                remove_unclaimed(path)
        log.info(
            "retired %s (worker %d): %s", old.pointer.file, os.getpid(),
            "deleted" if removed else "kept, another worker serves it" if old.path.exists() else "already deleted",
        )


def describe(serving: Serving) -> dict:
    """The JSON of ``GET /api/v1/snapshot`` for ``serving``."""
    pointer = serving.pointer
    return {
        "file": pointer.file,
        "data_version": pointer.data_version,
        "schema_version": pointer.schema_version,
        "bytes": pointer.bytes,
        "sha256": pointer.sha256,
        "published_at": pointer.published_at,
        "download": ENDPOINTS["snapshot_file"].url.replace("{file}", pointer.file),
    }

