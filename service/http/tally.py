"""This worker's counts for ``/metrics``, kept in plain Python where things happen.

A request, a cache hit or an interrupted query adds to :data:`TALLY` (dictionaries of ints on the
worker's event loop: well under a microsecond), never to prometheus-client's shared files
directly (a few microseconds a write, a tenth of a cached request). :mod:`qsite.service.metrics`
moves the tally into those files every second and before every scrape
(:meth:`Tally.take`), so that ``/metrics`` answers the sum over every worker.

While metrics are off (``metrics.enabled: false``, or anything that is not ``qsite serve``,
such as the tests' in-process Datasette), :data:`TALLY` is None and :func:`count` returns at once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

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


class Tally:
    """Counts since the last :meth:`take`.

    ``requests`` maps ``(endpoint, method, status)`` to a list of per-bucket counts of their
    latency (:data:`BUCKETS` and one past them; their sum is the number of requests) followed by
    the sum of their seconds; ``events`` maps ``(event, label)`` to a count.
    """

    __slots__ = ("requests", "events")

    def __init__(self):
        self.requests: dict[tuple[str, str, int], list] = {}
        self.events: Counter = Counter()

    def request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        counts = self.requests.get((endpoint, method, status))
        if counts is None:
            counts = self.requests[endpoint, method, status] = [0] * (len(BUCKETS) + 1) + [0.0]
        counts[bisect_left(BUCKETS, seconds)] += 1
        counts[-1] += seconds

    def take(self) -> tuple[dict, Counter]:
        """What was counted since the last call, which starts a new count."""
        taken = self.requests, self.events
        self.requests, self.events = {}, Counter()
        return taken


#: The worker's tally while metrics are on, else None (set by :mod:`qsite.service.metrics`).
TALLY: Tally | None = None


def count(event: str, label: str = "") -> None:
    """Count one ``event`` (a key of :data:`EVENTS`) with ``label``; nothing while metrics are off."""
    if TALLY is not None:
        TALLY.events[event, label] += 1
