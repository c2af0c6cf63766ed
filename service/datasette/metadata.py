"""``metadata.yml`` and ``datasette.yaml``: Datasette's descriptions, its configuration, and the SQL behind every /api/v1 route.

As Datasette 1.0 splits them: ``metadata.yml`` describes (titles, licence,
tables and columns), ``datasette.yaml`` configures (settings, canned queries,
``allow`` blocks, plugin configuration). Both are loaded the same way on
Datasette 0.65, which took the configuration inside its metadata
(:func:`qsite.service.compat.datasette_kwargs`).

The canned queries in ``datasette.yaml`` are the single source of truth for
the SQL the API runs. Each file describes one database under ``databases``;
the name there is only a default, because Datasette names a database after its
file stem and the qsite config decides the file. :func:`load_metadata` and
:func:`load_datasette_config` rebind that entry to the real name.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from qsite.db.news_queries import by_way
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.compat import canned_query_sql


def bundled_file(name: str) -> Path:
    """The project's ``metadata.yml`` or ``datasette.yaml``, wherever qsite runs from.

    The files live at the root of the checkout (their one source); the wheel
    build copies them into this package (``pyproject.toml``), since an
    installed qsite has no checkout beside it. So: the package's copy when
    there is one, else the checkout's.
    """
    packaged = resources.files(__package__) / name
    if packaged.is_file():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / name


#: The metadata file (descriptions): the root of the checkout's, as installed with the package.
METADATA_PATH = bundled_file("metadata.yml")
#: The Datasette configuration file (settings, queries, permissions, plugins), likewise.
CONFIG_PATH = bundled_file("datasette.yaml")

#: The canned queries the endpoints run (their ``queries`` in the table), without :data:`QUERY_PREFIX`.
QUERY_NAMES = tuple(dict.fromkeys(name for endpoint in ENDPOINTS.values() for name in endpoint.queries))
#: Canned queries are ``api_courses`` and so on: one named ``news`` would take
#: over the ``news`` table's page in Datasette.
QUERY_PREFIX = "api_"


class MetadataError(Exception):
    """``metadata.yml`` or ``datasette.yaml`` lacks something the API needs; the message says what."""


def _read_one_database(path: str | Path, required: bool) -> dict:
    with open(path, encoding="utf-8") as fp:
        data = yaml.safe_load(fp)
    if not isinstance(data, dict):
        raise MetadataError(f"{Path(path).name}: must be a mapping")
    databases = data.get("databases") or {}
    if len(databases) > 1 or (required and len(databases) != 1):
        raise MetadataError(f"{Path(path).name}: must describe exactly one database under 'databases'")
    return data


def read_metadata_file(path: str | Path = METADATA_PATH) -> dict:
    return _read_one_database(path, required=True)


def read_config_file(path: str | Path = CONFIG_PATH) -> dict:
    return _read_one_database(path, required=True)


#: The plugin whose charts name a database (``db``) in ``datasette.yaml``.
DASHBOARDS_PLUGIN = "datasette-dashboards"


def _renamed(data: dict, database: str) -> dict:
    data = copy.deepcopy(data)
    if data.get("databases"):
        ((default, entry),) = data["databases"].items()
        data["databases"] = {database: entry}
        _rebind_charts(data, default, database)
    return data


def _rebind_charts(data: dict, default: str, database: str) -> None:
    """Point every dashboard chart that names the default database at ``database``, so the charts
    follow the configured database whatever its file is called."""
    dashboards = (data.get("plugins") or {}).get(DASHBOARDS_PLUGIN) or {}
    for dashboard in dashboards.values():
        for chart in ((dashboard or {}).get("charts") or {}).values():
            if isinstance(chart, dict) and chart.get("db") == default:
                chart["db"] = database


def load_metadata(database: str, path: str | Path = METADATA_PATH) -> dict:
    """The metadata with its one database entry renamed to ``database``.

    :param database: the Datasette name of the served database (its file stem).
    """
    return _renamed(read_metadata_file(path), database)


def load_datasette_config(database: str, path: str | Path = CONFIG_PATH) -> dict:
    """``datasette.yaml`` with its one database entry renamed to ``database``."""
    return _renamed(read_config_file(path), database)


def configured_queries(path: str | Path = CONFIG_PATH) -> dict:
    """The ``queries`` mapping of ``datasette.yaml``'s database, as written (a copy: callers may change it)."""
    return copy.deepcopy(_configured_queries(str(path)))


@lru_cache(maxsize=8)
def _configured_queries(path: str) -> dict:
    # Read once per file: Datasette 0.65 asks the canned_queries hook on every page and permission check.
    (entry,) = read_config_file(path)["databases"].values()
    return entry.get("queries") or {}


def query_sql(queries: dict | None) -> dict[str, str]:
    """``{name: sql}`` of the canned queries the API runs, from a ``queries`` mapping.

    Keys are :data:`QUERY_NAMES` (``news``), read from ``api_news`` and so on, and for a page query
    each way's own arms (``news.search``: :func:`qsite.db.news_queries.by_way`), which
    :meth:`qsite.service.api.bodies.Build.rows` runs for a page that takes that way.

    :raises MetadataError: when one of them is missing.
    """
    queries = queries or {}
    missing = [QUERY_PREFIX + name for name in QUERY_NAMES if QUERY_PREFIX + name not in queries]
    if missing:
        raise MetadataError(f"datasette.yaml: canned queries missing: {', '.join(missing)}")
    found = {}
    for name in QUERY_NAMES:
        query = queries[QUERY_PREFIX + name]
        found[name] = query["sql"] if isinstance(query, dict) else query
        for way, sql in by_way(QUERY_PREFIX + name, found[name]).items():
            found[f"{name}.{way}"] = sql
    return found


async def canned_sql(datasette, database: str) -> dict[str, str]:
    """The SQL of the API's canned queries as this Datasette instance has them.

    Prefers the queries Datasette was started with, so researchers and the API
    see the same text; falls back to ``datasette.yaml`` when Datasette was
    started without it (a plain ``datasette site.db``).
    """
    queries = await canned_query_sql(datasette, database, [QUERY_PREFIX + name for name in QUERY_NAMES])
    if not queries:
        queries = configured_queries()
    return query_sql(queries)
