"""The snapshot store: a folder or an S3-compatible bucket, through obstore.

The writer (:mod:`qsite.pipeline.ops.publish`) and the replicas (:mod:`qsite.service.replica.follow`)
both talk to the store configured under ``snapshots:``; this is the one place
that turns that config into an obstore client and obstore's errors into one
line a log can carry. Request signing, retries and multipart uploads are
obstore's (the Rust ``object_store`` crate); credentials come from the
standard ``AWS_*`` variables.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import LocalStore, from_url

from qsite.db.snapshot import POINTER, Pointer, SnapshotError, name_version


#: A store that does not answer must not hold a replica's poll (or a publish) for minutes.
CONNECT_TIMEOUT = timedelta(seconds=5)
REQUEST_TIMEOUT = timedelta(minutes=10)
RETRIES = {"max_retries": 2, "retry_timeout": timedelta(seconds=15)}
#: Bytes per chunk of a streamed download.
CHUNK = 1024 * 1024


class StoreUnavailable(Exception):
    """The store could not be read or written (down, refused the credentials, ...); one line."""


def brief(exc: BaseException) -> str:
    """obstore's message without its multi-line debug dump, cut to one readable line."""
    text = str(exc).split("\n", 1)[0].strip() or type(exc).__name__
    text = text.split(": <?xml", 1)[0]
    return text if len(text) <= 300 else text[:300] + "…"


#: Beside ``latest.json`` in a folder store: held (``flock``) while a pointer is compared and swapped.
POINTER_LOCK = ".latest.json.lock"


@dataclass(frozen=True)
class PointerState:
    """``latest.json`` as read, with what a conditional write compares: its bytes and its ETag (None: no pointer)."""

    pointer: Pointer | None
    raw: bytes | None
    e_tag: str | None
    #: Why the bytes read are no valid pointer (only with ``read_state(lenient=True)``).
    problem: str | None = None


class _Lost(Exception):
    """A conditional write found the pointer changed."""


def _conditional_put(store, data: bytes, mode) -> None:
    try:
        obstore.put(store, POINTER, data, mode=mode)
    except (PreconditionError, AlreadyExistsError):
        raise _Lost() from None


class SnapshotStore:
    """The store at ``url`` (``config.snapshot_store``), with the few operations snapshots need.

    :param endpoint_url: an S3-compatible server's address (``snapshots.endpoint_url``), for S3 URLs.
    """

    def __init__(self, url: str, endpoint_url: str | None = None):
        self.url = url
        self.endpoint_url = endpoint_url
        self.where = str(Path(urlsplit(url).path)) if url.startswith("file://") else url
        # Made at the first request, not here: a folder that cannot be created (a read-only
        # disk) is then one StoreUnavailable line like any other store failure, and a
        # replica tries again at its next poll.
        self._store = None

    def _client(self):
        if self._store is None:
            if self.url.startswith("file://"):
                self._store = LocalStore(self.where, mkdir=True)
            else:
                options = {"connect_timeout": CONNECT_TIMEOUT, "timeout": REQUEST_TIMEOUT}
                extra = {}
                if self.endpoint_url:
                    extra["endpoint"] = self.endpoint_url
                    options["allow_http"] = self.endpoint_url.startswith("http://")
                self._store = from_url(self.url, client_options=options, retry_config=RETRIES, **extra)
        return self._store

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            return fn(self._client(), *args, **kwargs)
        except (FileNotFoundError, _Lost):
            raise
        except Exception as exc:  # obstore raises its own error classes and OSErrors
            raise StoreUnavailable(f"snapshot store {self.where}: cannot {what}: {brief(exc)}") from None

    def read_pointer(self) -> Pointer | None:
        """The current ``latest.json``, or None when nothing was ever published.

        :raises StoreUnavailable: the store cannot be read.
        :raises qsite.db.snapshot.SnapshotError: the pointer is not valid.
        """
        try:
            result = self._call(f"read {POINTER}", obstore.get, POINTER)
            raw = bytes(self._call(f"read {POINTER}", lambda _store: result.bytes()))
        except FileNotFoundError:
            return None
        return Pointer.from_json(raw)

    def read_state(self, lenient: bool = False) -> PointerState:
        """The current ``latest.json`` and what :meth:`swap_pointer` compares against it.

        :param lenient: an invalid pointer reads as no pointer, with its ``problem`` (so a publish can replace it).
        :raises StoreUnavailable: the store cannot be read.
        :raises qsite.db.snapshot.SnapshotError: the pointer is not valid (unless ``lenient``).
        """
        try:
            result = self._call(f"read {POINTER}", obstore.get, POINTER)
            raw = bytes(self._call(f"read {POINTER}", lambda _store: result.bytes()))
        except FileNotFoundError:
            return PointerState(None, None, None)
        e_tag = result.meta.get("e_tag")
        try:
            return PointerState(Pointer.from_json(raw), raw, e_tag)
        except SnapshotError as exc:
            if not lenient:
                raise
            return PointerState(None, raw, e_tag, str(exc))

    def swap_pointer(self, pointer: Pointer, expected: PointerState) -> bool:
        """Write ``pointer`` as ``latest.json`` only if the store's is still ``expected``: a compare-and-swap.

        False, writing nothing, when another writer changed it since ``expected``
        was read. On S3 a conditional PUT (``If-Match`` the ETag read, or
        ``If-None-Match: *`` when there was none); on a folder, under an exclusive
        ``flock`` of :data:`POINTER_LOCK`, a compare of the bytes, then obstore's
        write to a temporary file renamed over the pointer.

        :raises StoreUnavailable: the store cannot be read or written.
        """
        if self.url.startswith("file://"):
            return self._swap_in_folder(pointer, expected)
        mode = {"e_tag": expected.e_tag} if expected.raw is not None else "create"
        try:
            self._call(f"write {POINTER}", _conditional_put, pointer.to_json(), mode)
        except _Lost:
            return False
        return True

    def _swap_in_folder(self, pointer: Pointer, expected: PointerState) -> bool:
        self._client()  # makes the folder
        lock = os.open(Path(self.where) / POINTER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed, or when this process dies
            try:
                now = (Path(self.where) / POINTER).read_bytes()
            except FileNotFoundError:
                now = None
            except OSError as exc:
                raise StoreUnavailable(f"snapshot store {self.where}: cannot read {POINTER}: {exc}") from None
            if now != expected.raw:
                return False
            self._call(f"write {POINTER}", obstore.put, POINTER, pointer.to_json())
            return True
        finally:
            os.close(lock)

    def write_pointer(self, pointer: Pointer) -> None:
        """Write ``latest.json`` unconditionally (tests and tools; publishing uses :meth:`swap_pointer`)."""
        self._call(f"write {POINTER}", obstore.put, POINTER, pointer.to_json())

    def upload(self, name: str, path: Path) -> None:
        self._call(f"upload {name}", obstore.put, name, path)

    def snapshots(self) -> list[str]:
        """Names of the published snapshots in the store's root, newest data version first."""
        found = []
        for batch in self._call("list snapshots", obstore.list, None):
            for meta in batch:
                name = meta["path"].rsplit("/", 1)[-1]
                if name_version(name) is not None and "/" not in meta["path"]:
                    found.append(name)
        return sorted(found, key=lambda name: (name_version(name), name), reverse=True)

    def delete(self, name: str) -> None:
        self._call(f"delete {name}", obstore.delete, name)

    def stream(self, name: str) -> Iterator[bytes]:
        """The bytes of ``name``, a chunk at a time.

        :raises FileNotFoundError: no such object.
        :raises StoreUnavailable: the store failed before or during the download.
        """
        result = self._call(f"download {name}", obstore.get, name)
        chunks = iter(result.stream(min_chunk_size=CHUNK))
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except Exception as exc:
                raise StoreUnavailable(f"snapshot store {self.where}: download of {name} failed: {brief(exc)}") from None
            yield bytes(chunk)
