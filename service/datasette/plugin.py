"""The qsite Datasette plugin: the /api/v1 JSON routes, and a read-only instance.

Promises: every path under /api/v1 is answered by :class:`qsite.service.datasette.handler.Api`, on
connections and threads of its own (:mod:`qsite.service.api.reader`), from responses built once per data
version and kept as bytes. A request without credentials is answered by the ASGI wrapper
(:func:`asgi_wrapper`, laid by :mod:`qsite.service.datasette.front`) before Datasette's CSRF
middleware and router run, so a repeat needs no routing, no actor and no SQL; a request with a
cookie or ``Authorization`` goes through the route (:func:`qsite.service.datasette.front.api_view`),
where Datasette's privacy rule applies. When another plugin implements ``actor_from_request``,
the actor is resolved as Datasette's router does (:func:`qsite.service.compat.actor_from_plugins`)
before a new answer is built.

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

import click
from datasette import hookimpl
from jinja2 import ChoiceLoader, FileSystemLoader

from qsite.config import ConfigError
from qsite.service.compat import config_not_applied, datasette_1, queries_not_configured
from qsite.service.datasette import connections, public
from qsite.service.datasette.answer_budget import count_answers
from qsite.service.datasette.errors import handle_exception  # noqa: F401  (a hook: registered with this module)
from qsite.service.datasette.front import api_view, front_of
from qsite.service.datasette.handler import Api
from qsite.service.datasette.metadata import (
    CONFIG_PATH,
    configured_queries,
    load_datasette_config,
    read_config_file,
)
from qsite.service.datasette.state import held_api, instance, serving_api, sql_budget
from qsite.service.describe.docs import TEMPLATES_DIR
from qsite.service.http.settings import (
    DATASETTE_CONFIG_ENV,
    PLUGIN_NAME,
    is_own_server,
    is_qsite_database,
    qsite_config,
)

log = logging.getLogger("qsite.service")

#: Everything under the prefix is ours, so unknown paths get a problem+json 404
#: instead of Datasette's "database not found" page.
ROUTE = r"^/api/v1(?:/.*)?$"


def get_api(datasette) -> Api | None:
    """The :class:`Api` this instance holds now (:func:`qsite.service.datasette.state.held_api`); None before the first request."""
    return held_api(datasette)


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


@hookimpl(tryfirst=True)
def asgi_wrapper(datasette):
    """The layer in front of Datasette (:func:`qsite.service.datasette.front.front_of`); ``tryfirst``, so
    innermost: the rate limiter and the forwarded scheme wrap around it."""
    return front_of(datasette)
