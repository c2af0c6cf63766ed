"""The qsite Datasette plugin: the /api/v1 JSON routes, and a read-only instance.

Promises: every path under /api/v1 is answered by :class:`qsite.service.datasette.handler.Api`, on
connections and threads of its own (:mod:`qsite.service.api.reader`), from responses built once per data
version and kept as bytes. A request without credentials is answered by the ASGI wrapper
(:func:`asgi_wrapper`) before Datasette's CSRF middleware and router run, so a repeat needs no
routing, no actor and no SQL; a request with a cookie or ``Authorization`` goes through the route
(:func:`api_view`), where Datasette's privacy rule applies. When another plugin implements
``actor_from_request``, the actor is resolved as Datasette's router does
(:func:`qsite.service.compat.actor_from_plugins`) before a new answer is built.

Must not change: in someone else's Datasette (``datasette serve`` with qsite installed) every other
request goes to Datasette as it came, except those of qsite's own database (CSV and SQL guards). On
``qsite serve``'s own server the same wrapper hardens the whole instance (see :func:`asgi_wrapper`),
while every other method and path outside /api/v1 goes to Datasette untouched, so its own POST
routes and other plugins' work beside qsite. The wrapper is registered ``tryfirst`` so it sits
innermost: the rate limiter (:mod:`qsite.service.http.ratelimit`) wraps around it, so refused requests
still count, and the forwarded scheme (:mod:`qsite.service.http.forwarded`), outermost, is in its scope.

Relies on: :mod:`qsite.service.datasette.errors` for Datasette's errors (never a 5xx for what a client
asked), :mod:`qsite.service.datasette.public` for introspection pages without local paths or settings.
"""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import unquote_to_bytes

import click
from datasette import hookimpl
from jinja2 import ChoiceLoader, FileSystemLoader

from qsite.config import ConfigError

from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.compat import (
    actor_from_plugins,
    config_not_applied,
    datasette_1,
    other_actor_sources,
    queries_not_configured,
)
from qsite.service.datasette import connections, public
from qsite.service.datasette.answer_budget import count_answers
from qsite.service.datasette.csv_errors import guarded_csv, is_csv
from qsite.service.datasette.errors import handle_exception  # noqa: F401  (a hook: registered with this module)
from qsite.service.datasette.handler import Api
from qsite.service.datasette.metadata import CONFIG_PATH, configured_queries, load_datasette_config, read_config_file
from qsite.service.datasette.state import current_api, held_api, instance, serving_api, sql_budget
from qsite.service.describe.docs import TEMPLATES_DIR
from qsite.service.http.answered import ANSWERED, EXTRA_HEADERS, adding, hand_on, note
from qsite.service.http.disconnects import ClientGone, until_gone
from qsite.service.http.problems import API_PREFIX, CORS_HEADERS, NO_STORE, problem_response, send_response
from qsite.service.replica.snapshot_api import FILE_PREFIX, is_snapshot_file, send_snapshot_file
from qsite.service.http.page_loop import PageLoop, database_page
from qsite.service.http.settings import (
    DATASETTE_CONFIG_ENV,
    PLUGIN_NAME,
    is_own_server,
    is_qsite_database,
    path_database,
    qsite_config,
)
from qsite.service.http.sql_budget import runs_arbitrary_sql
from qsite.service.http.targets import check_target, raw_target

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


def get_api(datasette) -> Api | None:
    """The :class:`Api` this instance holds now (:func:`qsite.service.datasette.state.held_api`); None before the first request."""
    return held_api(datasette)


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


@hookimpl
def register_routes(datasette):
    """/api/v1; on ``qsite serve``'s own server also the introspection pages without paths or plugin settings."""
    return [(ROUTE, api_view), *(public.routes(datasette) if is_own_server(datasette) else ())]


@hookimpl
def canned_queries(datasette, database):
    """Datasette 0.65 run plainly (``datasette serve site.db -m metadata.yml``: it has no ``-c``): the
    queries of ``datasette.yaml`` (``QSITE_DATASETTE_CONFIG``, else the bundled one) for the served
    database, with their ``allow`` blocks, unless Datasette was given them. Datasette 1.0 reads
    ``datasette.yaml`` itself (``-c``) and has no such hook: this is never called there.
    """
    try:
        served = qsite_config(datasette).database_path.stem
    except ConfigError:
        return None
    if database != served:
        return None
    path = os.environ.get(DATASETTE_CONFIG_ENV) or CONFIG_PATH
    return queries_not_configured(datasette, database, configured_queries(path))


class ConfigNotApplied(click.ClickException):
    """Datasette 0.65 run plainly would serve without part of the deployer's ``datasette.yaml``.

    A :class:`click.ClickException`, as Datasette's own start-up errors are: ``datasette serve``
    runs the startup hooks before it serves and ends with this one ``Error:`` line (status 2,
    a config error); anywhere else (``ds.client``, an ASGI server's lifespan) it fails the start
    or the request, never serves without the file's permissions.
    """

    exit_code = 2


def check_config_applied(datasette) -> None:
    """Refuse to start Datasette 0.65 run plainly when it would drop a key of ``datasette.yaml``.

    Datasette 0.65 has no ``-c``: of ``QSITE_DATASETTE_CONFIG`` (else the bundled file) the plugin
    can hand over only the canned queries (the ``canned_queries`` hook). A database or instance
    ``allow``, ``allow_sql``, table ``allow`` blocks, ``settings`` (``default_allow_sql``...) and
    plugin configuration would be silently left out, so a deployer's ``allow: {id: editor}`` on the
    database served everything to everyone. Failing closed was chosen over applying them:
    0.65 has no hook for settings at all, and its ``get_metadata`` hook (documented as liable to
    change, gone in 1.0) is called on every metadata lookup, including the one the plugin needs
    to find its own config (a recursion), and would lay the file's blocks over a config
    ``qsite serve`` was given differently. A key in force anyway (written in ``metadata.yml``,
    a setting given as ``--setting``) is no error. Plugin configuration unchanged from the bundled
    ``datasette.yaml`` (the dashboards' charts) is only logged: the bundled file run plainly is
    the documented way that leaves them out, and it grants no one anything.

    Nothing to check on Datasette 1.0 (``-c datasette.yaml`` applies the whole file) nor under
    ``qsite serve`` (:func:`qsite.service.serve.app.make_datasette` gives Datasette the whole file and says
    so in the plugin settings).
    """
    if datasette_1():
        return
    options = datasette.plugin_config(PLUGIN_NAME) or {}
    if options.get("datasette_config"):
        return
    try:
        served = qsite_config(datasette).database_path.stem
    except ConfigError:
        return  # the API answers that itself (qsite.service.datasette.state)
    path = os.environ.get(DATASETTE_CONFIG_ENV) or str(CONFIG_PATH)
    config = load_datasette_config(served, path)
    (file_name,) = read_config_file(path)["databases"]
    config["databases"] = {file_name: config["databases"][served]}  # looked up as served, named as written
    missing = config_not_applied(datasette, served, config)
    if not missing:
        return
    bundled = read_config_file(CONFIG_PATH).get("plugins") or {}
    plugins = config.get("plugins") or {}
    as_bundled = [key for key in missing if key.startswith("plugins.") and plugins[key[8:]] == bundled.get(key[8:])]
    if as_bundled:
        log.warning(
            "%s: Datasette 0.65 run plainly (no -c) leaves out %s; metadata.yml or `qsite serve` would apply it",
            path, ", ".join(as_bundled),
        )
    missing = [key for key in missing if key not in as_bundled]
    if missing:
        raise ConfigNotApplied(
            f"{path}: Datasette 0.65 run plainly (no -c) takes only the canned queries from this file, "
            f"not {', '.join(missing)}; put them in metadata.yml (settings as --setting NAME VALUE), "
            f"or serve with `qsite serve --datasette-config {path}`"
        )


@hookimpl
def prepare_connection(conn, database, datasette):
    """Datasette's connections to qsite's database are bounded for the SQL anyone may send
    (:mod:`qsite.service.datasette.connections`) and count the bytes of each answer
    (:mod:`qsite.service.datasette.answer_budget`); other databases' are left as Datasette opens them."""
    if is_qsite_database(datasette, database):
        connections.bound(conn)
        count_answers(conn, qsite_config(datasette).api.sql_answer_max_bytes)


@hookimpl
def prepare_jinja2_environment(env, datasette):
    """Datasette's template environment also finds qsite's templates (the documentation page)."""
    env.loader = ChoiceLoader([env.loader, FileSystemLoader(str(TEMPLATES_DIR))])


@hookimpl
def startup(datasette):
    async def load():
        check_config_applied(datasette)
        instance(datasette).started = True
        if instance(datasette).follower is None:  # a follower has no database until its first snapshot
            await serving_api(datasette)
        sql_budget(datasette)

    return load


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


@hookimpl(tryfirst=True)
def asgi_wrapper(datasette):
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
