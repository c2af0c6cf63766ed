"""This worker's counts for ``/metrics``, kept in plain Python where things happen.

A request adds one tuple to :attr:`Tally.answers`, a cache hit or an interrupted query one to a
count in :attr:`Tally.events` (well under a microsecond each, on the worker's event loop), never
to prometheus-client's shared files directly (a few microseconds a write, a tenth of a cached
request). Sorting the answers into endpoints, statuses and latency buckets waits too: the
request path is where code runs coldest (granian's threads and the kernel share the core between
two requests), so it does the least there and the rest once a second, many at a time
(:meth:`Tally.take`). :mod:`qsite.service.metrics` takes the tally every second and before
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

#: Statuses that refuse a request for its size: target (414), header fields (431), body (413).
SIZE_STATUSES = frozenset({413, 414, 431})

#: One answered request as the request path records it: path, query, method, status and seconds.
Answer = tuple[bytes, bytes, str, int, float]


class Tally:
    """Counts since the last :meth:`take`: :attr:`answers` (one :data:`Answer` per request) and
    :attr:`events` (``(event, label)`` to a count)."""

    __slots__ = ("answers", "events")

    def __init__(self):
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
        requests: dict[tuple[str, str, int], list] = {}
        known: dict[bytes, str] = {}  # endpoint per path, asked once a take (but a page's: its query may be SQL)
        for path, query, method, status, seconds in answers:
            label = known.get(path)
            if label is None or label == "datasette":
                label = endpoint(path, query)
                if label != "datasette_sql":
                    known[path] = label
            key = label, method, status
            counts = requests.get(key)
            if counts is None:
                counts = requests[key] = [0] * (len(BUCKETS) + 1) + [0.0]
            counts[bisect_left(BUCKETS, seconds)] += 1
            counts[-1] += seconds
            if status == 304:
                events["not_modified", ""] += 1
            elif status in SIZE_STATUSES:
                events["refused", "size"] += 1
        return requests, events


#: The worker's tally while metrics are on, else None (set by :mod:`qsite.service.metrics`).
TALLY: Tally | None = None


def count(event: str, label: str = "") -> None:
    """Count one ``event`` (a key of :data:`EVENTS`) with ``label``; nothing while metrics are off."""
    if TALLY is not None:
        events = TALLY.events
        key = event, label
        events[key] = events.get(key, 0) + 1
