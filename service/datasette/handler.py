"""Answering /api/v1 requests: route, validate, build once, answer (conditionally).

:class:`Api` answers a request given as method, raw path, raw query string and
headers, returning ``(status, headers, body)``; the plugin feeds it from
Datasette's router and from the ASGI fast path (:meth:`Api.fast`) that serves
repeats straight from the :class:`~qsite.service.api.response_cache.ResponseCache`.
What each endpoint is (path, parameters, canned queries, datasets) is the
table in :mod:`qsite.service.api.endpoints`; all SQL comes from the canned queries in
``metadata.yml``, run with bound parameters.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from typing import Callable

from qsite.service.api.bodies import Build, Invalid, Missing, NoData
from qsite.service.api.data_versions import DUE, STALE, DataVersions, read_versions, updated_at
from qsite.service.api.endpoint import HTML, JSON, Endpoint
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.health import health_response
from qsite.service.api.parameters import echo, invalid_parameters, parse_params
from qsite.service.api.response_cache import ResponseCache
from qsite.service.api.responses import Entry, dumps, read_conditions
from qsite.service.api.routing import cache_key, resolve
from qsite.service.datasette.answers import NotServed, base_url, failed, private, without_parameters
from qsite.service.datasette.problem_pages import problem_page
from qsite.service.describe.docs import DocsPage, collect_examples
from qsite.service.describe.openapi import for_base_url
from qsite.service.http.problems import (
    ALLOWED_METHODS,
    API_PREFIX,
    HTML_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    PREFLIGHT_HEADERS,
    SNAPSHOT_HEADER,
    problem_response,
)
from qsite.service.i18n import find_language

log = logging.getLogger("qsite.api")

#: The JSON endpoints the documentation page shows an example of (not the OpenAPI document itself).
EXAMPLE_ENDPOINTS = [endpoint for endpoint in ENDPOINTS.values() if endpoint.media_type == JSON and endpoint.name != "openapi"]


def in_snapshot(conn: sqlite3.Connection, build: Callable):
    """Run ``build(conn, versions)`` in one read transaction with the versions it saw.

    The data and its ``data_versions`` come from the same snapshot, so an
    ETag and ``updated_at`` always describe exactly the bytes they go with.
    A connection already in a read transaction (the inline one keeps one for
    :data:`~qsite.service.api.reader.HOLD` seconds) builds in that one, with the
    versions its first build read there: the same snapshot has the same
    versions, and reading them again was a query per request (``docs/performance.md``).
    """
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        if own:
            versions = read_versions(conn)
        else:
            versions = conn.kept.get("versions")
            if versions is None:
                versions = conn.kept["versions"] = read_versions(conn)
        return versions, build(conn, versions)
    finally:
        if own:
            conn.execute("COMMIT")


class Api:
    """Answers /api/v1 requests for one database.

    :param execute_fn: runs a sync ``fn(conn)`` on the API's own read connection
        (:meth:`qsite.service.api.reader.Reader.inline`, never Datasette's shared pool) and returns its result.
    :param versions: the :class:`~qsite.service.api.data_versions.DataVersions` of that database.
    :param sql: ``{name: sql}`` of the canned queries (:func:`qsite.service.datasette.metadata.canned_sql`).
    :param documents: ``{"index": dict, "openapi": {language code: dict}}`` and, on a following
        replica, ``"snapshot"`` (:func:`qsite.service.replica.follow.describe`); the OpenAPI documents
        carry :data:`qsite.service.api.responses.BASE_URL_PLACEHOLDER`.
    :param docs_page: renders the documentation page (it needs Datasette's templates).
    :param broken: a reason the API cannot serve data (logged, never sent).
    :param reader: the :class:`~qsite.service.api.reader.Reader` behind ``execute_fn``, closed by :meth:`close`.
    :param access: the deployer's permissions (:class:`~qsite.service.datasette.access.Access`); None: everything public.
    :param max_data_age: ``api.health_max_data_age``: older data makes /api/v1/health a 503.
    :param fresh_fn: as ``execute_fn``, in a read transaction begun for it (:meth:`qsite.service.api.reader.Reader.fresh`),
        for what is built for every request (:attr:`Endpoint.fresh <qsite.service.api.endpoint.Endpoint.fresh>`,
        /api/v1/health), whose data changes without a ``data_versions`` bump; by default ``execute_fn``.
    :param cursor_key: seals the counts ``next`` links carry (:func:`qsite.service.datasette.state.cursor_key`).
    :param credential_parameters: ``api.credential_parameters``: taken out of the query before it is read.
    :param public_url: ``api.public_url``: the address absolute links are built on; None: the request's
        ``Host`` (:func:`~qsite.service.datasette.answers.base_url`), and those answers vary on it (``Vary: Host``).
    :param judged: per-kind health bounds and deciding kinds (:func:`qsite.service.api.health.judged_kinds`).
    :param heartbeat_fn: on a following replica, returns the writer's heartbeat (its ingests) now.
    """

    def __init__(
        self,
        execute_fn,
        versions: DataVersions | None,
        sql: dict[str, str] | None,
        max_age: int,
        documents: dict,
        docs_page: DocsPage | None = None,
        broken: str | None = None,
        reader=None,
        access=None,
        max_data_age: int = 86400,
        fresh_fn=None,
        cursor_key: bytes = b"",
        public_url: str | None = None,
        credential_parameters: frozenset[bytes] = frozenset(),
        judged: dict | None = None,
        heartbeat_fn=None,
    ):
        self.execute_fn = execute_fn
        self.fresh_fn = fresh_fn or execute_fn
        self.sql = sql or {}
        self.max_age = max_age
        self.documents = documents
        #: The OpenAPI document of each language, serialised once.
        self.openapi_bodies = {code: dumps(document) for code, document in documents["openapi"].items()}
        self.docs_page = docs_page
        self.broken = broken
        self.cache = ResponseCache(versions)
        self.reader = reader
        self.access = access
        self.max_data_age = max_data_age
        #: :func:`qsite.service.api.health.health`'s per-kind ``bounds`` and ``deciding`` kinds.
        self.judged = judged or {}
        #: On a following replica: the writer's heartbeat (``latest.json``'s ingests) now.
        self.heartbeat_fn = heartbeat_fn
        self.cursor_key = cursor_key
        self.public_url = public_url
        self.credential_parameters = credential_parameters
        #: The snapshot a following replica serves (its file name), said in the index, /health and a header.
        self.snapshot = (documents.get("snapshot") or {}).get("file")
        #: Added to every built 200: which snapshot it was built from (none on a live database).
        self.identity = ((SNAPSHOT_HEADER, self.snapshot.encode()),) if self.snapshot else ()
        self._polling: asyncio.Task | None = None

    def close(self) -> None:
        """Close the API's own connections and threads (a follower's old snapshot is retired)."""
        if self.reader is not None:
            self.reader.close()

    def fast(self, method: str, raw_key: tuple[bytes, bytes], conditions) -> tuple | None:
        """The answer to an anonymous GET/HEAD from an already built response, else None.

        No parsing, SQL, thread or serialisation: an alias lookup and the
        conditional check. The ``data_versions`` poll it may start runs on
        its own; this answer never waits for it. When the versions are not
        recent (no request came for a while), None: :meth:`handle` waits for a
        poll rather than serve what may have changed.
        """
        if method != "GET" and method != "HEAD":
            return None
        standing = self.cache.standing()  # fresh() and due() with one look at the clock
        if standing == STALE:
            return None
        if standing == DUE:
            self._poll_in_background()
        entry = self.cache.alias(raw_key)
        if entry is None:
            return None
        return entry.answer(conditions)

    async def anonymous(
        self, method: str, raw_key: tuple[bytes, bytes], headers, scheme: str = "http", find_actor=None
    ) -> tuple | None:
        """The answer to a request without credentials, for the ASGI wrapper to send; else None.

        A repeat of a built response is :meth:`fast`; anything else is
        :meth:`handle`. Neither needs Datasette's CSRF middleware and router:
        for a request without a cookie or ``Authorization`` they would only
        add ``Vary``, which every answer carries already, and cost an uncached
        request more than its SQL (a CSRF token of 16 random characters made
        for every request, routing, a request object). Requests with
        credentials get ``None``: the router applies Datasette's privacy rule.

        :param find_actor: when other plugins may find an actor in the request (a header an auth proxy
            sets, ``?_auth_token=``), a coroutine function giving it as Datasette's router would
            (:func:`qsite.service.compat.actor_from_plugins`), asked only when no kept answer (which anyone
            may have) serves: the deployer's permissions apply to that actor.
        """
        conditions = read_conditions(headers)
        if conditions.credentialed:
            return None
        answer = self.fast(method, raw_key, conditions)  # only answers anyone may have are kept for it
        if answer is not None:
            return answer
        actor = await find_actor() if find_actor is not None else None
        return await self.handle(method, raw_key[0].decode("latin-1"), raw_key[1], headers, scheme=scheme, actor=actor)

    async def handle(
        self, method: str, path: str, query: bytes, headers, scheme: str = "http", actor: dict | None = None
    ) -> tuple[int, list, bytes]:
        """``(status, headers, body)`` for any request under /api/v1 (body is for GET).

        Never raises: whatever goes wrong is logged here and answered as a
        problem without internals (no traceback, SQL or file path).

        :param path: the raw path, percent-encoded, decoded from bytes as latin-1.
        :param scheme: ``http`` or ``https``, as the client sees this instance.
        :param actor: Datasette's actor of the request (None: anonymous), for the deployer's permissions.
        """
        try:
            return await self._handle(method, path, query, headers, scheme, actor)
        except Exception:
            log.exception("error answering %s %s", method, path)
            return problem_response("internal-error", "the request could not be answered")

    async def _handle(self, method: str, path: str, query: bytes, headers, scheme: str, actor) -> tuple[int, list, bytes]:
        if self.credential_parameters and query:
            query = without_parameters(query, self.credential_parameters)
        if method == "OPTIONS":
            # Any path, known or not: a browser script may then read the 404 problem too.
            return 204, list(PREFLIGHT_HEADERS), b""
        resolved = resolve(path)
        page = problem_page(path) if resolved is None else None
        if resolved is None and page is None:
            return problem_response("not-found", f"no such endpoint; the endpoints are listed at {API_PREFIX}")
        if method not in ("GET", "HEAD"):
            return problem_response(
                "method-not-allowed",
                f"{echo(method)} is not allowed; the API is read-only",
                headers=[(b"allow", ALLOWED_METHODS.encode())],
            )
        if page is not None:  # takes no parameter, as every path under the prefix refuses those it does not take
            _none, errors = parse_params((), query)
            return invalid_parameters(errors) if errors else page
        endpoint, arg = resolved
        if self.access is not None and not await self.access.allows(endpoint, actor):
            return problem_response("forbidden", "the deployment's permissions do not let this request read that")
        values, errors = parse_params(endpoint.params, query)
        if endpoint.path_param is not None and (wrong := endpoint.path_param.kind.check(arg)):
            errors.insert(0, {"parameter": endpoint.path_param.name, "detail": wrong})
        if errors:
            return invalid_parameters(errors)
        if endpoint.name == "health":  # never kept, and its 503 has a body of its own
            return await self._health()
        try:
            if endpoint.name == "openapi":  # made for the address asked, so never kept
                entry, keep = self._openapi(endpoint, values, self.public_url or base_url(headers, scheme)), False
                if self.public_url is None:
                    entry.vary_on_host()
            else:
                entry, keep = await self._entry(endpoint, arg, values), not endpoint.fresh
                if endpoint.absolute_links:  # kept with the placeholder; answered for the address asked, so never aliased
                    base = self.public_url or base_url(headers, scheme)
                    entry, keep = entry.at_base_url(base, endpoint.absolute_links), False
                    if self.public_url is None:
                        entry.vary_on_host()
        except (NoData, Missing, Invalid, NotServed, sqlite3.Error) as exc:
            return failed(exc, path, searched=bool(values.get("q")))
        public = self.access is None or self.access.public(endpoint)
        if keep and public:  # the fast path answers anyone
            self.cache.add_alias((path.encode("latin-1"), query), entry)
        answer = entry.answer(read_conditions(headers))
        return answer if public else private(answer)

    def _poll_in_background(self) -> None:
        """Start a ``data_versions`` poll if one is due and none is running, without waiting for it."""
        versions = self.cache.versions
        if versions is None or not versions.due() or (self._polling is not None and not self._polling.done()):
            return
        self._polling = asyncio.get_running_loop().create_task(self.cache.refresh())

    async def _entry(self, endpoint: Endpoint, arg: str | None, values: dict) -> Entry:
        key = cache_key(endpoint, arg, values)
        if self.cache.fresh():  # the documentation page shows data too: both follow data_versions
            self._poll_in_background()
        else:
            await self.cache.refresh()
        if endpoint.media_type == HTML:
            return await self.cache.get_or_build(key, lambda: self._docs(key, endpoint, values))
        if endpoint.build is None:
            return await self.cache.get_or_build(key, lambda: self._document(key, endpoint))
        if self.broken:
            raise NotServed()
        if endpoint.required not in self.cache.versions.current and self.cache.fresh():
            # Read, and none of it. When the read failed (versions not fresh: a new Api's first read,
            # interrupted or locked out), nothing is known: the build reads data_versions itself, and
            # answers "unavailable" if it cannot either, never "no data" over a database that has some.
            raise NoData()
        if endpoint.fresh:
            entry, _versions = await self._build(key, endpoint, arg, values, self.fresh_fn)
            return entry
        return await self.cache.get_or_build(key, lambda: self._build(key, endpoint, arg, values))

    async def _document(self, key, endpoint: Endpoint):
        document = self.documents.get(endpoint.name)
        if document is None:  # /api/v1/snapshot on an instance that does not follow snapshots
            raise Missing("this instance serves a live database, not snapshots (they are served by qsite serve --follow)")
        return Entry(key, dumps(document), (), None, self.max_age, self.identity), {}

    def _openapi(self, endpoint: Endpoint, values: dict, base: str) -> Entry:
        """The OpenAPI document in the language asked, with this instance's address in it."""
        body = for_base_url(self.openapi_bodies[values["lang"]], base)
        headers = ((b"content-language", values["lang"].encode()), *self.identity)
        return Entry(cache_key(endpoint, None, values), body, (), None, self.max_age, headers)

    async def _docs(self, key, endpoint: Endpoint, values: dict):
        """The documentation page in the language asked, with examples answered from the data now served."""
        seen = dict(self.cache.versions.current) if self.cache.versions is not None else {}
        language = find_language(values["lang"])

        async def answer(path_and_query: str) -> tuple[int, bytes]:
            path, _, query = path_and_query.partition("?")
            status, _headers, body = await self.handle("GET", path, query.encode(), [])
            return status, body

        # /api/v1/snapshot only where there is one: elsewhere its example would be a 404
        paths = [e.url for e in EXAMPLE_ENDPOINTS if not e.following or e.name in self.documents]
        examples = await collect_examples(paths, answer)
        html = await self.docs_page.render(self.documents["openapi"][language.code], language, examples)
        headers = ((b"content-language", language.code.encode()), *self.identity)
        return Entry(key, html.encode(), endpoint.datasets, None, self.max_age, headers, HTML_CONTENT_TYPE), seen

    async def _build(self, key, endpoint: Endpoint, arg, values, execute_fn=None):
        def build(conn, versions):
            if endpoint.required not in versions:
                raise NoData()
            return endpoint.build(Build(endpoint, values, arg, conn, self.sql, versions, self.cursor_key))

        execute_fn = execute_fn or self.execute_fn
        versions, (payload, extra_headers) = await execute_fn(lambda conn: in_snapshot(conn, build))
        modified = updated_at(versions, endpoint.datasets) if endpoint.last_modified else None
        headers = (*extra_headers, *self.identity)
        body = payload if isinstance(payload, bytes) else dumps(payload)  # a feed may come serialised (Atom)
        content_type = JSON_CONTENT_TYPE if endpoint.media_type == JSON else f"{endpoint.media_type}; charset=utf-8"
        return Entry(key, body, endpoint.datasets, modified, self.max_age, headers, content_type), versions

    async def _health(self) -> tuple[int, list, bytes]:
        """``GET /api/v1/health`` (:mod:`qsite.service.api.health`): 200 or 503, never cached, the same body."""
        rows, versions = [], {}  # no database loaded: no data
        if not self.broken and self.fresh_fn is not None:

            def read(conn, versions):
                return Build(ENDPOINTS["health"], {}, None, conn, self.sql, versions).rows("health", {})

            try:
                versions, rows = await self.fresh_fn(lambda conn: in_snapshot(conn, read))
            except sqlite3.Error:
                log.exception("database error answering /api/v1/health")
                rows = versions = None
        heartbeat = self.heartbeat_fn() if self.heartbeat_fn is not None else None
        return health_response(rows, versions, self.max_data_age, self.snapshot, self.identity, heartbeat=heartbeat, **self.judged)
