"""Loading and validating the qsite YAML configuration.

One YAML file configures everything: the database, the site export, the news
sources and the API. Validation is done by pydantic models with
``extra="forbid"`` so that a typo in a key is an error naming that key rather
than a setting silently ignored. Relative paths resolve against the folder of
the config file, so a config can be moved together with its data.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import limits
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from config.spelling import canonical_tag, did_you_mean
from db.model import TAGS
from db.redact import redact_text, redact_url
from db.urls import public_location

from config.environment import expand_environment
from config.observe import LogsConfig, MetricsConfig

#: The bundled default config, pointing at the bundled samples.
DEFAULT_CONFIG = Path(__file__).parent / "qsite.yml"


_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ConfigError(Exception):
    """A config that cannot be used; the message names the file and the key."""


_DURATION_MESSAGE = "must be a duration such as 30s, 15m, 1h or 1d, or a whole number of seconds (at least 1)"


def parse_duration(value: object) -> int:
    """Turn ``30s``, ``15m``, ``1h`` or ``1d`` (or a whole number of seconds) into seconds.

    Fractions are refused rather than rounded: ``0.5`` would become a zero interval.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"{_DURATION_MESSAGE} (got {value!r})")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]


def _compile_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"is not a valid regular expression: {exc}") from None
    return value


def _check_location(value: str) -> str:
    """An http(s) URL must be one httpx can request; anything else is a path."""
    if not is_url(value):
        return value
    import httpx  # here, not at the top: every qsite command reads the config, few need httpx (0.05 s)

    try:
        url = httpx.URL(value)
        host, port = url.host, url.port  # the host's IDNA decoding happens here
    except (httpx.InvalidURL, ValueError) as exc:  # IDNA errors are ValueErrors
        raise ValueError(f"is not a valid URL: {redact_text(str(exc))} (got {redact_url(value)!r})") from None
    if not host:
        raise ValueError(f"is not a valid URL: no host (got {redact_url(value)!r})")
    if port is not None and not 0 < port <= 65535:
        raise ValueError(f"is not a valid URL: port {port} is not 1-65535 (got {redact_url(value)!r})")
    return value


Duration = Annotated[int, BeforeValidator(parse_duration)]
Location = Annotated[str, Field(min_length=1), AfterValidator(_check_location)]


Tag = Annotated[Literal[TAGS], BeforeValidator(canonical_tag)]
Regex = Annotated[str, AfterValidator(_compile_regex)]


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
        """``url`` as it may be stored and shown: no credentials, a file by its name (:func:`db.urls.public_location`)."""
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


def parse_rate_limit(value: str) -> limits.RateLimitItem | None:
    """``off`` -> None, else exactly one limits-style limit such as ``120/minute``."""
    if value.strip().lower() == "off":
        return None
    try:
        items = list(limits.parse_many(value))
    except ValueError:
        items = []
    if len(items) != 1 or items[0].amount < 1:
        raise ValueError(f"must be one limit such as 120/minute or '10 per 2 seconds', or off (got {value!r})")
    return items[0]


def _check_rate_limit(value: str) -> str:
    parse_rate_limit(value)
    return value


def _rate_limit_from_yaml(value: object) -> object:
    """YAML's false (a bare ``off``, ``false`` or ``no``) as ``off``; YAML's true (``on``, ``yes``) names no limit: refused.

    YAML 1.1, which PyYAML reads, takes a bare ``off`` for the boolean false: without
    this, ``rate_limit: off`` unquoted would be refused as "not a valid string".
    """
    if value is False:
        return "off"
    if value is True:
        raise ValueError("must be one limit such as 120/minute or '10 per 2 seconds', or off (got true: a bare on, yes or true)")
    return value


def _check_rate_limit_storage(value: str) -> str:
    # the storages whose client libraries qsite installs (limits[redis])
    if not value.startswith(("memory://", "redis://", "rediss://", "redis+unix://")):
        raise ValueError(f"must be memory:// or a redis://host:port/db URL (got {redact_url(value)!r})")
    return value


class ApiConfig(_Strict):
    cache_max_age: Annotated[int, Field(ge=0)] = 300
    rate_limit: Annotated[str, BeforeValidator(_rate_limit_from_yaml), AfterValidator(_check_rate_limit)] = "120/minute"
    rate_limit_storage: Annotated[str, AfterValidator(_check_rate_limit_storage)] = "memory://"
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


def _check_snapshot_store(value: str) -> str:
    if "://" in value and not value.startswith(("file:///", "s3://")):
        raise ValueError(f"must be a folder, a file:///absolute/path or s3://bucket/prefix URL (got {value!r})")
    if value.startswith("s3://") and not value[len("s3://") :].split("/", 1)[0]:
        raise ValueError(f"must name a bucket: s3://bucket/prefix (got {value!r})")
    return value


def _check_endpoint_url(value: str | None) -> str | None:
    if value is not None and not is_url(value):
        raise ValueError(f"must be an http:// or https:// URL such as http://127.0.0.1:8333 (got {value!r})")
    return _check_location(value) if value else value


class SnapshotsConfig(_Strict):
    """Where ``qsite publish`` puts snapshots and ``qsite serve --follow`` finds them (docs/deploy.md)."""

    #: A folder (relative to the config file), ``file:///…`` or ``s3://bucket/prefix``; unset: the
    #: scheduler does not publish, and ``qsite publish`` uses the ``snapshots`` folder beside the database.
    store: Annotated[str, Field(min_length=1), AfterValidator(_check_snapshot_store)] | None = None
    #: For S3-compatible stores (SeaweedFS, MinIO, R2); credentials come from the AWS_* variables.
    endpoint_url: Annotated[str | None, AfterValidator(_check_endpoint_url)] = None
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
        """The export's location as it may be stored and shown (:func:`db.urls.public_location`)."""
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


def is_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


def resolve(base: Path, value: str | os.PathLike) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (base / path).resolve()


def resolve_source(base: Path, value: str) -> str:
    """An http(s) URL stays as it is; a path resolves against ``base``."""
    return value if is_url(value) else str(resolve(base, value))


def _location(loc: tuple) -> str:
    text = ""
    for part in loc:
        # pydantic adds the name of the matching union member / literal; not a key
        if isinstance(part, str) and (part.startswith(("function-", "literal[")) or part in ("int", "str", "float")):
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def format_validation_error(error: ValidationError) -> list[str]:
    """One line per problem: ``key.path: message``."""
    lines = []
    for problem in error.errors():
        where = _location(problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown key" + did_you_mean(Config, problem["loc"])
        elif problem["type"] == "missing":
            message = "required key is missing"
        elif problem["type"] == "literal_error":
            message = f"must be one of {', '.join(TAGS)} (got {problem.get('input')!r})"
        lines.append(f"{where}: {message}")
    return lines


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, instead of keeping the last."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_lines: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # keys merged in by `<<: *base` may be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first_lines:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r} at line {line} (first at line {first_lines[key]})", key_node.start_mark
                        )
                    first_lines[key] = line
                except TypeError:
                    continue  # an unhashable key; SafeLoader reports that itself
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | os.PathLike | None = None, database: str | None = None) -> Config:
    """Read and validate the config at ``path`` (default: the bundled one).

    :param database: overrides the ``database`` key (``--db`` / ``QSITE_DB``).
    :raises ConfigError: with the file's name and every bad key in the message.
    """
    config_path = Path(path).expanduser().resolve() if path else DEFAULT_CONFIG
    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_path}: cannot read config file: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{config_path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{config_path}: must be a YAML mapping of keys such as database, site_export, news, api")
    if "path" in data:  # a model field for bookkeeping, never a key of the file
        raise ConfigError(f"{config_path}: invalid config\n  path: unknown key")
    data, unset = expand_environment(data)
    if unset:
        raise ConfigError(f"{config_path}: invalid config\n  " + "\n  ".join(unset))
    try:
        config = Config(**data, path=config_path)
    except ValidationError as exc:
        problems = "\n  ".join(format_validation_error(exc))
        raise ConfigError(f"{config_path}: invalid config\n  {problems}") from None
    if database:
        config = config.model_copy(update={"database": str(Path(database).expanduser().resolve())})
    return config
