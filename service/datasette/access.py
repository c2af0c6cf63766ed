"""The deployer's Datasette permissions, applied to /api/v1.

Each endpoint reads a canned query (``view-query`` on ``api_news`` and so on)
or, for the snapshot file, the whole database (``view-database``); the
documents that describe the API read no data. A request may have an endpoint's
answer when Datasette would show that actor the query or database page:
``allow`` blocks in ``datasette.yaml``, actor and permission plugins and
``--root`` mean the same at ``/api/v1/...`` (:func:`service.compat.allowed`).

Kept cheap for the cached path: the answer for the anonymous actor (every
request without credentials, all of the fast path) is worked out once per
built :class:`~service.datasette.handler.Api`, and configuration does not
change while an instance runs; only requests with credentials ask Datasette
each time. With the default configuration everything is public, as before.
"""

from __future__ import annotations

from service.api.endpoints import ENDPOINTS, Endpoint
from service.compat import allowed

#: Endpoints that hand out the whole database file.
WHOLE_DATABASE = frozenset({"snapshot", "snapshot_file"})
QUERY_PREFIX = "api_"


def resources(endpoint: Endpoint) -> list[tuple[str, str | None]]:
    """``(action, resource name)`` pairs an endpoint reads; empty for documents about the API."""
    if endpoint.name in WHOLE_DATABASE:
        return [("view-database", None)]
    return [("view-query", QUERY_PREFIX + name) for name in endpoint.queries]


class Access:
    """Which endpoints the deployer's permissions let an actor read, for one database.

    :param denied_anonymous: names of the endpoints the anonymous actor may not read.
    """

    def __init__(self, datasette, database: str, denied_anonymous: frozenset[str]):
        self.datasette = datasette
        self.database = database
        self.denied_anonymous = denied_anonymous

    @classmethod
    async def for_instance(cls, datasette, database: str) -> "Access":
        denied = set()
        for endpoint in ENDPOINTS.values():
            if not await cls.check(datasette, database, endpoint, None):
                denied.add(endpoint.name)
        return cls(datasette, database, frozenset(denied))

    @staticmethod
    async def check(datasette, database: str, endpoint: Endpoint, actor) -> bool:
        for action, name in resources(endpoint):
            if not await allowed(datasette, actor, action, database, name):
                return False
        return True

    def public(self, endpoint: Endpoint) -> bool:
        """Whether anyone, without credentials, may read ``endpoint`` (its answers may then be kept for the fast path)."""
        return endpoint.name not in self.denied_anonymous

    async def allows(self, endpoint: Endpoint, actor) -> bool:
        if actor is None:
            return self.public(endpoint)
        return await self.check(self.datasette, self.database, endpoint, actor)
