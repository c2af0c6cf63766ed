"""The serving state of one Datasette instance, derived in one place: :func:`serving_api`.

Every holder of qsite's state for an instance (the ASGI fast path, the
/api/v1 route, a following replica's swap) gets it from here; nothing is set
on the Datasette object. The :class:`~qsite.service.datasette.handler.Api` is derived
from the qsite config and the database now served (a follower's current
snapshot): :func:`build_api` makes it, :func:`serving_api` keeps it while that
database is served and makes a new one after a swap. A build that fails (the
config, ``datasette.yaml`` or the database is not right) answers its request
with a 503 and is not kept: the next request builds again, so a database that
appears later, or a passing fault, needs no restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import weakref
from dataclasses import dataclass, field
from functools import lru_cache

from qsite.config import ConfigError, parse_rate_limit

from qsite.service.api.data_versions import DataVersions
from qsite.service.api.endpoints import index_document
from qsite.service.api.health import judged_kinds
from qsite.service.api.reader import Reader
from qsite.service.datasette.access import Access
from qsite.service.datasette.handler import Api
from qsite.service.datasette.metadata import MetadataError, canned_sql
from qsite.service.describe.docs import DocsPage
from qsite.service.describe.openapi import build_documents
from qsite.service.http.settings import qsite_config
from qsite.service.http.ratelimit import DEFAULT_IPV6_PREFIX
from qsite.service.http.sql_budget import SqlBudget
from qsite.service.i18n import Catalogs
from qsite.service.replica.follow import describe

log = logging.getLogger("qsite.service")


@dataclass
class Instance:
    """What the plugin holds for one Datasette instance.

    :param follower: the :class:`~qsite.service.replica.follow.Follower` of a replica (``qsite serve --follow``), else None.
    """

    follower: object = None
    api: Api | None = None
    #: The snapshot ``api`` was built over (None for a live database).
    built_for: object = None
    budget: SqlBudget | None = None
    last_error: str | None = None
    #: Datasette's startup hooks have run (the plugin's ``startup``).
    started: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


_INSTANCES: "weakref.WeakKeyDictionary[object, Instance]" = weakref.WeakKeyDictionary()


def instance(datasette) -> Instance:
    """The :class:`Instance` of ``datasette``, made on first use (kept as long as the Datasette object lives)."""
    found = _INSTANCES.get(datasette)
    if found is None:
        found = _INSTANCES[datasette] = Instance()
    return found


@lru_cache(maxsize=4)
def interface_description(max_age: int) -> tuple[Catalogs, dict[str, dict]]:
    """The catalogs and the OpenAPI document in every language, read and built once per process.

    A following replica makes a new :class:`Api` at every snapshot swap; the
    description does not change with the data, so the swap does not pay for it again.
    """
    catalogs = Catalogs()
    return catalogs, build_documents(max_age, catalogs)


async def build_api(datasette, follower=None) -> Api:
    """The :class:`Api` over the database ``datasette`` serves now, from the qsite config.

    A config or ``datasette.yaml`` problem does not stop Datasette: the Api is
    made ``broken`` (logged once per distinct reason by :func:`serving_api`),
    and /api/v1 answers 503 without saying more to clients.
    """
    broken = None
    execute_fn = versions = sql = rate_limit = reader = access = None
    max_age = 0
    max_data_age = 86400
    public_url = None
    credential_parameters: frozenset[bytes] = frozenset()
    judged = None
    try:
        config = qsite_config(datasette)
        public_url = config.api.public_url
        credential_parameters = frozenset(name.encode() for name in config.api.credential_parameters)
        max_age = config.api.cache_max_age
        max_data_age = config.api.health_max_data_age
        judged = judged_kinds(config)
        limit = parse_rate_limit(config.api.rate_limit)
        rate_limit = (limit.amount, limit.get_expiry()) if limit else None
        name = config.database_path.stem
        database = datasette.databases.get(name)
        if database is None:
            raise ConfigError(f"database {name!r} ({config.database_path}) is not served by this Datasette")
        sql = await canned_sql(datasette, name)
        access = await Access.for_instance(datasette, name)
        reader = Reader(database.path, time_limit_ms=config.api.sql_time_limit_ms, mmap_size=config.api.mmap_size)
        execute_fn = reader.inline
        # data_versions (four rows) inline too: never queued behind a news search on the threads; in a
        # read transaction of its own, so the builds after it see what it found changed
        versions = DataVersions(reader.fresh)
    except (ConfigError, MetadataError, OSError) as exc:
        broken = str(exc)
        if reader is not None:
            reader.close()
            reader = None
    catalogs, openapi = interface_description(max_age)
    serving = getattr(follower, "serving", None)
    documents = {"index": index_document(following=follower is not None), "openapi": openapi}
    if serving is not None:
        documents["snapshot"] = describe(serving)
        documents["index"]["snapshot"] = documents["snapshot"]["file"]
    docs_page = DocsPage(datasette, catalogs, rate_limit, max_age)
    return Api(
        execute_fn, versions, sql, max_age, documents, docs_page=docs_page, broken=broken, reader=reader, access=access,
        max_data_age=max_data_age, fresh_fn=reader.fresh if reader is not None else None, cursor_key=cursor_key(datasette),
        public_url=public_url, credential_parameters=credential_parameters,
        judged=judged, heartbeat_fn=(lambda: follower.latest and follower.latest.ingests) if follower is not None else None,
    )


def cursor_key(datasette) -> bytes:
    """The key that seals the counts ``next`` links carry (:mod:`qsite.service.api.cursors`), from the instance's secret.

    Derived through Datasette's public signer (``datasette.sign``, deterministic
    for one secret): workers and replicas given one secret (``DATASETTE_SECRET``,
    which ``qsite serve`` shares among its own workers) take each other's
    cursors' counts; a cursor from elsewhere is only counted again.
    """
    return hashlib.blake2b(datasette.sign("cursor counts", namespace="qsite").encode(), digest_size=32).digest()


def current_api(held: Instance) -> Api | None:
    """The :class:`Api` ``held`` keeps, if it was built for what is served now; else None (build one: :func:`serving_api`).

    No ``await``: the request path asks this first, as most requests find the one kept.
    """
    if held.api is not None and held.built_for is getattr(held.follower, "serving", None):
        return held.api
    return None


async def serving_api(datasette) -> Api:
    """The :class:`Api` for what ``datasette`` serves now: the one kept, or a new one (see the module docstring)."""
    held = instance(datasette)
    kept = current_api(held)
    if kept is not None:
        return kept
    async with held.lock:  # one build at a time: concurrent first requests share it
        kept = current_api(held)
        if kept is not None:  # built while this request waited for the lock
            return kept
        serving = getattr(held.follower, "serving", None)
        api = await build_api(datasette, held.follower)
        if api.broken is not None:
            if api.broken != held.last_error:
                log.error("/api/v1 cannot serve data: %s", api.broken)
            held.last_error = api.broken
            return api  # not kept: the next request tries again
        if held.last_error is not None:
            log.info("/api/v1 serves data again")
            held.last_error = None
        if serving is not None:
            serving.closers.append(api.close)  # closed when the follower retires that snapshot
        held.api, held.built_for = api, serving
        return api


def held_api(datasette) -> Api | None:
    """The :class:`Api` kept now, if any (None before the first request, or after a failed build)."""
    return instance(datasette).api


def sql_budget(datasette) -> SqlBudget:
    """The instance's :class:`SqlBudget` for arbitrary SQL, from ``api.trusted_proxies`` and Datasette's time limit."""
    held = instance(datasette)
    if held.budget is None:
        try:
            api = qsite_config(datasette).api
            trusted_proxies, ipv6_prefix = api.trusted_proxies, api.ipv6_prefix
        except ConfigError:  # logged by serving_api
            trusted_proxies, ipv6_prefix = 0, DEFAULT_IPV6_PREFIX
        held.budget = SqlBudget(datasette.setting("sql_time_limit_ms"), trusted_proxies, ipv6_prefix)
    return held.budget
