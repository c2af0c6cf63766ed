"""The deployer's Datasette permissions, applied to /api/v1.

Each endpoint reads a canned query (``view-query`` on ``api_news`` and so on)
or, for the snapshot file, the whole database (``view-database``); the
documents that describe the API read no data. A request may have an endpoint's
answer when Datasette would show that actor the query or database page:
``allow`` blocks in ``datasette.yaml``, actor and permission plugins and
``--root`` mean the same at ``/api/v1/...`` (:func:`qsite.service.compat.allowed`).

Kept cheap for the cached path: the answer for the anonymous actor (every
request without credentials, all of the fast path) is worked out once per
built :class:`~qsite.service.datasette.handler.Api`, and configuration does not
change while an instance runs; only requests with credentials ask Datasette
each time. With the default configuration everything is public, as before.
"""

from __future__ import annotations

import asyncio

from qsite.service.api.endpoint import Endpoint
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.compat import allowed, canned_query_sql

#: Endpoints that hand out the whole database file.
WHOLE_DATABASE = frozenset({"snapshot", "snapshot_file"})
QUERY_PREFIX = "api_"


def resources(endpoint: Endpoint, known: frozenset[str]) -> list[tuple[str, str | None]]:
    """``(action, resource name)`` pairs an endpoint reads; empty for documents about the API.

    :param known: the canned queries Datasette has; the SQL of others comes from
        the bundled ``datasette.yaml`` (Datasette started without it), so what
        they read is governed by the database's permission.
    """
    if endpoint.name in WHOLE_DATABASE:
        return [("view-database", None)]
    pairs = [("view-query", QUERY_PREFIX + name) for name in endpoint.queries if QUERY_PREFIX + name in known]
    if len(pairs) < len(endpoint.queries):
        pairs.append(("view-database", None))
    return pairs


class Access:
    """Which endpoints the deployer's permissions let an actor read, for one database.

    :param denied_anonymous: names of the endpoints the anonymous actor may not read.
    """

    def __init__(self, datasette, database: str, known: frozenset[str], denied_anonymous: frozenset[str]):
        self.datasette = datasette
        self.database = database
        self.known = known
        self.denied_anonymous = denied_anonymous

    @classmethod
    async def for_instance(cls, datasette, database: str) -> "Access":
        wanted = {QUERY_PREFIX + name for endpoint in ENDPOINTS.values() for name in endpoint.queries}
        known = frozenset(await canned_query_sql(datasette, database, sorted(wanted)))
        access = cls(datasette, database, known, frozenset())
        denied = []
        for endpoint in ENDPOINTS.values():
            if not await access.check(endpoint, None):
                denied.append(endpoint.name)
            # Datasette's permission checks never wait (on 0.65 each reads a deep copy of the metadata):
            # all endpoints in one stretch were 20 to 30 ms of the 35 to 60 ms a replica's swap held the
            # event loop (tests/test_swap_stall.py); the loop gets a turn between endpoints instead.
            await asyncio.sleep(0)
        access.denied_anonymous = frozenset(denied)
        return access

    async def check(self, endpoint: Endpoint, actor) -> bool:
        for action, name in resources(endpoint, self.known):
            if not await allowed(self.datasette, actor, action, self.database, name):
                return False
        return True

    def public(self, endpoint: Endpoint) -> bool:
        """Whether anyone, without credentials, may read ``endpoint`` (its answers may then be kept for the fast path)."""
        return endpoint.name not in self.denied_anonymous

    async def allows(self, endpoint: Endpoint, actor) -> bool:
        if actor is None:
            return self.public(endpoint)
        return await self.check(endpoint, actor)
