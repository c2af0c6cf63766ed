"""Built responses, kept as bytes, and the cheap check that tells when they go stale.

Each distinct response is built once per data version: the JSON is serialised
once, its ETag computed once, and its header lists prepared once, so a repeat
costs a dictionary lookup and two ASGI messages. The pipeline bumps
``data_versions`` in the same transaction as every change; :class:`DataVersions`
reads that small table at most once per interval on a dedicated read-only
connection, and a change drops just the responses built from that dataset.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from collections import OrderedDict
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Awaitable, Callable, Hashable

from .problems import CORS_HEADERS, JSON_CONTENT_TYPE

#: How often (seconds) a process looks at ``data_versions``; well inside the 2 s promise.
CHECK_INTERVAL = 0.5

#: Bounds, so that endless distinct query strings cannot exhaust memory.
MAX_ENTRIES = 2048
MAX_BYTES = 32 * 1024 * 1024
MAX_ALIASES = 8192

#: Datasette's router adds this to every response it routes; the fast path
#: sends it too so that both paths answer byte for byte the same.
VARY = (b"vary", b"Cookie, Authorization")

VERSIONS_SQL = "select dataset, version, changed_at from data_versions"

#: ``{dataset: (version, changed_at)}``
Versions = dict[str, tuple[int, str]]


def read_versions(conn: sqlite3.Connection) -> Versions:
    """The ``data_versions`` table; empty when it does not exist yet."""
    try:
        rows = conn.execute(VERSIONS_SQL).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    return {dataset: (version, changed_at) for dataset, version, changed_at in rows}


def http_date(rfc3339: str) -> str:
    """``2026-11-20T08:00:00Z`` as an HTTP date (``Fri, 20 Nov 2026 08:00:00 GMT``)."""
    moment = datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return format_datetime(moment, usegmt=True)


def etag_for(body: bytes) -> str:
    """A strong ETag from the bytes themselves, so it is the same in every process."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison of an ``If-None-Match`` list against ``etag``."""
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in if_none_match.split(","))


def not_modified_since(if_modified_since: str, last_modified: datetime | None) -> bool:
    if last_modified is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError):
        return False  # an unparseable date is ignored (RFC 9110 13.1.3)
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    return last_modified <= since


class Entry:
    """One built 200 response: its body, ETag and prepared header lists.

    :param datasets: the datasets it was built from; a change to any drops it.
    :param updated_at: RFC 3339 time of the data behind it, sent as Last-Modified;
        ``None`` for documents with no data behind them.
    :param extra_headers: more header pairs for the 200 (e.g. ``link``).
    """

    __slots__ = ("key", "body", "etag", "datasets", "last_modified", "headers", "not_modified_headers", "size")

    def __init__(
        self,
        key: Hashable,
        body: bytes,
        datasets: tuple[str, ...],
        updated_at: str | None,
        max_age: int,
        extra_headers: tuple = (),
    ):
        self.key = key
        self.body = body
        self.datasets = datasets
        self.etag = etag_for(body)
        cache_control = (b"cache-control", f"public, max-age={max_age}".encode())
        etag = (b"etag", self.etag.encode())
        self.headers = [
            (b"content-type", JSON_CONTENT_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            cache_control,
            etag,
            *CORS_HEADERS,
            VARY,
            *extra_headers,
        ]
        self.last_modified = None
        if updated_at:
            self.headers.append((b"last-modified", http_date(updated_at).encode()))
            self.last_modified = datetime.strptime(updated_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        # RFC 9110 15.4.5: a 304 carries the validators and caching headers, no body.
        self.not_modified_headers = [cache_control, etag, *CORS_HEADERS, VARY]
        self.size = len(body) + 512

    def answer(self, if_none_match: str | None, if_modified_since: str | None):
        """``(status, headers, body)`` for a GET of this entry with those conditions."""
        if if_none_match is not None:
            if etag_matches(if_none_match, self.etag):
                return 304, self.not_modified_headers, b""
        elif if_modified_since is not None and not_modified_since(if_modified_since, self.last_modified):
            return 304, self.not_modified_headers, b""
        return 200, self.headers, self.body


class ResponseCache:
    """Bounded LRU of :class:`Entry` by canonical key, plus raw-request aliases.

    An *alias* maps the exact ``(path, query string)`` of a request to the entry
    it got, so a repeat is found without parsing or validating parameters.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES, max_aliases: int = MAX_ALIASES):
        self.entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self.aliases: OrderedDict[Hashable, Entry] = OrderedDict()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_aliases = max_aliases
        self.size = 0
        self._building: dict[Hashable, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: Hashable) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def alias(self, raw_key: Hashable) -> Entry | None:
        return self.aliases.get(raw_key)

    def add_alias(self, raw_key: Hashable, entry: Entry) -> None:
        if self.entries.get(entry.key) is not entry:
            return  # not stored (stale or too big): a later request must rebuild
        self.aliases[raw_key] = entry
        self.aliases.move_to_end(raw_key)
        while len(self.aliases) > self.max_aliases:
            self.aliases.popitem(last=False)

    def put(self, entry: Entry) -> None:
        old = self.entries.pop(entry.key, None)
        if old is not None:
            self.size -= old.size
        if entry.size > self.max_bytes // 4:
            if old is not None:
                self._prune_aliases()
            return
        self.entries[entry.key] = entry
        self.size += entry.size
        evicted = old is not None
        while len(self.entries) > self.max_entries or self.size > self.max_bytes:
            _, dropped = self.entries.popitem(last=False)
            self.size -= dropped.size
            evicted = True
        if evicted:
            self._prune_aliases()

    def drop(self, datasets: set[str]) -> None:
        """Forget every entry built from any of ``datasets``."""
        for key in [key for key, entry in self.entries.items() if datasets.intersection(entry.datasets)]:
            self.size -= self.entries.pop(key).size
        self._prune_aliases()

    def _prune_aliases(self) -> None:
        entries = self.entries
        for raw_key in [k for k, entry in self.aliases.items() if entries.get(entry.key) is not entry]:
            del self.aliases[raw_key]

    async def get_or_build(self, key: Hashable, build: Callable[[], Awaitable[tuple[Entry, bool]]]) -> Entry:
        """The entry for ``key``, building it once however many requests ask at once.

        ``build`` returns ``(entry, storable)``; an entry built from a snapshot
        older than the versions now known is served but not stored.
        """
        entry = self.get(key)
        if entry is not None:
            return entry
        pending = self._building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future = asyncio.get_running_loop().create_future()
        self._building[key] = future
        try:
            entry, storable = await build()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it twice
            raise
        else:
            if storable:
                self.put(entry)
            future.set_result(entry)
            return entry
        finally:
            del self._building[key]


class DataVersions:
    """The current ``data_versions``, re-read at most every ``interval`` seconds.

    Reads go through a dedicated read-only connection; in WAL mode they never
    wait for the pipeline's writes, and the table has four rows.
    """

    def __init__(self, path: str, interval: float = CHECK_INTERVAL):
        self.path = path
        self.interval = interval
        self.current: Versions = {}
        self._conn: sqlite3.Connection | None = None
        self._next = 0.0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(
                f"{Path(self.path).resolve().as_uri()}?mode=ro",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                timeout=1,
            )
        return self._conn

    def poll(self, force: bool = False) -> set[str]:
        """Re-read if the interval passed; return the datasets that changed since last time."""
        now = time.monotonic()
        if not force and now < self._next:
            return set()
        self._next = now + self.interval
        try:
            fresh = read_versions(self._connect())
        except sqlite3.Error:
            self.close()  # the file may have been replaced; reconnect next time
            return set()
        return self.update(fresh)

    def update(self, fresh: Versions) -> set[str]:
        changed = {name for name in fresh.keys() | self.current.keys() if fresh.get(name) != self.current.get(name)}
        self.current = fresh
        return changed

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
