"""The layer in front of Datasette: /api/v1 answered without its router, and qsite's own server hardened.

:func:`front_of` is what the plugin's ``asgi_wrapper`` hook (:mod:`qsite.service.datasette.plugin`,
``tryfirst``: innermost) lays around Datasette's app. An anonymous /api/v1 request is answered by
:class:`qsite.service.datasette.handler.Api` here, before Datasette's CSRF middleware and router; one
with credentials goes on to the route, :func:`api_view`, where Datasette's privacy rule applies.
Every other request goes to Datasette as it came in someone else's Datasette, except those of qsite's
own database (CSV and SQL guards); on ``qsite serve``'s own server the whole instance is hardened.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from qsite.config import ConfigError
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.compat import actor_from_plugins, other_actor_sources
from qsite.service.datasette.csv_errors import guarded_csv, is_csv
from qsite.service.datasette.state import current_api, instance, serving_api, sql_budget
from qsite.service.http.answered import ANSWERED, EXTRA_HEADERS, adding, hand_on, note
from qsite.service.http.disconnects import ClientGone, until_gone
from qsite.service.http.page_loop import PageLoop, database_page
from qsite.service.http.problems import (
    API_PREFIX,
    CORS_HEADERS,
    NO_STORE,
    problem_response,
    send_response,
)
from qsite.service.http.settings import (
    is_own_server,
    is_qsite_database,
    path_database,
    qsite_config,
)
from qsite.service.http.sql_budget import runs_arbitrary_sql
from qsite.service.http.targets import check_target, raw_target
from qsite.service.replica.snapshot_api import (
    FILE_PREFIX,
    is_snapshot_file,
    send_snapshot_file,
)

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


def client_scheme(datasette, scope) -> str:
    """``http`` or ``https`` as the client sees it: Datasette's force_https_urls is for instances behind a TLS proxy."""
    return "https" if datasette.setting("force_https_urls") else scope.get("scheme", "http")


async def api_view(datasette, request, scope, send):
    """Datasette route for every path under /api/v1; answers through ``send`` directly."""
    path = raw_path(scope).decode("latin-1")
    held = instance(datasette)
    actor = request.actor if request is not None else None
    if is_snapshot_file(path):  # a file, streamed rather than built as bytes
        api = await serving_api(datasette)
        if api.access is not None and not await api.access.allows(ENDPOINTS["snapshot_file"], actor):
            status, headers, body = problem_response("forbidden", "the deployment's permissions do not let this request read that")
            return await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
        return await send_snapshot_file(getattr(held.follower, "serving", None), scope, path, send)
    api = await serving_api(datasette)
    status, headers, body = await api.handle(
        scope["method"], path, scope.get("query_string", b""), scope["headers"],
        scheme=client_scheme(datasette, scope), actor=actor,
    )
    await send_response(send, status, headers, body, head=scope["method"] == "HEAD")


class ActorPluginFailed(Exception):
    """A plugin's ``actor_from_request`` raised: the request goes on to Datasette's router, which answers it as on any page."""


def api_scope(scope, path: bytes) -> dict:
    """``scope`` with its path replaced by ``path`` (already without escapes of unreserved characters)."""
    return {**scope, "raw_path": path, "path": unquote_to_bytes(path).decode("utf-8", "replace")}


#: The event loop that makes the served database's pages, one per process.
PAGES = PageLoop()


def served_page(datasette, path: bytes) -> bool:
    """Whether ``path`` is a page of the database qsite serves (:func:`qsite.service.http.page_loop.database_page`)."""
    try:
        name = qsite_config(datasette).database_path.stem
    except ConfigError:
        return False
    return database_page(path, name)


def on_page_loop(app):
    """``app`` run on :data:`PAGES`."""

    async def run(scope, receive, send):
        await PAGES.run(app, scope, receive, send)

    return run


def with_api_headers(send):
    """``send`` adding to Datasette's answers (JSON, CSV, pages, static files) what the API's carry:
    its CORS headers where there are none, and ``Cache-Control: no-store`` on an error (4xx, 5xx)
    that says nothing of caching.

    The data is public and read-only, and no credentials are honoured
    cross-origin (``*`` forbids them), so any origin may read it. An error is
    the answer of one moment, as the API's are (``no-store``): Datasette sends
    its 404s and its SQL errors without ``Cache-Control``, and a shared cache may
    keep a 404 on its own reckoning (RFC 9111 4.2.2; Varnish kept one for 120 s).
    """

    async def send_with_headers(message):
        if message["type"] == "http.response.start":
            headers = message.get("headers", [])
            extra = []
            if not any(name.lower() == b"access-control-allow-origin" for name, _ in headers):
                extra += CORS_HEADERS
            if message["status"] >= 400 and not any(name.lower() == b"cache-control" for name, _ in headers):
                extra.append(NO_STORE)
            if extra:
                message = {**message, "headers": [*headers, *extra]}
        await send(message)

    return send_with_headers


def front_of(datasette):
    """Answer /api/v1 without Datasette's router where it can; on qsite's own server, harden the rest.

    On the own server (:func:`qsite.service.http.settings.is_own_server`): caps the request target and
    header fields and takes apart the target forms Datasette does not route
    (:mod:`qsite.service.http.targets`); refuses every method but GET, HEAD and OPTIONS under /api/v1
    (405); runs arbitrary SQL one query per client at a time (:mod:`qsite.service.http.sql_budget`); makes
    the served database's pages on a loop of its own (:mod:`qsite.service.http.page_loop`); adds CORS and
    ``no-store`` on errors (:func:`with_api_headers`).
    """

    def wrap(app):
        own = None  # is_own_server, read at the first request (plugin settings are complete by then)
        held = instance(datasette)  # the instance's state, the same object for its life

        async def read_only_and_fast_path(scope, receive, send):
            nonlocal own
            if scope["type"] != "http":
                return await app(scope, receive, send)
            if own is None:
                own = is_own_server(datasette)
            extra = scope.pop(EXTRA_HEADERS, ())  # fair use's fields, for this layer to add (service/http/answered.py)
            scope, answer = check_target(scope, whole_instance=own)
            if answer is not None:
                status, headers, body = answer
                note(scope, status)  # for /metrics (service/http/answered.py)
                return await send_response(send, status, [*headers, *extra], body, head=scope["method"] == "HEAD")
            path = raw_path(scope)
            if b"%" in path:
                decoded = decode_unreserved(path)
                if decoded != path and is_api_path(decoded):
                    scope, path = api_scope(scope, decoded), decoded
            method = scope["method"]
            if is_api_path(path):
                if method not in READ_METHODS:  # 404 or 405, as the document says
                    return await hand_on(lambda scope, _, send: api_view(datasette, None, scope, send), scope, receive,
                                         adding(send, extra))
                if not (path.startswith(FILE_PREFIX) and is_snapshot_file(path.decode("latin-1"))):
                    if not held.started:
                        # Datasette 0.65 runs ASGI wrappers outside its run-on-first-request
                        # startup: this path answers before Datasette's router would start it.
                        await datasette.invoke_startup()
                    api = current_api(held) or await serving_api(datasette)

                    async def find_actor():
                        if "actor" not in scope and not other_actor_sources():
                            return None  # only Datasette's own sources, which need the credentials checked above
                        try:
                            return await actor_from_plugins(datasette, scope)
                        except Exception as exc:
                            raise ActorPluginFailed() from exc

                    try:
                        answer = await api.anonymous(
                            method, (path, scope.get("query_string", b"")), scope["headers"],
                            client_scheme(datasette, scope), find_actor=find_actor,
                        )
                    except ActorPluginFailed:  # Datasette's router answers as it would on any page
                        answer = None
                    if answer is not None:
                        status, headers, body = answer
                        if extra:
                            headers = [*headers, *extra]
                        await send({"type": "http.response.start", "status": status, "headers": headers})
                        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
                        answered = scope.get(ANSWERED)  # note(scope, status), inline on the cached path
                        if answered is not None:
                            answered[0] = status
                        return
                return await hand_on(app, scope, receive, adding(send, extra))
            send = adding(send, extra)
            if not own and not is_qsite_database(datasette, path_database(scope.get("path", ""))):
                return await app(scope, receive, send)  # someone else's Datasette: its pages as they are
            if own:
                send = with_api_headers(send)
            # a stream (CSV, ?_stream=on) stops when its client has gone; only for requests that
            # have no body, so that the watch never takes a message the page would read
            send, stop_watching = until_gone(receive, send) if method in ("GET", "HEAD") else (send, None)
            inner = app
            if is_csv(scope):  # a failed query's CSV answered as a 400 (service/datasette/csv_errors.py)

                async def inner(scope, receive, send):
                    await guarded_csv(app, scope, receive, send)

            if served_page(datasette, path):  # made on a loop of its own, never the API's (service/http/page_loop.py)
                if not held.started:
                    await datasette.invoke_startup()  # here, so that what startup builds (the API) is of this loop
                inner = on_page_loop(inner)

            try:
                if runs_arbitrary_sql(scope.get("query_string", b"")):
                    return await sql_budget(datasette)(inner, scope, receive, send)
                await inner(scope, receive, send)
            except ClientGone:
                return  # no one to answer, nothing to log
            finally:
                if stop_watching is not None:
                    stop_watching()

        return read_only_and_fast_path

    return wrap
