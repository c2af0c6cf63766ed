"""The qsite Datasette plugin: the /api/v1 JSON routes, and a read-only instance.

Every path under /api/v1 is a plugin route (``register_routes``) answered by
:class:`service.datasette.handler.Api`, on connections and threads of its own
(:mod:`service.api.reader`). Responses are built once per data version and kept
as bytes. The ASGI wrapper below answers requests without credentials itself,
before Datasette's CSRF middleware and router run (:meth:`Api.anonymous
<service.datasette.handler.Api.anonymous>`): a repeat of a built response needs no routing,
no actor and no SQL, and a new one nothing of them either; requests with a
cookie or ``Authorization`` go through the route, where Datasette's privacy
rule applies.

The same wrapper, for the whole instance: caps the request target and header
fields and takes apart the request-target forms Datasette does not route
(:mod:`service.http.targets`); refuses every method but GET, HEAD and OPTIONS
(405, ``Allow: GET, HEAD``): nothing is written through the service, and
Datasette 0.65's own POST handling (a POST to a canned query page answers an
HTML 500) is never reached; runs arbitrary SQL one query per client at a
time (:mod:`service.http.sql_budget`); and lets browser scripts anywhere read
Datasette's JSON and CSV (CORS). It is registered ``tryfirst`` so it sits
innermost: middleware such as the rate limiter (``service/http/ratelimit.py``)
wraps around it, so refused requests still count.

Datasette's errors are answered by :mod:`service.datasette.errors` (never a 5xx for
what a client asked), and its introspection pages without local paths or
plugin settings by :mod:`service.datasette.public`.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from urllib.parse import unquote_to_bytes

from datasette import hookimpl

from config import ConfigError, parse_rate_limit

from service.datasette import public
from service.datasette.handler import Api
from service.api.data_versions import DataVersions
from service.describe.docs import DocsPage
from service.api.endpoints import index_document
from service.datasette.errors import handle_exception  # noqa: F401  (a hook: registered with this module)
from service.replica.follow import describe
from service.i18n import Catalogs
from service.datasette.metadata import MetadataError, canned_sql
from service.describe.openapi import build_documents
from service.api.parameters import echo
from service.http.problems import ALLOWED_METHODS, API_PREFIX, CORS_HEADERS, send_problem, send_response
from service.api.reader import Reader
from service.http.settings import qsite_config
from service.replica.snapshot_api import is_snapshot_file, send_snapshot_file
from service.http.sql_budget import SqlBudget, runs_arbitrary_sql
from service.http.targets import check_target, raw_target

log = logging.getLogger("qsite.service")

#: Everything under the prefix is ours, so unknown paths get a problem+json 404
#: instead of Datasette's "database not found" page.
ROUTE = r"^/api/v1(?:/.*)?$"
_PREFIX = API_PREFIX.encode()
#: Methods that reach Datasette; OPTIONS answers CORS preflight.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: A percent-escape of an RFC 3986 unreserved character: the same URI as the character itself.
_UNRESERVED_ESCAPE = re.compile(rb"%(2[dDeE]|3[0-9]|[46][1-9a-fA-F]|[57][0-9aA]|5[fF]|7[eE])")


#: The path as the client sent it, as Datasette routes on it.
raw_path = raw_target


def decode_unreserved(path: bytes) -> bytes:
    """``path`` with escapes of unreserved characters decoded (RFC 3986 section 6.2.2.2).

    ``/api/v1/new%73`` is the same URI as ``/api/v1/news``; other escapes
    (``%2F``, ``%FF``, ...) are left as they are, since they change meaning.
    """
    return _UNRESERVED_ESCAPE.sub(lambda match: bytes([int(match.group(1), 16)]), path)


def is_api_path(path: bytes) -> bool:
    return path == _PREFIX or path.startswith(_PREFIX + b"/")


@lru_cache(maxsize=4)
def interface_description(max_age: int) -> tuple[Catalogs, dict[str, dict]]:
    """The catalogs and the OpenAPI document in every language, read and built once per process.

    A following replica makes a new :class:`Api` at every snapshot swap; the
    description does not change with the data, so the swap does not pay for it again.
    """
    catalogs = Catalogs()
    return catalogs, build_documents(max_age, catalogs)


def get_api(datasette) -> Api:
    """The :class:`Api` of this Datasette instance, made on first use.

    A config or metadata problem does not stop Datasette: it is logged, and
    /api/v1 answers 503 without saying more to clients.
    """
    found = getattr(datasette, "_qsite_api", None)
    if found is not None:
        return found
    broken = None
    execute_fn = versions = sql = rate_limit = None
    max_age = 0
    max_data_age = 86400
    reader = None
    try:
        config = qsite_config(datasette)
        max_age = config.api.cache_max_age
        max_data_age = config.api.health_max_data_age
        limit = parse_rate_limit(config.api.rate_limit)
        rate_limit = (limit.amount, limit.get_expiry()) if limit else None
        name = config.database_path.stem
        database = datasette.databases.get(name)
        if database is None:
            raise ConfigError(f"database {name!r} ({config.database_path}) is not served by this Datasette")
        sql = canned_sql(datasette, name)
        reader = Reader(database.path, time_limit_ms=config.api.sql_time_limit_ms)
        execute_fn = reader.inline
        # data_versions (four rows) inline too: never queued behind a news search on the threads
        versions = DataVersions(reader.inline)
    except (ConfigError, MetadataError, OSError) as exc:
        broken = str(exc)
        log.error("/api/v1 cannot serve data: %s", broken)
    follower = getattr(datasette, "_qsite_follower", None)
    catalogs, openapi = interface_description(max_age)
    documents = {"index": index_document(following=follower is not None), "openapi": openapi}
    if follower is not None and follower.serving is not None:
        documents["snapshot"] = describe(follower.serving)
        documents["index"]["snapshot"] = documents["snapshot"]["file"]
    docs_page = DocsPage(datasette, catalogs, rate_limit, max_age)
    api = Api(
        execute_fn, versions, sql, max_age, documents, docs_page=docs_page, broken=broken, reader=reader,
        max_data_age=max_data_age,
    )
    datasette._qsite_api = api
    return api


def client_scheme(datasette, scope) -> str:
    """``http`` or ``https`` as the client sees it: Datasette's force_https_urls is for instances behind a TLS proxy."""
    return "https" if datasette.setting("force_https_urls") else scope.get("scheme", "http")


async def api_view(datasette, request, scope, send):
    """Datasette route for every path under /api/v1; answers through ``send`` directly."""
    path = raw_path(scope).decode("latin-1")
    if is_snapshot_file(path):  # a file, streamed rather than built as bytes
        return await send_snapshot_file(datasette, scope, path, send)
    api = get_api(datasette)
    status, headers, body = await api.handle(
        scope["method"], path, scope.get("query_string", b""), scope["headers"], scheme=client_scheme(datasette, scope)
    )
    await send_response(send, status, headers, body, head=scope["method"] == "HEAD")


@hookimpl
def register_routes(datasette):
    return [(ROUTE, api_view), *public.routes(datasette)]


def sql_budget(datasette) -> SqlBudget:
    """The instance's :class:`SqlBudget`; also sets Datasette's time limit from ``api.sql_time_limit_ms``."""
    budget = getattr(datasette, "_qsite_sql_budget", None)
    if budget is None:
        try:
            api = qsite_config(datasette).api
            time_limit, trusted_proxies = api.sql_time_limit_ms, api.trusted_proxies
        except ConfigError:  # logged by get_api; Datasette's own setting stands
            time_limit, trusted_proxies = datasette.setting("sql_time_limit_ms"), 0
        # Datasette reads the limit from this attribute for every query; the
        # settings dict is what /-/settings.json shows. The config is where
        # qsite's operators set it, for `qsite serve` and a plain `datasette`
        # run with this plugin alike.
        datasette.sql_time_limit_ms = time_limit
        datasette._settings["sql_time_limit_ms"] = time_limit
        budget = datasette._qsite_sql_budget = SqlBudget(time_limit, trusted_proxies)
    return budget


@hookimpl
def startup(datasette):
    async def load():
        if getattr(datasette, "_qsite_follower", None) is None:  # a follower has no database until its first snapshot
            get_api(datasette)
        sql_budget(datasette)

    return load


def api_scope(scope, path: bytes) -> dict:
    """``scope`` with its path replaced by ``path`` (already without escapes of unreserved characters)."""
    return {**scope, "raw_path": path, "path": unquote_to_bytes(path).decode("utf-8", "replace")}


def with_cors(send):
    """``send`` adding the API's CORS headers to a response that has none (Datasette's JSON, CSV and pages).

    The data is public and read-only, and no credentials are honoured
    cross-origin (``*`` forbids them), so any origin may read it.
    """

    async def send_with_cors(message):
        if message["type"] == "http.response.start":
            headers = message.get("headers", [])
            if not any(name.lower() == b"access-control-allow-origin" for name, _ in headers):
                message = {**message, "headers": [*headers, *CORS_HEADERS]}
        await send(message)

    return send_with_cors


@hookimpl(tryfirst=True)
def asgi_wrapper(datasette):
    def wrap(app):
        async def read_only_and_fast_path(scope, receive, send):
            if scope["type"] != "http":
                return await app(scope, receive, send)
            scope, answer = check_target(scope)
            if answer is not None:
                status, headers, body = answer
                return await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
            path = raw_path(scope)
            if b"%" in path:
                decoded = decode_unreserved(path)
                if decoded != path and is_api_path(decoded):
                    scope, path = api_scope(scope, decoded), decoded
            method = scope["method"]
            if method not in READ_METHODS:
                if is_api_path(path):
                    await api_view(datasette, None, scope, send)  # 404 or 405, as the document says
                else:
                    await send_problem(
                        send,
                        "method-not-allowed",
                        f"{echo(method)} is not allowed; this instance is read-only",
                        headers=[(b"allow", ALLOWED_METHODS.encode())],
                    )
                return
            if is_api_path(path):
                api = getattr(datasette, "_qsite_api", None)
                if api is not None and not is_snapshot_file(path.decode("latin-1")):
                    answer = await api.anonymous(
                        method, (path, scope.get("query_string", b"")), scope["headers"], client_scheme(datasette, scope)
                    )
                    if answer is not None:
                        status, headers, body = answer
                        await send({"type": "http.response.start", "status": status, "headers": headers})
                        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
                        return
                return await app(scope, receive, send)
            send = with_cors(send)
            if runs_arbitrary_sql(scope.get("query_string", b"")):
                return await sql_budget(datasette)(app, scope, receive, send)
            await app(scope, receive, send)

        return read_only_and_fast_path

    return wrap
