"""The one place qsite meets Datasette's and granian's internals, and the one place the two Datasette lines differ.

Promises: one code base runs on Datasette 0.65 (the lock's default) and the 1.0 alphas. As plugins
that support both do (datasette-secrets, datasette-upgrade), it asks the object what it offers
(``hasattr(datasette, "allowed")``), never the version string, and keeps every such branch here.
Relies on: the internals each function names, with the versions checked and the upstream file;
``tests/test_compat.py`` fails loudly when one changes under a new release. Must not change:
everything else in :mod:`service` uses documented hooks and ``Datasette``/``Database`` methods only.

What is here (each function says why no public API serves):

- :func:`datasette_kwargs`, :func:`canned_query_sql`, :func:`allowed`: public on both lines, shaped differently.
- :func:`queries_not_configured`, :func:`config_not_applied`, :func:`instance_metadata`,
  :func:`instance_config`: ``Datasette.metadata()`` exists on 0.65 only.
- :func:`snapshot_database`, :func:`replace_database`: a snapshot swapped in under the same name.
- :func:`json_data_view`, :func:`datasette_error_type`: undocumented classes of Datasette's views.
- :func:`actor_from_plugins`, :func:`other_actor_sources`: a request's actor without Datasette's router.
- :data:`GRANIAN_LOGGER`, :func:`serve_granian`: granian 2.x's logger name and per-worker loader.
- :func:`use_multiprocess_values`, :func:`add_to_histogram`: prometheus-client's value class and buckets.
"""

from __future__ import annotations

import asyncio
import threading
from functools import lru_cache
from pathlib import Path

# Datasette's classes are imported inside the functions: this module is imported
# while Datasette loads its plugins (entry points), before datasette.app exists.


@lru_cache(maxsize=1)
def datasette_1() -> bool:
    """Datasette 1.0 (1.0a20 on): permissions are actions checked with ``datasette.allowed``."""
    from datasette.app import Datasette

    return hasattr(Datasette, "allowed")


def merged(base: dict, extra: dict) -> dict:
    """``base`` with ``extra`` laid over it, dictionaries merged at every depth."""
    result = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def datasette_kwargs(metadata: dict, config: dict) -> dict:
    """``Datasette(...)`` keyword arguments for ``metadata.yml`` and ``datasette.yaml``, on either line.

    The ``settings`` of the config go as ``settings=`` on both; the rest as
    ``config=`` on 1.0 and merged into the metadata on 0.65, where queries,
    ``allow`` blocks and plugin configuration lived.
    """
    settings = dict(config.get("settings") or {})
    rest = {key: value for key, value in config.items() if key != "settings"}
    # Told by the 1.0 permission API (``Datasette(config=)`` came with 1.0a8, before it), not
    # by the signature: datasette's own pytest plugin wraps ``__init__`` as ``(*args, **kwargs)``.
    if datasette_1():
        return {"metadata": metadata, "config": rest, "settings": settings}
    return {"metadata": merged(metadata, rest), "settings": settings}


async def canned_query_sql(datasette, database: str, names) -> dict[str, str]:
    """``{name: sql}`` of the canned queries ``names`` that Datasette has for ``database`` (those it lacks are left out).

    ``get_canned_queries`` (0.65) became stored queries and ``get_query`` (1.0a24 on); on 0.65 this
    reads as ``get_canned_queries`` reads them (metadata, then the ``canned_queries`` hook).
    """
    if hasattr(datasette, "get_query"):  # 1.0: stored queries, saved from datasette.yaml at startup
        found = {}
        for name in names:
            query = await datasette.get_query(database, name)
            if query is not None:
                found[name] = query.sql
        return found
    # 0.65's get_canned_queries (datasette/app.py) writes "name" into the metadata's own query
    # mappings, which /-/metadata then shows: the same reading here, on a copy of them
    import copy

    from datasette.plugins import pm
    from datasette.utils import await_me_maybe

    queries = copy.deepcopy(datasette.metadata("queries", database=database, fallback=False) or {})
    for more in pm.hook.canned_queries(datasette=datasette, database=database, actor=None):
        queries.update(await await_me_maybe(more) or {})
    return {name: query["sql"] if isinstance(query, dict) else query for name, query in queries.items() if name in names}


async def allowed(datasette, actor, action: str, database: str, child: str | None = None) -> bool:
    """Whether ``actor`` may do ``action`` (``view-query``, ``view-table``, ``view-database``) on the resource.

    What Datasette's own query and table pages check: the resource's ``allow``
    block, its database's and the instance's, and every permission plugin.
    ``check_visibility(permissions=...)`` (0.65) became ``allowed(action=, resource=)``
    (1.0a20, "permissions are now actions").
    """
    if datasette_1():
        from datasette.resources import DatabaseResource, QueryResource, TableResource

        if child is None:
            resource = DatabaseResource(database)
        else:
            resource = (QueryResource if action == "view-query" else TableResource)(database, child)
        return await datasette.allowed(action=action, resource=resource, actor=actor)
    permissions: list = [(action, (database, child) if child is not None else database)]
    if action != "view-database":
        permissions.append(("view-database", database))
    permissions.append("view-instance")
    visible, _private = await datasette.check_visibility(actor, permissions=permissions)
    return visible


def queries_not_configured(datasette, database: str, queries: dict) -> dict:
    """Of ``queries``, those Datasette 0.65 was not started with (its metadata has none of that name)."""
    configured = datasette.metadata("queries", database=database, fallback=False) or {}
    return {name: query for name, query in queries.items() if name not in configured}


def _holds(wanted, have) -> bool:
    """Whether ``have`` has everything of ``wanted`` (mappings may hold more keys, e.g. descriptions beside an ``allow``)."""
    if isinstance(wanted, dict):
        return isinstance(have, dict) and all(key in have and _holds(value, have[key]) for key, value in wanted.items())
    return wanted == have


def config_not_applied(datasette, database: str, config: dict) -> list[str]:
    """The keys of a ``datasette.yaml`` (``config``, its one database entry for ``database``) that
    Datasette 0.65 does not have in force: dotted, as the file names them (``databases.site.allow``,
    ``settings.default_allow_sql``, ``plugins.datasette-dashboards``). The canned ``queries`` are left
    out (the ``canned_queries`` hook hands those over). Always empty on 1.0, which reads the file itself (``-c``).

    0.65 keeps ``allow``, ``allow_sql``, table and plugin configuration in its metadata and settings
    apart (``Datasette.setting``): a key is in force when the metadata (or setting) has its value.
    """
    if datasette_1():
        return []
    missing = []
    for key, value in config.items():
        if key == "databases":
            for name, entry in (value or {}).items():
                for entry_key, entry_value in (entry or {}).items():
                    if entry_key == "queries":
                        continue
                    have = datasette.metadata(entry_key, database=database, fallback=False)
                    if not _holds(entry_value, have):
                        missing.append(f"databases.{name}.{entry_key}")
        elif key == "settings":
            missing += [f"settings.{name}" for name, setting in (value or {}).items() if datasette.setting(name) != setting]
        elif key == "plugins":
            have = datasette.metadata("plugins") or {}
            missing += [f"plugins.{name}" for name, plugin in (value or {}).items() if not _holds(plugin, have.get(name))]
        elif not _holds(value, datasette.metadata(key)):
            missing.append(key)
    return missing


def instance_metadata(datasette):
    """The metadata as ``/-/metadata`` shows it: a dict on 0.65; on 1.0 (no such page of its own)
    a coroutine for the instance's and each database's metadata, from its public getters."""
    if not datasette_1():
        return datasette.metadata()

    async def gather() -> dict:
        metadata = await datasette.get_instance_metadata()
        databases = {name: await datasette.get_database_metadata(name) for name in datasette.databases}
        return {**metadata, "databases": {name: entry for name, entry in databases.items() if entry}}

    return gather()


def instance_config(datasette) -> dict | None:
    """The configuration ``/-/config`` shows (1.0); None on 0.65, which has no such page."""
    return (getattr(datasette, "config", None) or {}) if datasette_1() else None


@lru_cache(maxsize=1)
def _snapshot_database_065():
    from datasette.database import Database

    class SnapshotDatabase065(Database):
        """Datasette 0.65: read connections per ``Database`` instance instead of per name (see :func:`snapshot_database`)."""

        def __init__(self, ds, path: Path):
            super().__init__(ds, path=str(path), is_mutable=False)
            self.thread_connections = threading.local()

        async def execute_fn(self, fn):
            if self.ds.executor is None:
                return await super().execute_fn(fn)

            def in_thread():
                conn = getattr(self.thread_connections, "conn", None)
                if conn is None:
                    conn = self.connect()
                    self.ds._prepare_connection(conn, self.name)
                    self.thread_connections.conn = conn
                return fn(conn)

            return await asyncio.get_running_loop().run_in_executor(self.ds.executor, in_thread)

    return SnapshotDatabase065


def snapshot_database(datasette, path: Path, sha256: str | None = None):
    """A Datasette database over one snapshot file (immutable content), with read connections of its own.

    Datasette 0.65 keeps each executor thread's read connection in a thread-local keyed by the
    database *name* (``datasette/database.py``, ``execute_fn``), so a snapshot swapped in under the
    same name would be read through the old file's connections. 1.0 keys them per ``Database``
    instance (``_thread_local_id``; checked on 1.0a41, no upstream issue found for 0.65); on 0.65 a
    subclass does that, and to prepare its connections as Datasette does it calls
    ``Datasette._prepare_connection`` (no public equivalent: the ``prepare_connection`` hook is what
    it runs).

    :param sha256: the file's SHA-256 (hex), already checked: Datasette's ``hash`` of the database,
        which it then never computes itself. An immutable database's ``hash`` otherwise reads the
        whole file synchronously, on the event loop, the first time ``/`` or ``/-/databases`` asks
        after a swap (``Database.hash``, 0.65.5 and 1.0a41 alike; it returns ``cached_hash`` when
        set, an attribute no constructor argument or method sets; no upstream issue found).
    """
    if datasette_1():
        from datasette.database import Database

        database = Database(datasette, path=str(path), is_mutable=False)
    else:
        database = _snapshot_database_065()(datasette, path)
    if sha256 is not None:
        database.cached_hash = sha256
    return database


def replace_database(datasette, name: str, database) -> None:
    """Serve ``database`` under ``name`` in place of the one there, in one step no request sees apart.

    The old one is left open for the requests still reading it (the follower
    closes it after its grace). Datasette 0.65's ``remove_database`` only
    forgets a database; 1.0's also closes it at once (1.0a41: a request in
    flight then fails with ``DatasetteClosedError``), so on 1.0 the mapping is
    replaced as ``add_database`` itself does it (a new ``databases`` dict,
    never mutated in place), with the name and route it sets.
    """
    if not datasette_1():
        if name in datasette.databases:
            datasette.remove_database(name)
        datasette.add_database(database, name=name)
        return
    database.name = name
    database.route = name
    datasette.databases = {**datasette.databases, name: database}


#: The logger granian's server lines go to (granian/log.py, 2.x).
GRANIAN_LOGGER = "_granian"


def serve_granian(server, loader) -> None:
    """Run granian's ``server``, calling ``loader(target)`` in each worker after the fork for the ASGI app.

    ``Server.serve(target_loader=)`` is not in granian's documented API (checked on granian 2.8; no
    upstream issue found): the documented ``factory=True`` takes no arguments, and the config is an object.
    """
    server.serve(target_loader=loader)


def json_data_view(datasette, filename: str, data_callback):
    """A view of ``data_callback()`` as Datasette shows its introspection pages (``/-/metadata``): JSON for
    ``.json``, its ``show_json.html`` page otherwise.

    ``datasette.views.special.JsonDataView`` (Datasette 0.65.5 and 1.0a41, ``datasette/views/special.py``),
    not documented; the pages it replaces are made by it, so the same class keeps their shape.
    """
    from datasette.views.special import JsonDataView

    return JsonDataView.as_view(datasette, filename, data_callback)


@lru_cache(maxsize=1)
def datasette_error_type() -> type:
    """The exception class Datasette's views raise for what a request asked (``DatasetteError``).

    ``datasette.views.base.DatasetteError`` (0.65.5 and 1.0a41, ``datasette/views/base.py``), not
    documented; :mod:`qsite.service.datasette.errors` answers it as the 4xx it is.
    """
    from datasette.views.base import DatasetteError

    return DatasetteError


#: The modules of Datasette's own ``actor_from_request`` implementations (the ``ds_actor`` cookie,
#: and on 1.0 ``Authorization: Bearer dstok_...`` tokens): both need a cookie or ``Authorization``.
DATASETTE_ACTOR_SOURCES = frozenset({"datasette.actor_auth_cookie", "datasette.default_permissions"})


async def actor_from_plugins(datasette, scope) -> dict | None:
    """The actor Datasette's router would give a request of ``scope``: the first a plugin's
    ``actor_from_request`` returns (awaited when it is awaitable), else ``scope["actor"]`` (an ASGI
    wrapper's), else None.

    As ``DatasetteRouter.route_path`` does it (``datasette/app.py``, 0.65.5 and 1.0a41): the hook
    through ``datasette.plugins.pm``, its answer through ``datasette.utils.await_me_maybe``; the
    request's body is never read.
    """
    from datasette.plugins import pm
    from datasette.utils import await_me_maybe
    from datasette.utils.asgi import Request

    async def no_body():
        return {"type": "http.request", "body": b"", "more_body": False}

    request = Request(scope, no_body)
    for actor in pm.hook.actor_from_request(datasette=datasette, request=request):
        actor = await await_me_maybe(actor)
        if actor:
            return actor
    return scope.get("actor") or None


def other_actor_sources() -> bool:
    """Whether a plugin other than Datasette itself implements ``actor_from_request`` (a header set by an
    auth proxy, ``?_auth_token=``, an address): an actor may then come with any request.

    Reads the hook's implementations from ``datasette.plugins.pm`` (pluggy's ``get_hookimpls``; the
    manager Datasette's testing documentation registers plugins on, 0.65.5 and 1.0a41).
    """
    for impl in _actor_from_request().get_hookimpls():  # a loop: the generator in any() took four times as long
        if impl.plugin_name not in DATASETTE_ACTOR_SOURCES:
            return True
    return False


@lru_cache(maxsize=1)
def _actor_from_request():
    """The ``actor_from_request`` hook's caller: one for the manager's life, whose implementations
    follow every plugin registered or unregistered since (asked on every /api/v1 request)."""
    from datasette.plugins import pm

    return pm.hook.actor_from_request


def use_multiprocess_values() -> None:
    """Make metrics created from now on count in ``PROMETHEUS_MULTIPROC_DIR``'s files (prometheus-client 0.26).

    prometheus-client picks its value class once, when ``prometheus_client.values`` is imported
    (``values.ValueClass``): a worker forked from a process that imported it before the variable
    was set would otherwise keep counting in its own memory.
    """
    from prometheus_client import values

    values.ValueClass = values.get_value_class()


def add_to_histogram(child, counts: list[int], total: float) -> None:
    """Add ``counts[i]`` observations to the ``i``-th bucket (non-cumulative, +Inf last) of a histogram's
    labelled ``child``, and ``total`` to its sum: what as many ``observe`` calls would do (prometheus-client 0.26).

    A histogram takes one observation at a time (``observe``); a worker moves a second's worth of counted
    requests at once into its buckets (``_buckets``, ``_sum``; :mod:`qsite.service.metrics.exported`).
    """
    child._sum.inc(total)
    for bucket, n in zip(child._buckets, counts):
        if n:
            bucket.inc(n)
