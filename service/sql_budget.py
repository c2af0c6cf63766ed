"""Arbitrary SQL through Datasette: one query at a time per client, within a time limit.

Datasette runs whatever SQL a researcher sends (``?sql=``, and ``?_where=``
on table pages) on its pool of ``num_sql_threads`` threads (3 by default),
each query stopped after ``sql_time_limit_ms``. Left alone, one client
sending a few heavy queries at once holds every thread of that pool, and
everyone else's queries wait. :class:`SqlBudget` lets each client (the
address the fair-use limit counts against, :func:`service.ratelimit.client_address`)
have one such request running at a time: another one from the same client
while it runs is answered 429 at once, with ``Retry-After``. The time limit
comes from the config (``api.sql_time_limit_ms``).

The /api/v1 routes never use that pool (:mod:`service.reader`), so nothing
here can slow them.
"""

from __future__ import annotations

import math
from urllib.parse import unquote_to_bytes

from .problems import problem_response, send_response
from .ratelimit import client_address

#: Query-string parameters with which Datasette runs SQL text the client wrote.
SQL_PARAMETERS = frozenset({b"sql", b"_where"})


def runs_arbitrary_sql(query: bytes) -> bool:
    """Whether a query string carries SQL text for Datasette to run (``sql`` or ``_where``)."""
    if b"sql" not in query and b"where" not in query and b"%" not in query:
        return False
    for part in query.split(b"&"):
        name = part.partition(b"=")[0]
        if unquote_to_bytes(name.replace(b"+", b" ")) in SQL_PARAMETERS:
            return True
    return False


class SqlBudget:
    """The clients with an arbitrary-SQL request running now.

    :param time_limit_ms: Datasette's ``sql_time_limit_ms``; a refused client is
        told to retry after that long.
    :param trusted_proxies: ``api.trusted_proxies``, to tell clients apart as the rate limit does.
    """

    def __init__(self, time_limit_ms: int, trusted_proxies: int):
        self.retry_after = max(1, math.ceil(time_limit_ms / 1000))
        self.trusted_proxies = trusted_proxies
        self.running: set[str] = set()

    async def __call__(self, app, scope, receive, send) -> None:
        """Run ``app`` for this request unless its client already has a query running."""
        client = client_address(scope, self.trusted_proxies)
        if client in self.running:
            status, headers, body = problem_response(
                "query-running",
                "one SQL query at a time per client: your previous query is still running; "
                "retry when it has finished",
                headers=[(b"retry-after", str(self.retry_after).encode())],
            )
            await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
            return
        self.running.add(client)
        try:
            await app(scope, receive, send)
        finally:
            self.running.discard(client)
