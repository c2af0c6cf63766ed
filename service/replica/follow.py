"""``qsite serve --follow``: a replica that serves the snapshots the writer publishes.

It needs nothing but the store (``snapshots:`` in the config). A background
thread reads ``latest.json`` every ``snapshots.poll``; a snapshot it does not
have yet is downloaded into the data folder under a temporary name, checked
(size, SHA-256, ``PRAGMA integrity_check``, schema version:
:func:`db.snapshot.verify_download`) and only then renamed to its own
immutable name and swapped in on the event loop:

- the Datasette database of that name is replaced by one over the new file, in
  one step on the event loop, so a request sees the old file or the new one;
  requests in flight keep the Datasette database (and its connections)
  they started with and finish on the old file;
- the plugin's :class:`~service.datasette.handler.Api`, and with it the response cache, is
  dropped: the next request builds one over the new file. ETags come from the
  response bytes and Last-Modified from the data's own ``data_versions``, so
  the same snapshot gives the same validators on every replica;
- :data:`GRACE` seconds (or two polls) after the swap-out, the old file's
  connections are closed and the file deleted, unless another worker still
  serves it.

Several workers (``qsite serve --workers N --follow``) share one data folder.
Each follows on its own, so each keeps serving if the others die, and resumes
on its own after a restart; what they share is the files, and two locks on
them (``flock``: the kernel drops a dead process's locks, so nothing is ever
left claimed or half-done):

- a worker holds a shared lock on the file it serves (a :class:`Claim`), taken
  before it checks the file and kept until that file's connections are closed;
  a file is deleted only by a worker that gets an exclusive lock on it without
  waiting (:func:`remove_unclaimed`), that is, when no worker serves it;
- downloads take turns on :data:`DOWNLOAD_LOCK`: the first worker to see a new
  snapshot downloads it, the others wait, then find it here and check it.

One follower per host handing the file to its workers would download once
too, but it would need a process of its own or messages between the workers,
and a dead follower would stop every worker's updates; the locks need neither.

A replica never swaps to a lower pointer (:attr:`db.snapshot.Pointer.order`); only a
rollback (a higher epoch) takes it back. It keeps the newest pointer for the writer's
heartbeat (:attr:`Follower.latest`), which /api/v1/health reads.

Anything that does not check out is never served: the replica keeps what it
has and logs one line (once per distinct problem). Until the first snapshot is
in, every request gets 503 with ``Retry-After``. After a restart, a replica
that cannot reach the store serves the last snapshot it had checked
(``current.json`` in the data folder), once it checks out again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path


from config import Config
from db.snapshot_store import SnapshotStore, StoreUnavailable
from db.snapshot import NAME_PATTERN, Pointer, SnapshotError, verify_download

from service.api.endpoints import ENDPOINTS
from service.compat import replace_database, snapshot_database
from service.api.health import health_response
from service.api.routing import resolve
from service.http.problems import send_problem, send_response
from service.http.tally import count
from service.replica.claims import Claim, alive, remove_unclaimed

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
#: The data folder's record of the snapshot being served (a copy of its pointer).
CURRENT = "current.json"
#: In the data folder: held (exclusively) by the worker downloading or checking a snapshot.
DOWNLOAD_LOCK = ".download.lock"




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
                    return await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
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
        for pattern in (".*.part", f".{CURRENT}.*.tmp"):
            for part in self.data_dir.glob(pattern):
                pid = part.name.rsplit(".", 2)[-2]
                if not (pid.isdigit() and alive(int(pid))):
                    part.unlink(missing_ok=True)  # a download (or a record) a killed process left behind
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
            path, claim, timings = self.fetch(pointer)
        except (StoreUnavailable, SnapshotError, OSError) as exc:
            count("failed_swaps")
            self.problem(f"snapshot {pointer.file} not served: {exc}")
            return False
        self._swap_on_loop(pointer, path, claim, timings)
        return True

    def fetch(self, pointer: Pointer) -> tuple[Path, Claim, dict]:
        """A checked local copy of ``pointer``'s snapshot, claimed, downloading it unless one is already here.

        Downloads take turns (:data:`DOWNLOAD_LOCK`), so the workers of a host
        download each snapshot once; a copy already here is claimed under that
        lock and checked after it, so the workers check side by side.
        """
        path = self.data_dir / pointer.file
        for _ in range(2):  # a copy here that does not check out is removed, and fetched again once
            with open(self.data_dir / DOWNLOAD_LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
                started = time.monotonic()
                try:
                    claim = Claim.take(path)
                except FileNotFoundError:
                    return self._download(pointer, path, started)
            try:
                verify_download(path, pointer)
                return path, claim, {"download": 0.0, "check": time.monotonic() - started}
            except SnapshotError:
                claim.release()
                if not remove_unclaimed(path):  # damaged, and another worker serves it: leave it
                    raise
        raise SnapshotError(f"{pointer.file}: the copy in {self.data_dir} does not check out")

    def _download(self, pointer: Pointer, path: Path, started: float) -> tuple[Path, Claim, dict]:
        part = self.data_dir / f".{pointer.file}.{os.getpid()}.part"
        try:
            try:
                with open(part, "wb") as out:
                    for chunk in self.store.stream(pointer.file):
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

    def _resume(self) -> bool:
        """With no snapshot served and no word from the store: serve the last one this folder had, if it checks out."""
        try:
            pointer = Pointer.from_json((self.data_dir / CURRENT).read_bytes())
            path = self.data_dir / pointer.file
            claim = Claim.take(path)
        except (OSError, SnapshotError):
            return False
        try:
            verify_download(path, pointer)
        except SnapshotError:
            claim.release()
            return False
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
            # Each worker writes its own temporary copy: they may swap at the same moment.
            temporary = self.data_dir / f".{CURRENT}.{os.getpid()}.tmp"
            temporary.write_bytes(pointer.to_json())
            os.replace(temporary, self.data_dir / CURRENT)
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

