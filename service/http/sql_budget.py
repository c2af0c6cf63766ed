"""Arbitrary SQL through Datasette: one query at a time per client, within a time limit.

Datasette runs whatever SQL a researcher sends (``?sql=``, and ``?_where=``
on table pages) on its pool of ``num_sql_threads`` threads (3 by default),
each query stopped after ``sql_time_limit_ms``. Left alone, one client
sending a few heavy queries at once holds every thread of that pool, and
everyone else's queries wait. :class:`SqlBudget` runs each client's (the
address the fair-use limit counts against, :func:`qsite.service.http.ratelimit.client_address`)
such requests one at a time: the next waits for the one running, so a
dashboard fetching six charts at once gets them one after another, and at
most :data:`MAX_WAITING` may wait; one more is answered 429 at once, with
``Retry-After``. The time limit comes from the config (``api.sql_time_limit_ms``).

Its answers are the client's own (:func:`private`): no shared cache keeps
them, so one client's queries never fill a cache in front and evict what
everyone reads (a browser may still keep them for Datasette's ``max-age``).

The /api/v1 routes never use that pool (:mod:`qsite.service.api.reader`), so nothing
here can slow them.
"""

from __future__ import annotations

import asyncio
import math
from urllib.parse import unquote_to_bytes

from qsite.service.http.problems import problem_response, send_response
from qsite.service.http.tally import count
from qsite.service.http.ratelimit import DEFAULT_IPV6_PREFIX, client_address

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


def private(send):
    """``send`` marking every answer ``private`` for caches: a shared cache never keeps it (RFC 9111 5.2.2.7).

    Errors (4xx, 5xx) are left as they come: the plugin makes them ``no-store``.
    """

    async def send_private(message):
        if message["type"] == "http.response.start" and message["status"] < 400:
            headers = [(name, value) for name, value in message.get("headers", []) if name.lower() != b"cache-control"]
            kept = next((value for name, value in message.get("headers", []) if name.lower() == b"cache-control"), b"")
            if b"no-store" in kept.lower():
                headers.append((b"cache-control", kept))
            else:
                directives = [d.strip() for d in kept.split(b",") if d.strip() and d.strip().lower() not in (b"public", b"private")]
                directives = [d for d in directives if not d.lower().startswith(b"s-maxage")]
                headers.append((b"cache-control", b", ".join([b"private", *directives])))
            message = {**message, "headers": headers}
        await send(message)

    return send_private


#: Requests of one client that may wait while its query runs; one more is refused.
MAX_WAITING = 8


class _Turns:
    """One client's arbitrary-SQL requests: the one running holds ``lock``; ``count`` is it plus those waiting."""

    __slots__ = ("lock", "count")

    def __init__(self):
        self.lock = asyncio.Lock()
        self.count = 0


class SqlBudget:
    """The clients with arbitrary-SQL requests running or waiting now.

    :param time_limit_ms: Datasette's ``sql_time_limit_ms``; a refused client is
        told to retry after that long.
    :param trusted_proxies: ``api.trusted_proxies``, to tell clients apart as the rate limit does.
    :param ipv6_prefix: ``api.ipv6_prefix``: an IPv6 client is its network of that many bits, as for the rate limit.
    """

    def __init__(self, time_limit_ms: int, trusted_proxies: int, ipv6_prefix: int = DEFAULT_IPV6_PREFIX):
        self.retry_after = max(1, math.ceil(time_limit_ms / 1000))
        self.trusted_proxies = trusted_proxies
        self.ipv6_prefix = ipv6_prefix
        self.clients: dict[str, _Turns] = {}

    async def __call__(self, app, scope, receive, send) -> None:
        """Run ``app`` for this request when its client's previous query has finished; refuse past the queue."""
        client = client_address(scope, self.trusted_proxies, self.ipv6_prefix)
        turns = self.clients.get(client)
        if turns is None:
            turns = self.clients[client] = _Turns()
        if turns.count > MAX_WAITING:
            status, headers, body = problem_response(
                "query-running",
                f"one SQL query at a time per client, and at most {MAX_WAITING} waiting: "
                "retry when your earlier queries have finished",
                headers=[(b"retry-after", str(self.retry_after).encode())],
            )
            count("rate_limited", "sql_budget")
            await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
            return
        turns.count += 1
        try:
            async with turns.lock:
                await app(scope, receive, private(send))
        finally:
            turns.count -= 1
            if turns.count == 0:
                del self.clients[client]
