"""The qsite Datasette plugin: the /api/v1 JSON routes.

Every path under /api/v1 is a plugin route (``register_routes``) answered by
:class:`service.api.Api`. Responses are built once per data version and kept
as bytes; the ASGI wrapper below serves anonymous repeats of a built response
before Datasette's router runs, since a repeat needs no routing, no actor
and no SQL. It is registered ``tryfirst`` so it sits innermost: middleware
such as the rate limiter (``service/ratelimit.py``) wraps around it.
"""

from __future__ import annotations

import logging

from datasette import hookimpl

from pipeline.config import ConfigError

from .api import Api
from .cache import DataVersions
from .metadata import MetadataError, canned_sql
from .openapi import build_document, build_index
from .problems import API_PREFIX, send_response
from .settings import qsite_config

log = logging.getLogger("qsite.service")

#: Everything under the prefix is ours, so unknown paths get a problem+json 404
#: instead of Datasette's "database not found" page.
ROUTE = r"^/api/v1(?:/.*)?$"
_PREFIX = API_PREFIX.encode()


def raw_path(scope) -> bytes:
    """The path as the client sent it (percent-encoded), as Datasette routes on it."""
    raw = scope.get("raw_path")
    if raw is None:
        raw = scope["path"].encode("utf-8")
    return raw.partition(b"?")[0]


def get_api(datasette) -> Api:
    """The :class:`Api` of this Datasette instance, made on first use.

    A config or metadata problem does not stop Datasette: it is logged, and
    /api/v1 answers 503 without saying more to clients.
    """
    found = getattr(datasette, "_qsite_api", None)
    if found is not None:
        return found
    broken = None
    execute_fn = versions = sql = None
    max_age = 0
    try:
        config = qsite_config(datasette)
        max_age = config.api.cache_max_age
        name = config.database_path.stem
        database = datasette.databases.get(name)
        if database is None:
            raise ConfigError(f"database {name!r} ({config.database_path}) is not served by this Datasette")
        sql = canned_sql(datasette, name)
        execute_fn = database.execute_fn
        versions = DataVersions(database.path)
    except (ConfigError, MetadataError, OSError) as exc:
        broken = str(exc)
        log.error("/api/v1 cannot serve data: %s", broken)
    documents = {"index": build_index(), "openapi": build_document(max_age)}
    api = Api(execute_fn, versions, sql, max_age, documents, broken=broken)
    datasette._qsite_api = api
    return api


async def api_view(datasette, request, scope, send):
    """Datasette route for every path under /api/v1; answers through ``send`` directly."""
    api = get_api(datasette)
    path = raw_path(scope).decode("latin-1")
    status, headers, body = await api.handle(scope["method"], path, scope.get("query_string", b""), scope["headers"])
    await send_response(send, status, headers, body, head=scope["method"] == "HEAD")


@hookimpl
def register_routes(datasette):
    return [(ROUTE, api_view)]


@hookimpl
def startup(datasette):
    async def load():
        get_api(datasette)

    return load


@hookimpl
def skip_csrf(datasette, scope):
    # Nothing under /api/v1 accepts a write; its answer to POST is a 405, not a CSRF page.
    return scope.get("path", "").startswith(API_PREFIX)


@hookimpl(tryfirst=True)
def asgi_wrapper(datasette):
    def wrap(app):
        async def fast_path(scope, receive, send):
            if scope["type"] == "http":
                path = raw_path(scope)
                if path.startswith(_PREFIX):
                    api = getattr(datasette, "_qsite_api", None)
                    if api is not None:
                        method = scope["method"]
                        answer = api.fast(method, (path, scope.get("query_string", b"")), scope["headers"])
                        if answer is not None:
                            status, headers, body = answer
                            await send({"type": "http.response.start", "status": status, "headers": headers})
                            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
                            return
            await app(scope, receive, send)

        return fast_path

    return wrap
