"""``metadata.yml``: Datasette's metadata and the SQL behind every /api/v1 route.

The canned queries in ``metadata.yml`` are the single source of truth for the
SQL the API runs. The file describes one database under ``databases``; the name
there is only a default, because Datasette names a database after its file
stem and the config decides the file. :func:`load_metadata` rebinds that entry
to the real name.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from service.api.endpoints import ENDPOINTS

#: The metadata file at the root of the project.
METADATA_PATH = Path(__file__).resolve().parents[2] / "metadata.yml"

#: The canned queries the endpoints run (their ``queries`` in the table), without :data:`QUERY_PREFIX`.
QUERY_NAMES = tuple(dict.fromkeys(name for endpoint in ENDPOINTS.values() for name in endpoint.queries))
#: Canned queries are ``api_courses`` and so on: one named ``news`` would take
#: over the ``news`` table's page in Datasette.
QUERY_PREFIX = "api_"


class MetadataError(Exception):
    """``metadata.yml`` lacks something the API needs; the message says what."""


def read_metadata_file(path: str | Path = METADATA_PATH) -> dict:
    with open(path, encoding="utf-8") as fp:
        data = yaml.safe_load(fp)
    if not isinstance(data, dict) or len(data.get("databases") or {}) != 1:
        raise MetadataError(f"{Path(path).name}: must describe exactly one database under 'databases'")
    return data


def load_metadata(database: str, path: str | Path = METADATA_PATH) -> dict:
    """The metadata with its one database entry renamed to ``database``.

    :param database: the Datasette name of the served database (its file stem).
    """
    data = copy.deepcopy(read_metadata_file(path))
    (entry,) = data["databases"].values()
    data["databases"] = {database: entry}
    return data


def query_sql(queries: dict | None) -> dict[str, str]:
    """``{name: sql}`` of the canned queries the API runs, from a ``queries`` mapping.

    Keys are :data:`QUERY_NAMES` (``news``), read from ``api_news`` and so on.

    :raises MetadataError: when one of them is missing.
    """
    queries = queries or {}
    missing = [QUERY_PREFIX + name for name in QUERY_NAMES if QUERY_PREFIX + name not in queries]
    if missing:
        raise MetadataError(f"metadata: canned queries missing: {', '.join(missing)}")
    found = {}
    for name in QUERY_NAMES:
        query = queries[QUERY_PREFIX + name]
        found[name] = query["sql"] if isinstance(query, dict) else query
    return found


def canned_sql(datasette, database: str) -> dict[str, str]:
    """The SQL of the API's canned queries as this Datasette instance has them.

    Prefers the metadata Datasette was started with, so researchers and the API
    see the same text; falls back to ``metadata.yml`` when Datasette was started
    without it (a plain ``datasette site.db``).
    """
    queries = datasette.metadata("queries", database=database, fallback=False)
    if not queries:
        (entry,) = read_metadata_file()["databases"].values()
        queries = entry.get("queries")
    return query_sql(queries)
