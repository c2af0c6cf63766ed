"""The generated parts of the reference pages, written into them by cog.

Each function returns Markdown for a page's ``[[[cog ... ]]]`` block
(``make cog`` rewrites them; ``tests/test_docs_site.py`` runs ``cog --check``,
so a page that no longer matches the code fails the tests). They read the
code itself, never a copy of it:

- :func:`config_reference`: every key of the config model (:mod:`config`), its
  type (with its bounds), default and environment variable, described by the model's ``#:``
  comments or, for fields without one, by :data:`DESCRIPTIONS` below;
- :func:`cli_reference`: the ``--help`` of every command of the click app
  (:mod:`qsite.cli`), as sqlite-utils' ``docs/cli-reference.rst`` does;
- :func:`api_endpoints` and :func:`api_parameters`: the paths and parameters of
  the OpenAPI document as the service builds it (:mod:`qsite.service.describe.openapi`);
- :func:`runtime_packages`: the packages qsite depends on, as ``uv.lock`` records them.
"""

from __future__ import annotations

import re
import sqlite3
import types
import typing
from pathlib import Path
from typing import Literal, get_args, get_origin

import annotated_types
import click
from click.testing import CliRunner
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from sphinx.pycode import ModuleAnalyzer

#: Descriptions of the config keys the model gives no ``#:`` comment; a key with
#: neither stops the generation with its name (so a new key cannot go undocumented).
DESCRIPTIONS = {
    "database": "The SQLite file. Left out: `site.db` beside the config file.",
    "site_export": "The site's JSON export (format version 1, see [the export format](ingestion.md#the-site-export)).",
    "site_export.source": "A file path or an http(s) URL of the export.",
    "site_export.every": "How often `qsite schedule` ingests the export.",
    "news": "The news feeds.",
    "news.every": "How often `qsite schedule` sweeps the feeds; also the unit of a failing source's backoff.",
    "news.retention_days": "Items published more than this many days ago are deleted after each sweep and never "
    "inserted; `null` keeps everything.",
    "news.sources": "The feeds, in order of precedence: the same story in two feeds is kept by the one listed first.",
    "news.sources[].name": "Unique; shown as each item's `source`.",
    "news.sources[].url": "An http(s) URL, or a path relative to the config file.",
    "news.sources[].tag": "The items' tag when no rule matches.",
    "news.sources[].rules": "Tagging rules; the first that matches wins, else `tag`.",
    "news.sources[].rules[].match": "A Python regular expression searched in the title, the summary and the entry's categories.",
    "news.sources[].rules[].tag": "The tag of an item the expression matches.",
    "api": "The `/api/v1` service and Datasette.",
    "api.cache_max_age": "Seconds, sent as `Cache-Control: public, max-age=...` on every 200.",
    "api.rate_limit": "Fair use per client: one limits-style limit (`120/minute`, `10 per 2 seconds`), or `\"off\"` "
    "(a bare `off`, which YAML reads as false, is off too). Every page under `qsite serve`; only `/api/v1` when qsite "
    "is a plugin in your own Datasette.",
    "api.rate_limit_storage": "Where the fair-use counts live: `memory://` (one process) or a `redis://`, `rediss://`, "
    "`redis+unix://` URL shared by every worker and replica.",
    "api.trusted_proxies": "Proxies in front that append to `X-Forwarded-For`: the client is the entry this many from the end; 0 believes no such header.",
    "snapshots": "Published snapshots (see [snapshots and followers](deploy.md)).",
    "metrics": "`/metrics` of `qsite serve` (see [monitoring](operating.md#monitoring)).",
    "logs": "The log lines of every command (see [logging](operating.md#logging)).",
}

#: Options of the command line that override a config key: (a flag, the key).
OPTION_KEYS = (("--db", "database"), ("--workers", "api.workers"))


def _cell(text: object) -> str:
    """``text`` fit for one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _markdown(rest: str) -> str:
    """A ``#:`` comment's reST as Markdown: ``:func:`name``` and ````code```` become `code`."""
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", rest).replace("``", "`")


def _attribute_docs() -> dict[tuple[str, str], str]:
    """``{(class name, field name): its #: comment}`` of the config model, read as autodoc reads them."""
    docs = {}
    for module in ("qsite.config.model", "qsite.config.observe"):
        analyzer = ModuleAnalyzer.for_module(module)
        docs.update(analyzer.find_attr_docs())
    return {key: _markdown(" ".join(line.strip() for line in lines if line.strip())) for key, lines in docs.items()}


def _bounds(metadata: list) -> tuple[int | None, int | None]:
    """The lowest and highest value a field's ``ge``/``gt``/``le``/``lt`` allow (whole numbers: ``gt=0`` is at least 1)."""
    low = high = None
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = item.ge
        elif isinstance(item, annotated_types.Gt):
            low = item.gt + 1
        elif isinstance(item, annotated_types.Le):
            high = item.le
        elif isinstance(item, annotated_types.Lt):
            high = item.lt - 1
    return low, high


def _range_text(low, high, show=str) -> str:
    """`` 1 to 256``, `` >= 0`` or nothing, each bound written by ``show``."""
    if low is not None and high is not None:
        return f" {show(low)} to {show(high)}"
    if low is not None:
        return f" >= {show(low)}"
    if high is not None:
        return f" <= {show(high)}"
    return ""


def _constraint(metadata: list) -> str:
    if any(isinstance(item, annotated_types.MinLen) and item.min_length for item in metadata):
        return "non-empty "
    return _range_text(*_bounds(metadata))


def _flatten(metadata) -> list:
    """Annotated metadata with each ``Field(...)`` inside it (an ``Annotated[int, Field(ge=1)] | None``) opened up."""
    flat = []
    for item in metadata:
        flat.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    return flat


def _validator_names(metadata: list) -> set[str]:
    return {getattr(getattr(item, "func", None), "__name__", "") for item in metadata}


def _type_name(annotation, metadata: list) -> str:
    """A reader's name for a field's type, from its annotation and its Annotated metadata."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [member for member in get_args(annotation) if member is not type(None)]
        inner = " or ".join(_type_name(member, metadata) for member in members)
        return f"{inner} or null" if len(members) < len(get_args(annotation)) else inner
    if origin is typing.Annotated:
        base, *extra = get_args(annotation)
        return _type_name(base, [*metadata, *_flatten(extra)])
    if origin is Literal:
        return "one of " + ", ".join(f"`{value}`" for value in get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation)
        return "list of mappings" if isinstance(item, type) and issubclass(item, BaseModel) else "list"
    validators = _validator_names(metadata)
    if "parse_duration" in validators:
        return "[duration](#values)" + _range_text(*_bounds(metadata), show=lambda seconds: f"`{_duration_text(seconds)}`")
    if "_check_location" in validators:
        return "path or http(s) URL"
    if "_compile_regex" in validators:
        return "regular expression"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    name = {int: "integer", str: "string", bool: "boolean", float: "number"}.get(annotation, getattr(annotation, "__name__", str(annotation)))
    constraint = _constraint(metadata)
    return f"{constraint}{name}" if constraint.endswith(" ") else f"{name}{constraint}"


def _duration_text(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(its keys' defaults)"
    if value is None:
        return "`null`"
    if isinstance(value, bool):  # as YAML writes it
        return f"`{str(value).lower()}`"
    if value == []:
        return "`[]`"
    if "parse_duration" in _validator_names(field.metadata) and isinstance(value, int):
        return f"`{_duration_text(value)}`"
    return f"`{value}`"


def _environment(key: str) -> str:
    """The environment variable (through its command-line option) that overrides ``key``, or empty."""
    from qsite.cli import cli

    for flag, option_key in OPTION_KEYS:
        if option_key == key:
            option = _find_option(cli, flag)
            if option is None:
                raise LookupError(f"docs/_generate.py: OPTION_KEYS names {flag}, which no qsite command has")
            return f"`{option.envvar}` (`{flag}`)" if option.envvar else f"(`{flag}`)"
    return ""


def _find_option(command: click.Command, flag: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and flag in param.opts:
            return param
    for sub in getattr(command, "commands", {}).values():
        found = _find_option(sub, flag)
        if found is not None:
            return found
    return None


def _model_fields(model: type[BaseModel]):
    return [(name, field) for name, field in model.model_fields.items() if not field.exclude]


def _nested_model(annotation) -> tuple[type[BaseModel] | None, str]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, "[]"
    return None, ""


def config_rows(model: type[BaseModel] | None = None, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """``(key, type, default, environment variable, description)`` of every key of the config file."""
    if model is None:
        from qsite.config import Config

        model = Config
    docs = _attribute_docs()
    rows = []
    for name, field in _model_fields(model):
        key = f"{prefix}{name}"
        description = docs.get((model.__name__, name)) or DESCRIPTIONS.get(key)
        if not description:
            raise LookupError(
                f"config key {key} has no description: give {model.__name__}.{name} a #: comment in config/, "
                "or add it to DESCRIPTIONS in docs/_generate.py"
            )
        type_name = _type_name(field.annotation, list(field.metadata))
        rows.append((key, type_name, _default(field), _environment(key), description))
        nested, suffix = _nested_model(field.annotation)
        if nested is not None:
            rows.extend(config_rows(nested, f"{key}{suffix}."))
    return rows


def config_reference() -> str:
    """The table of every config key."""
    lines = ["| key | type | default | environment | description |", "|---|---|---|---|---|"]
    for key, type_name, default, environment, description in config_rows():
        lines.append(f"| `{key}` | {_cell(type_name)} | {_cell(default)} | {_cell(environment)} | {_cell(description)} |")
    return "\n".join(lines) + "\n"


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    """Every command of the app, depth first, as (its words after ``qsite``, the command)."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from _commands(command.commands[name], (*path, name))


def cli_reference() -> str:
    """A section per command: its ``--help``, as a terminal 80 columns wide shows it."""
    from qsite.cli import cli

    sections = []
    for path, _command in _commands(cli):
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="qsite", terminal_width=80)
        if result.exit_code != 0:
            raise RuntimeError(f"qsite {' '.join(path)} --help failed: {result.output}")
        title = " ".join(("qsite", *path))
        sections.append(f"### {title}\n\n```text\n$ {title} --help\n{result.output.rstrip()}\n```\n")
    return "\n".join(sections)


def _document() -> dict:
    from qsite.service.describe.openapi import build_document

    return build_document(300)


def _parameter(document: dict, ref: dict) -> dict:
    return document["components"]["parameters"][ref["$ref"].rsplit("/", 1)[1]]


def _resolve(document: dict, schema: dict) -> dict:
    """``schema``, or the component schema its ``$ref`` names."""
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _any_case(schema: dict, values: list) -> bool:
    """Whether ``schema`` is a string pattern that accepts each of ``values`` in any letter case."""
    pattern = schema.get("pattern")
    return bool(pattern) and all(
        re.fullmatch(pattern, spelling) for value in values for spelling in (value.lower(), value.upper(), value.swapcase())
    )


def _schema_text(schema: dict, document: dict) -> str:
    """A reader's description of a parameter's value, from its schema (``$ref`` and ``anyOf`` resolved)."""
    schema = {**_resolve(document, schema), **{key: value for key, value in schema.items() if key != "$ref"}}
    if schema.get("type") == "array":
        return "repeatable; each " + _schema_text(schema["items"], document)
    if "anyOf" in schema:
        # OneOf (service/api/kinds.py): the enum, or the same words in any letter case.
        members = [_resolve(document, member) for member in schema["anyOf"]]
        values = [value for member in members for value in member.get("enum", ())]
        any_cases = [member for member in members if "enum" not in member and values and _any_case(member, values)]
        others = [member for member in members if "enum" not in member and member not in any_cases]
        parts = []
        if values:
            any_case = bool(any_cases)
            parts.append("one of " + ", ".join(f"`{value}`" for value in values) + (" (any letter case)" if any_case else ""))
        parts.extend(_schema_text(member, document) for member in others)
        text = " or ".join(parts)
    elif "enum" in schema:
        text = "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    elif schema.get("format") == "date-time":
        text = "RFC 3339 date-time"
    else:
        text = schema.get("type", "")
        if "minimum" in schema and "maximum" in schema:
            text += f" {schema['minimum']} to {schema['maximum']}"
        if "maxLength" in schema:
            text += f", at most {schema['maxLength']} characters"
    if not text:
        raise ValueError(f"docs/_generate.py cannot describe the parameter schema {schema}: teach _schema_text its form")
    if "default" in schema:
        text += f"; default `{schema['default']}`"
    return text


def api_endpoints() -> str:
    """The endpoints of the OpenAPI document: path, what it answers, its parameters."""
    document = _document()
    lines = ["| path | answers | parameters |", "|---|---|---|"]
    for path, item in document["paths"].items():
        get = item["get"]
        names = [_parameter(document, ref)["name"] for ref in (*item.get("parameters", ()), *get["parameters"])]
        params = ", ".join(f"`{name}`" for name in names) or "none"
        lines.append(f"| `{path}` | {_cell(get['summary'])} | {params} |")
    return "\n".join(lines) + "\n"


def api_parameters() -> str:
    """Every parameter of the OpenAPI document, with the endpoints that take it."""
    document = _document()
    lines = ["| parameter | endpoints | value | description |", "|---|---|---|---|"]
    for key, param in document["components"]["parameters"].items():
        ref = f"#/components/parameters/{key}"
        paths = [
            path
            for path, item in document["paths"].items()
            if any(entry["$ref"] == ref for entry in (*item.get("parameters", ()), *item["get"]["parameters"]))
        ]
        where = "path" if param["in"] == "path" else "query"
        lines.append(
            f"| `{param['name']}` ({where}) | {', '.join(f'`{path}`' for path in paths)} | "
            f"{_cell(_schema_text(param['schema'], document))} | {_cell(param.get('description', ''))} |"
        )
    return "\n".join(lines) + "\n"


def endpoint_permissions() -> str:
    """Each /api/v1 endpoint and the Datasette permissions it checks (:func:`qsite.service.datasette.access.resources`)."""
    from qsite.service.api.endpoints import ENDPOINTS
    from qsite.service.datasette.access import resources
    from qsite.service.datasette.metadata import configured_queries

    known = frozenset(configured_queries())
    lines = ["| endpoint | checks |", "|---|---|"]
    for endpoint in ENDPOINTS.values():
        checks = []
        for action, name in resources(endpoint, known):
            checks.append(f"`{action}` on `{name}`" if name else f"`{action}` (the whole database)")
        if not checks:
            text = "nothing: it reads no data"
        elif all(action == "view-query" for action, _name in resources(endpoint, known)):
            text = "`view-query` on " + ", ".join(f"`{name}`" for _action, name in resources(endpoint, known))
        else:
            text = ", ".join(checks)
        lines.append(f"| `{endpoint.url}` | {text} |")
        if not endpoint.queries and endpoint.build is not None:
            raise LookupError(f"endpoint {endpoint.name} builds from data but names no canned query")
    return "\n".join(lines) + "\n"


def _schema():
    """An empty database in memory as the migrations make it."""
    import sqlite_utils

    from qsite.db.migrations import migrations

    database = sqlite_utils.Database(memory=True)
    migrations.apply(database)
    return database


def news_tables() -> list[str]:
    """The tables that hold news items or something of them (text, index terms, ids, counts): every ``news*`` table
    as the migrations make them, FTS tables and their shadow tables included."""
    return sorted(name for name in _schema().table_names() if name == "news" or name.startswith("news_"))


def tables_read(sql: str) -> set[str]:
    """The tables a query reads, as SQLite's authorizer reports them when it prepares the query."""
    database = _schema()
    read: set[str] = set()

    def authorizer(action, table, _column, _database, _trigger):
        if action == sqlite3.SQLITE_READ and table:
            read.add(table)
        return sqlite3.SQLITE_OK

    database.conn.set_authorizer(authorizer)
    database.conn.execute("explain " + sql, dict.fromkeys(re.findall(r"(?<!:):(\w+)", sql)))
    return read


def news_queries() -> list[str]:
    """The canned queries that read one of :func:`news_tables`."""
    from qsite.service.datasette.metadata import configured_queries

    tables = set(news_tables())
    return [name for name, query in configured_queries().items() if tables & tables_read(query["sql"])]


#: Who the permission examples of docs/deploy.md let in.
EDITOR = "{id: editor}"


def news_private_example() -> str:
    """docs/deploy.md's example that keeps the news to signed-in editors, from the schema and the queries."""
    lines = ["```yaml", "databases:", "  site:", f"    allow_sql: {EDITOR}          # ?sql= and _where= on every table", "    tables:"]
    lines += [f"      {name}: {{allow: {EDITOR}}}" for name in news_tables()]
    lines.append("    queries:                           # each keeps its sql: as in the bundled file")
    lines += [f"      {name}: {{allow: {EDITOR}}}" for name in news_queries()]
    lines.append("```")
    return "\n".join(lines) + "\n"


#: Tables of the schema that metadata.yml does not describe, described here; a table with neither
#: stops the generation with its name. FTS5's shadow tables (``<name>_data`` and so on) are left out.
TABLES_UNDESCRIBED = {
    "sqlite_sequence": "SQLite's own: the last id given in each `AUTOINCREMENT` table (`ingest_runs`).",
    "_sqlite_migrations": "The migrations applied (sqlite-utils' migrations): `id`, `migration_set` (`qsite`), "
    "`name` (as in `db/migrations.py`) and `applied_at` (UTC); `metadata.yml` does not describe its columns.",
}
FTS_SHADOWS = ("_config", "_data", "_docsize", "_idx", "_content")


def _metadata_tables() -> dict:
    import yaml

    from qsite.service.datasette.metadata import METADATA_PATH

    (entry,) = yaml.safe_load(METADATA_PATH.read_text(encoding="utf-8"))["databases"].values()
    return entry["tables"]


def datasette_tables() -> str:
    """Every table of the schema with its description and columns, from metadata.yml (or :data:`TABLES_UNDESCRIBED`)."""
    database = _schema()
    names = database.table_names()
    fts = {name for name in names if database[name].virtual_table_using == "FTS5"}
    described = _metadata_tables()
    lines = ["| table | holds | columns |", "|---|---|---|"]
    for name in names:
        if any(name == f"{base}{suffix}" for base in fts for suffix in FTS_SHADOWS):
            continue
        entry = described.get(name) or {}
        text = entry.get("description") or TABLES_UNDESCRIBED.get(name)
        if name in fts and not text:
            base = name.removesuffix("_fts")
            text = f"The full-text search of `{base}` (`?_search=` on its page): its text is in `{base}`."
        if not text:
            raise LookupError(f"table {name} is described neither in metadata.yml nor in TABLES_UNDESCRIBED (docs/_generate.py)")
        if entry.get("hidden"):
            text += " (hidden: not listed on the database page)"
        columns = ", ".join(f"`{column}`" for column in database[name].columns_dict)
        lines.append(f"| `{name}` | {_cell(text)} | {columns} |")
    return "\n".join(lines) + "\n"


def datasette_queries() -> str:
    """The canned queries of datasette.yaml, each with the /api/v1 endpoints that run it."""
    from qsite.service.api.endpoints import ENDPOINTS
    from qsite.service.datasette.access import QUERY_PREFIX
    from qsite.service.datasette.metadata import configured_queries

    lines = ["| query | run by |", "|---|---|"]
    for name in configured_queries():
        users = [f"`{endpoint.url}`" for endpoint in ENDPOINTS.values() if name in {QUERY_PREFIX + query for query in endpoint.queries}]
        lines.append(f"| `{name}` | {', '.join(users) or 'no endpoint'} |")
    return "\n".join(lines) + "\n"


#: The checkout: uv.lock is read from here, wherever cog runs.
ROOT = Path(__file__).resolve().parent.parent


def runtime_packages() -> str:
    """qsite's own runtime dependencies as ``uv.lock`` records them (pyproject.toml's, with their extras)."""
    import tomllib

    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    (qsite,) = [package for package in lock["package"] if package["name"] == "qsite"]
    names = [dep["name"] + (f"[{','.join(dep['extra'])}]" if dep.get("extra") else "") for dep in qsite["dependencies"]]
    return ", ".join(f"`{name}`" for name in names) + "\n"


def metrics_reference() -> str:
    """The table of every metric ``/metrics`` exposes (service/metrics/exported.py)."""
    from qsite.service.metrics.exported import METRICS

    lines = ["| metric | type | labels | what it is |", "|---|---|---|---|"]
    for metric in METRICS:
        name = f"`{metric.name}_total`" if metric.kind == "counter" else f"`{metric.name}`"
        if metric.kind == "histogram":
            name += " (`_bucket`, `_sum`, `_count`)"
        labels = ", ".join(f"`{label}`" for label in metric.labels) or "-"
        lines.append(f"| {name} | {metric.kind} | {labels} | {_cell(metric.help)} |")
    return "\n".join(lines) + "\n"
