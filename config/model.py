"""The config model: one YAML file's keys, as frozen pydantic models.

Promises: every key is checked by its model with ``extra="forbid"``, so a typo in a key is
an error naming that key rather than a setting silently ignored; a :class:`Config` is
frozen once made. Relative paths resolve against the folder of the config file
(:attr:`Config.path`), so a config can be moved together with its data.

Relies on :mod:`qsite.config.values` for each value's kind and :mod:`qsite.config.observe` for the
``metrics`` and ``logs`` sections. Reading the file is :mod:`qsite.config.loading`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
)

from qsite.config.observe import LogsConfig, MetricsConfig
from qsite.config.values import (
    Duration,
    Location,
    Regex,
    Tag,
    check_endpoint_url,
    check_rate_limit,
    check_rate_limit_storage,
    check_snapshot_store,
    is_url,
    rate_limit_from_yaml,
)
from qsite.db.urls import public_location


class ConfigError(Exception):
    """A config that cannot be used; the message names the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class SiteExportConfig(_Strict):
    source: Location
    every: Duration = 3600


class RuleConfig(_Strict):
    match: Regex
    tag: Tag


class SourceConfig(_Strict):
    name: Annotated[str, Field(min_length=1)]
    url: Location
    tag: Tag
    rules: list[RuleConfig] = []

    @property
    def public_url(self) -> str:
        """``url`` as it may be stored and shown: no credentials, a file by its name (:func:`qsite.db.urls.public_location`)."""
        return public_location(self.url)


class NewsConfig(_Strict):
    every: Duration = 900
    retention_days: Annotated[int, Field(gt=0)] | None = None
    sources: list[SourceConfig] = []

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[SourceConfig]) -> list[SourceConfig]:
        seen = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"duplicate source name {source.name!r}")
            seen.add(source.name)
        return sources


class ApiConfig(_Strict):
    cache_max_age: Annotated[int, Field(ge=0)] = 300
    rate_limit: Annotated[str, BeforeValidator(rate_limit_from_yaml), AfterValidator(check_rate_limit)] = "120/minute"
    rate_limit_storage: Annotated[str, AfterValidator(check_rate_limit_storage)] = "memory://"
    trusted_proxies: Annotated[int, Field(ge=0)] = 0
    #: ``true``: the scheme of absolute links (https behind a proxy ending TLS) is the
    #: ``X-Forwarded-Proto`` the nearest trusted proxy sent; needs ``trusted_proxies`` of 1 or more.
    #: Only where every trusted proxy sets that header itself, as the shipped ``deploy/nginx.conf``
    #: does: a proxy that appends to ``X-Forwarded-For`` may hand a client's ``X-Forwarded-Proto`` on
    #: as it came (HAProxy's ``option forwardfor``, Varnish's built-in VCL), and any client could
    #: then choose the links a shared cache gives everyone.
    forwarded_proto: bool = False
    #: Worker processes of ``qsite serve``. Left ``null``: one per core the process may run on, or 1 with
    #: a rate limit on and ``rate_limit_storage: memory://`` (the bundled config), whose counts workers
    #: cannot share (more than 1 is then refused).
    workers: Annotated[int, Field(ge=1, le=256)] | None = None
    #: Connections ``qsite serve`` keeps open at once, over all its workers.
    max_connections: Annotated[int, Field(ge=1)] = 1024
    #: Seconds a client has to send a request head (``10``, ``1m``), and an idle keep-alive
    #: connection its next one, before ``qsite serve`` closes the connection (slowloris, silent sockets).
    header_timeout: Annotated[Duration, Field(ge=1, le=300)] = 10
    #: Longest an arbitrary SQL query (Datasette's ?sql= and _where=) may run, in milliseconds.
    sql_time_limit_ms: Annotated[int, Field(ge=10, le=60_000)] = 1000
    #: Most bytes one answer to SQL on the served database may have (Datasette's ?sql=, _where=, table
    #: pages, JSON and CSV): the lengths of its texts and blobs, and 8 a value. A larger answer is refused
    #: with a 400 as its rows are fetched, never built. At least 64 KB, at most 256 MB; each worker may
    #: hold one such answer per SQL thread at once (docs/security.md), and serialises it on its event loop.
    sql_answer_max_bytes: Annotated[int, Field(ge=65_536, le=268_435_456)] = 4_000_000
    #: Bytes of the database file the API's own read connections map into memory (SQLite's
    #: ``mmap_size``; Datasette's connections are left as they are): a page read from the map costs no
    #: system call and no copy, a fifth to a quarter of a search's SQL at a million items. SQLite lowers
    #: it to its build's maximum (2 GB in Python's); ``0`` turns it off. The mapped pages are the
    #: system's page cache, shared and reclaimable, but they count in the worker's RSS (docs/operating.md).
    mmap_size: Annotated[int, Field(ge=0, le=1 << 40)] = 1 << 31
    #: GET /api/v1/health answers 503 when the news is older than this (``30m``, ``6h``, ``2d`` or seconds):
    #: the time since the last news ingest run that did not fail, else (no runs) since the data last
    #: changed. Each kind the config ingests is judged against its own bound. A day: an instance whose ingest has stopped for a day leaves the rotation, while a
    #: replica following snapshots published once a day stays in it.
    health_max_data_age: Duration = 86400
    #: The site export's own bound for GET /api/v1/health (the time since its last run that did not
    #: fail); unset: ``health_max_data_age``. News is judged against ``health_max_data_age``.
    health_max_site_age: Duration | None = None
    #: Bits of an IPv6 address that make one client for fair use and the SQL queue: one subscriber
    #: usually holds a whole /64, so counting single addresses would give it unlimited clients.
    #: 128 counts every address on its own.
    ipv6_prefix: Annotated[int, Field(ge=32, le=128)] = 64
    #: The address the public reaches the API at (``https://data.example.org``, a path allowed):
    #: the absolute links of the JSON Feed and the OpenAPI document are built from it (the Atom feed's and
    #: ``next`` links are relative).
    #: Left ``null``: from the request's ``Host``, and those answers then carry ``Vary: Host``.
    public_url: str | None = None
    #: Query parameters that carry a credential for an actor plugin (datasette-auth-tokens'
    #: ``?_auth_token=``): /api/v1 takes them as Datasette's pages do, leaving them to the plugin,
    #: where any other unknown parameter is refused.
    credential_parameters: list[Annotated[str, Field(min_length=1, max_length=100)]] = ["_auth_token"]

    @field_validator("public_url")
    @classmethod
    def _absolute_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment or "@" in parts.netloc:
            raise ValueError(f"must be an http:// or https:// URL without query or credentials (got {value!r})")
        return value.rstrip("/")

    @field_validator("forwarded_proto")
    @classmethod
    def _proxy_in_front(cls, value: bool, info) -> bool:
        if value and info.data.get("trusted_proxies", 0) < 1:
            raise ValueError("needs api.trusted_proxies of 1 or more: with no proxy in front, the header is the client's own")
        return value

    @property
    def counts_in_process_memory(self) -> bool:
        """True when fair use is counted in each process's own memory (``memory://``)."""
        return counts_in_process_memory(self.rate_limit, self.rate_limit_storage)


def counts_in_process_memory(rate_limit: str, storage: str) -> bool:
    return rate_limit.strip().lower() != "off" and storage.startswith("memory://")


def workers_problem(workers: int | None, rate_limit: str, storage: str) -> str | None:
    """Why ``workers`` processes cannot serve with this fair-use setting, or None.

    ``memory://`` counts in one process's memory: N workers would each keep
    their own count, and every client's fair-use budget would be N times the
    limit. That combination is refused rather than silently multiplied.
    """
    if workers is not None and workers > 1 and counts_in_process_memory(rate_limit, storage):
        return (
            f"{workers} worker processes cannot share api.rate_limit_storage {storage} (each would count "
            f"its own {rate_limit}, multiplying every client's budget); use a redis:// storage, "
            'api.workers: 1, or api.rate_limit: "off"'
        )
    return None


def serving_workers(api: ApiConfig, requested: int | None = None) -> int:
    """The number of worker processes ``qsite serve`` starts.

    ``requested`` (``--workers``) overrides ``api.workers``. Unset, it is the
    number of cores this process may run on, or 1 where fair use is counted in
    process memory (``memory://``), which workers cannot share.

    :raises ConfigError: for more than one worker with ``memory://``.
    """
    workers = requested if requested is not None else api.workers
    problem = workers_problem(workers, api.rate_limit, api.rate_limit_storage)
    if problem:
        raise ConfigError(f"{'--workers' if requested is not None else 'api.workers'}: {problem}")
    if workers is not None:
        return workers
    return 1 if api.counts_in_process_memory else len(os.sched_getaffinity(0))



class SnapshotsConfig(_Strict):
    """Where ``qsite publish`` puts snapshots and ``qsite serve --follow`` finds them (docs/deploy.md)."""

    #: A folder (relative to the config file), ``file:///…`` or ``s3://bucket/prefix``; unset: the
    #: scheduler does not publish, and ``qsite publish`` uses the ``snapshots`` folder beside the database.
    store: Annotated[str, Field(min_length=1), AfterValidator(check_snapshot_store)] | None = None
    #: For S3-compatible stores (SeaweedFS, MinIO, R2); credentials come from the AWS_* variables.
    endpoint_url: Annotated[str | None, AfterValidator(check_endpoint_url)] = None
    #: Published snapshots kept besides the one ``latest.json`` names.
    keep: Annotated[int, Field(ge=0)] = 10
    #: How often a following replica reads ``latest.json``.
    poll: Duration = 30

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_needs_s3(cls, value, info):
        store = info.data.get("store")
        if value is not None and not (store or "").startswith("s3://"):
            raise ValueError("is only for an s3:// store")
        return value


class Config(_Strict):
    database: str = "site.db"
    site_export: SiteExportConfig
    news: NewsConfig = NewsConfig()
    api: ApiConfig = ApiConfig()
    snapshots: SnapshotsConfig = SnapshotsConfig()
    metrics: MetricsConfig = MetricsConfig()
    logs: LogsConfig = LogsConfig()
    #: Where the config came from; not a key of the file.
    path: Path = Field(default=Path("."), exclude=True)

    @property
    def database_path(self) -> Path:
        return resolve(self.path.parent, self.database)

    @property
    def site_export_source(self) -> str:
        return resolve_source(self.path.parent, self.site_export.source)

    @property
    def site_export_public(self) -> str:
        """The export's location as it may be stored and shown (:func:`qsite.db.urls.public_location`)."""
        return public_location(self.site_export.source)

    def source_location(self, source: SourceConfig) -> str:
        return resolve_source(self.path.parent, source.url)

    @property
    def snapshot_store(self) -> str:
        """The snapshot store as a URL: ``s3://…``, or ``file:///…`` for a folder (default: ``snapshots`` beside the database)."""
        store = self.snapshots.store
        if store is None:
            return (self.database_path.parent / "snapshots").as_uri()
        if store.startswith(("s3://", "file:///")):
            return store
        return resolve(self.path.parent, store).as_uri()


def resolve(base: Path, value: str | os.PathLike) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def resolve_source(base: Path, value: str) -> str:
    """An http(s) URL stays as it is; a path resolves against ``base``."""
    return value if is_url(value) else str(resolve(base, value))
