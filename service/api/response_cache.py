"""The response cache: built answers by canonical key, dropped when their data changes.

Each distinct response is built once per data version and kept as an
:class:`~qsite.service.api.responses.Entry`. :meth:`ResponseCache.refresh` is where the
cache is invalidated: it polls ``data_versions``
(:class:`~qsite.service.api.data_versions.DataVersions`) and drops just the entries
built from a dataset that changed. An entry built from a snapshot older than
the versions now known is served but never stored.

Memory is bounded by bytes, not by counts alone: every byte the cache keeps
is counted against :data:`MAX_BYTES`, entries (body, header bytes, canonical
key, object overhead) and aliases (the raw path and query string a client
sent, and their overhead) alike, with at most :data:`ALIAS_SHARE` of it in
aliases, so that endless distinct or long query strings cannot grow it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Awaitable, Callable, Hashable

from qsite.service.api.data_versions import FRESH, STALE, DataVersions, Versions
from qsite.service.api.responses import Entry
from qsite.service.http.tally import CACHE_COUNTS, HIT, INVALIDATED, MISS

#: Bounds, so that endless distinct query strings cannot exhaust memory: all the
#: bytes the cache keeps, and how many entries and aliases at most.
MAX_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 2048
MAX_ALIASES = 8192
#: The part of ``MAX_BYTES`` aliases may take; entries get the rest.
ALIAS_SHARE = 0.25
#: Bytes Python spends on one alias besides the path and query bytes (two bytes
#: objects, a tuple and an ordered-dict slot), measured with tracemalloc, rounded up.
ALIAS_OVERHEAD = 256


def alias_size(raw_key: tuple[bytes, bytes]) -> int:
    """Bytes one alias of ``raw_key`` (``(path, query string)``) keeps."""
    path, query = raw_key
    return len(path) + len(query) + ALIAS_OVERHEAD


class ResponseCache:
    """Bounded LRU of :class:`Entry` by canonical key, plus raw-request aliases.

    An *alias* maps the exact ``(path, query string)`` of a request to the entry
    it got, so a repeat is found without parsing or validating parameters.

    :param versions: the ``data_versions`` the entries follow; ``None`` when
        there is no database to follow (only documents are served then).
    :param max_bytes: all the bytes entries and aliases may keep together.
    """

    def __init__(
        self,
        versions: DataVersions | None = None,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        max_aliases: int = MAX_ALIASES,
    ):
        self.versions = versions
        self.entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self.aliases: OrderedDict[Hashable, Entry] = OrderedDict()
        self.max_entries = max_entries
        self.max_aliases = max_aliases
        self.max_alias_bytes = int(max_bytes * ALIAS_SHARE)
        self.max_entry_bytes = max_bytes - self.max_alias_bytes
        #: Bytes kept by entries, and by aliases.
        self.size = 0
        self.alias_bytes = 0
        #: entry key -> the raw keys aliasing it, so dropping an entry drops its
        #: aliases without a walk over all of them (every uncached request evicts one).
        self._aliases_of: dict[Hashable, set] = {}
        self._building: dict[Hashable, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self.entries)

    # -- following the data ------------------------------------------------------

    def standing(self) -> int:
        """The versions' :meth:`~qsite.service.api.data_versions.DataVersions.standing`; :data:`FRESH` when
        the cache follows no versions."""
        return FRESH if self.versions is None else self.versions.standing()

    def fresh(self) -> bool:
        """Whether the versions are recent enough to answer from an entry without asking the database."""
        return self.standing() != STALE

    async def refresh(self, force: bool = False) -> None:
        """Poll ``data_versions`` (when due, or now if ``force``) and drop what changed."""
        if self.versions is not None:
            changed = await self.versions.poll(force)
            if changed:
                self.drop(changed)

    def drop(self, datasets: set[str]) -> None:
        """Forget every entry built from any of ``datasets``."""
        for key in [key for key, entry in self.entries.items() if datasets.intersection(entry.datasets)]:
            self._remove(key)
            CACHE_COUNTS[INVALIDATED] += 1

    async def storable(self, seen: Versions, datasets: tuple[str, ...]) -> bool:
        """Whether a response built from the versions ``seen`` is current (else it is stale already)."""
        if self._current(seen, datasets):
            return True
        await self.refresh(force=True)  # the build may simply have seen a change before the poll did
        return self._current(seen, datasets)

    def _current(self, seen: Versions, datasets: tuple[str, ...]) -> bool:
        current = self.versions.current if self.versions is not None else {}
        return all(seen.get(name) == current.get(name) for name in datasets)

    # -- entries and aliases -----------------------------------------------------

    def get(self, key: Hashable) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def alias(self, raw_key: Hashable) -> Entry | None:
        """The entry a repeat of ``raw_key`` gets (counted a cache hit), else None (the request goes on to :meth:`get_or_build`)."""
        entry = self.aliases.get(raw_key)
        if entry is not None:
            CACHE_COUNTS[HIT] += 1
        return entry

    def add_alias(self, raw_key: tuple[bytes, bytes], entry: Entry) -> None:
        if self.entries.get(entry.key) is not entry:
            return  # not stored (stale or too big): a later request must rebuild
        previous = self.aliases.pop(raw_key, None)
        if previous is not None:
            self._unlink(raw_key, previous.key)
        self.aliases[raw_key] = entry
        self.alias_bytes += alias_size(raw_key)
        self._aliases_of.setdefault(entry.key, set()).add(raw_key)
        while len(self.aliases) > self.max_aliases or self.alias_bytes > self.max_alias_bytes:
            oldest, dropped = self.aliases.popitem(last=False)
            self._unlink(oldest, dropped.key)

    def put(self, entry: Entry) -> None:
        if entry.key in self.entries:
            self._remove(entry.key)
        if entry.size > self.max_entry_bytes // 4:
            return
        self.entries[entry.key] = entry
        self.size += entry.size
        while len(self.entries) > self.max_entries or self.size > self.max_entry_bytes:
            self._remove(next(iter(self.entries)))

    def _remove(self, key: Hashable) -> None:
        """Forget the entry ``key`` and every alias of it."""
        self.size -= self.entries.pop(key).size
        for raw_key in self._aliases_of.pop(key, ()):
            del self.aliases[raw_key]
            self.alias_bytes -= alias_size(raw_key)

    def _unlink(self, raw_key: tuple[bytes, bytes], key: Hashable) -> None:
        """``raw_key`` has left :attr:`aliases`: its bytes and its link to the entry ``key`` go."""
        self.alias_bytes -= alias_size(raw_key)
        aliases = self._aliases_of.get(key)
        if aliases is not None:
            aliases.discard(raw_key)
            if not aliases:
                del self._aliases_of[key]

    async def get_or_build(self, key: Hashable, build: Callable[[], Awaitable[tuple[Entry, Versions]]]) -> Entry:
        """The entry for ``key``, building it once however many requests ask at once.

        ``build`` returns the entry and the ``data_versions`` it was built
        from; it is stored only if those are still :meth:`storable`.
        """
        entry = self.get(key)
        if entry is not None:
            CACHE_COUNTS[HIT] += 1
            return entry
        CACHE_COUNTS[MISS] += 1
        pending = self._building.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future = asyncio.get_running_loop().create_future()
        self._building[key] = future
        try:
            entry, seen = await build()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody logs it twice
            raise
        else:
            if await self.storable(seen, entry.datasets):
                self.put(entry)
            future.set_result(entry)
            return entry
        finally:
            del self._building[key]
