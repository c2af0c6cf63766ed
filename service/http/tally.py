"""This worker's counts for ``/metrics``, kept in plain Python where things happen.

A request adds one tuple to :attr:`Tally.answers`, a response-cache lookup one to an item of
:data:`CACHE_COUNTS`, a refusal or an interrupted query one to a count in :attr:`Tally.events`
(a fraction of a microsecond each, on the worker's event loop), never
to prometheus-client's shared files directly (a few microseconds a write, a tenth of a cached
request). Sorting the answers into endpoints, statuses and latency buckets waits too: the
request path is where code runs coldest (granian's threads and the kernel share the core between
two requests), so it does the least there and the rest ten times a second, many at a time
(:meth:`Tally.take`). :mod:`qsite.service.metrics` takes the tally every tenth of a second and before
every scrape and adds it to those files, so that ``/metrics`` answers the sum over every worker.

While metrics are off (``metrics.enabled: false``, or anything that is not ``qsite serve``,
such as the tests' in-process Datasette), :data:`TALLY` is None and :func:`count` returns at once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Callable

#: Upper bounds (seconds) of the request latency histogram: the cached path answers in tens of
#: microseconds, an uncached page in milliseconds, a slow query up to the SQL time limit.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

FIRST_BOUND = BUCKETS[0]

#: The events :func:`count` takes, each with the label it is counted under (``""``: none).
EVENTS = {
    "cache": "result",  # hit, miss
    "cache_invalidations": "",
    "not_modified": "",
    "rate_limited": "limit",  # fair_use, sql_budget
    "refused": "reason",  # size, time
    "sql_interrupted": "where",  # api, sql
    "failed_swaps": "",
}

#: The response cache's lookups that found a built response, that built one, and the responses it
#: dropped because their data changed: counted whether metrics are on or not (an item of a list,
#: the cheapest count there is, for the hottest event of all), and moved with the tally.
CACHE_COUNTS = [0, 0, 0]
HIT, MISS, INVALIDATED = range(3)
_CACHE_EVENTS = (("cache", "hit"), ("cache", "miss"), ("cache_invalidations", ""))

#: Statuses that refuse a request for its size: target (414), header fields (431), body (413).
SIZE_STATUSES = frozenset({413, 414, 431})

#: One answered request as the request path records it: path, query, method, status and seconds.
Answer = tuple[bytes, bytes, str, int, float]


class Tally:
    """Counts since the last :meth:`take`: :attr:`answers` (one :data:`Answer` per request) and
    :attr:`events` (``(event, label)`` to a count)."""

    __slots__ = ("answers", "events", "cache_seen")

    def __init__(self):
        self.cache_seen = list(CACHE_COUNTS)  # what the cache had counted at the last take
        self.answers: list[Answer] = []  # the same list for the worker's life: the request path keeps its append
        self.events: dict[tuple[str, str], int] = {}  # a plain dict: Counter's ``+=`` costs three times as much

    def take(self, endpoint: Callable[[bytes, bytes], str]) -> tuple[dict, Counter]:
        """What was counted since the last call, which starts a new count.

        Returns ``requests``, mapping ``(endpoint, method, status)`` to a list of per-bucket counts
        of their latency (:data:`BUCKETS` and one past them; their sum is the number of requests)
        followed by the sum of their seconds, and the events, with each answer's 304 or size
        refusal added (a 429 is counted by the limit that answers it); ``endpoint(path, query)`` names an answer's endpoint.
        """
        answers, events = self.answers.copy(), self.events
        self.answers.clear()
        self.events = {}
        events = Counter(events)
        for i, event in enumerate(_CACHE_EVENTS):
            now = CACHE_COUNTS[i]
            if now != self.cache_seen[i]:
                events[event] += now - self.cache_seen[i]
                self.cache_seen[i] = now
        names: dict[bytes, str] = {}  # this take's endpoint of each path answered without a query
        requests: dict[tuple[str, str, int], list] = {}
        for path, query, method, status, seconds in answers:
            # Named by path first, then counted by name: a walk over distinct items (a path each)
            # makes one small key a request rather than a count list of its own to merge later.
            if query:
                name = endpoint(path, query)
            else:
                name = names.get(path)
                if name is None:
                    name = names[path] = endpoint(path, query)
            key = name, method, status
            counts = requests.get(key)
            if counts is None:
                counts = requests[key] = [0] * (len(BUCKETS) + 1) + [0.0]
            counts[0 if seconds <= FIRST_BOUND else bisect_left(BUCKETS, seconds)] += 1  # most answer inside the first
            counts[-1] += seconds
        for (_name, _method, status), counts in requests.items():
            if status == 304 or status in SIZE_STATUSES:
                events["not_modified" if status == 304 else "refused", "" if status == 304 else "size"] += sum(counts[:-1])
        return requests, events


#: The worker's tally while metrics are on, else None (set by :mod:`qsite.service.metrics`).
TALLY: Tally | None = None


def count(event: str, label: str = "") -> None:
    """Count one ``event`` (a key of :data:`EVENTS`) with ``label``; nothing while metrics are off."""
    if TALLY is not None:
        events = TALLY.events
        key = event, label
        events[key] = events.get(key, 0) + 1
