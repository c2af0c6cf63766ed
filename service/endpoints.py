"""The /api/v1 endpoints, each described once: the table everything else is derived from.

:data:`PARAMETERS` lists every parameter (its kind of value, bounds, default and
documentation, and the endpoints that take it); :data:`ENDPOINTS` lists every
endpoint (its path, the canned queries it runs, the datasets behind it, the
dataset it cannot answer without, its body builder and its response schema).
From these come routing (:func:`resolve`), validation
(:func:`service.parameters.parse_params` over :attr:`Endpoint.params`), cache
keys (:func:`cache_key`), ``next`` links (:meth:`Endpoint.next_link`), the
/api/v1 index (:func:`index_document`), the canned queries the plugin loads
(:data:`service.metadata.QUERY_NAMES`) and the OpenAPI document
(:mod:`service.openapi`).

Adding a query parameter is one entry in :data:`PARAMETERS`; adding an
endpoint is one entry in :data:`ENDPOINTS` (plus its builder in
:mod:`service.bodies`, its canned query in ``metadata.yml`` and its response
schema in :mod:`service.openapi`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable
from urllib.parse import quote, urlencode

from db.model import CATALOG, GLOSSARY, NEWS, TAGS, TOTALS

from . import bodies
from .parameters import Cursor, DateTime, Integer, OneOf, Param, Segment, Words
from .problems import API_PREFIX

#: Items per page of /news: when ``limit`` is not given, and its bounds.
LIMIT_DEFAULT = 20
LIMIT_MIN = 1
LIMIT_MAX = 100
#: Longest glossary search accepted, in characters.
Q_MAX = 200

USAGE_TERMS = (
    "Fair use. Attribution is appreciated. News items belong to their original publishers. "
    "Use is for education and research only; the data is not investment advice."
)

#: Every parameter, in the order the OpenAPI document lists them; an endpoint
#: takes those that name it in ``on``, in this order.
PARAMETERS = (
    Param(
        "tag",
        OneOf(TAGS),
        on=("news",),
        description="Only items of this category, matched ignoring letter case. Omitted: all tags.",
    ),
    Param("limit", Integer(LIMIT_MIN, LIMIT_MAX), on=("news",), description="Items per page.", default=LIMIT_DEFAULT),
    Param(
        "cursor",
        Cursor(),
        on=("news",),
        description="Opaque; only as given in next. Keyset on (published_at, id), so paging stays "
        "right while new items arrive.",
    ),
    Param(
        "since",
        DateTime(),
        on=("news",),
        description="Only items published after this RFC 3339 time (with a time zone).",
    ),
    Param(
        "q",
        Words(Q_MAX),
        on=("glossary",),
        description="Full-text search of term and definition; words are matched as words, "
        "all of them must occur. Empty: no filter.",
    ),
    Param("id", Segment(), on=("glossary_entry",), where="path"),
)


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of /api/v1.

    :param name: its name in the index and in cache keys; camelCased, its OpenAPI operationId.
    :param path: under :data:`~service.problems.API_PREFIX`; ``{name}`` as the last segment
        is its path parameter.
    :param summary: one line for the OpenAPI document.
    :param schema: the OpenAPI component schema of its 200 body.
    :param returns: the description of its 200 response.
    :param build: the :mod:`service.bodies` function that builds its body; ``None`` for a
        document built once at startup (the index, the OpenAPI document).
    :param queries: the canned queries (``metadata.yml``, without ``api_``) ``build`` runs.
    :param datasets: the ``data_versions`` rows its body is built from; a change to any
        drops the cached body, and the newest is its ``updated_at``.
    :param required: the dataset that must have been ingested, or the answer is 503.
    :param trailing_slash: also answers at ``path + "/"`` (documented as the same).
    """

    name: str
    path: str
    summary: str
    schema: str
    returns: str
    build: Callable | None = None
    queries: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    required: str | None = None
    trailing_slash: bool = False
    #: Filled from :data:`PARAMETERS`: the query parameters it takes, and its path parameter.
    params: tuple[Param, ...] = field(default=(), compare=False)
    path_param: Param | None = field(default=None, compare=False)

    @property
    def operation_id(self) -> str:
        first, *rest = self.name.split("_")
        return first + "".join(word.title() for word in rest)

    @property
    def url(self) -> str:
        return API_PREFIX + self.path

    @property
    def pager(self) -> Param | None:
        """Its :class:`~service.parameters.Cursor` parameter, if it answers in pages."""
        return next((param for param in self.params if isinstance(param.kind, Cursor)), None)

    def next_link(self, values: dict, after) -> str:
        """The link to the page after the item ``after`` (the cursor's canonical value).

        Every other parameter that has a value, in table order, then the cursor.
        """
        pager = self.pager
        query = [
            (param.name, param.kind.text(values[param.name]))
            for param in self.params
            if param is not pager and values[param.name] is not None
        ]
        query.append((pager.name, pager.kind.text(after)))
        return f"{self.url}?{urlencode(query, quote_via=quote)}"


_TABLE = (
    Endpoint("index", "", "Links to the endpoints and this document", "Index", "The index.", trailing_slash=True),
    Endpoint("openapi", "/openapi.json", "This document", "OpenAPI", "OpenAPI 3.1 document."),
    Endpoint(
        "courses",
        "/courses",
        "The course catalog",
        "CourseList",
        "Courses in catalog order.",
        build=bodies.courses,
        queries=("courses", "sections"),
        datasets=(CATALOG,),
        required=CATALOG,
    ),
    Endpoint(
        "glossary",
        "/glossary",
        "The glossary",
        "GlossaryList",
        "Entries ordered by term.",
        build=bodies.glossary,
        queries=("glossary",),
        datasets=(GLOSSARY,),
        required=GLOSSARY,
    ),
    Endpoint(
        "glossary_entry",
        "/glossary/{id}",
        "One glossary entry",
        "GlossaryEntry",
        "The entry.",
        build=bodies.glossary_entry,
        queries=("glossary",),
        datasets=(GLOSSARY,),
        required=GLOSSARY,
    ),
    Endpoint(
        "news",
        "/news",
        "News items, newest first",
        "NewsPage",
        "One page of items.",
        build=bodies.news,
        queries=("news", "news_count"),
        datasets=(NEWS,),
        required=NEWS,
    ),
    Endpoint(
        "stats",
        "/stats",
        "Site totals",
        "Stats",
        "The totals.",
        build=bodies.stats,
        queries=("stats",),
        datasets=(TOTALS, NEWS),
        required=TOTALS,
    ),
)


def _with_params(endpoint: Endpoint) -> Endpoint:
    taking = [param for param in PARAMETERS if endpoint.name in param.on]
    return replace(
        endpoint,
        params=tuple(param for param in taking if param.where == "query"),
        path_param=next((param for param in taking if param.where == "path"), None),
    )


#: Every endpoint by name, in the order the OpenAPI document lists their paths.
ENDPOINTS: dict[str, Endpoint] = {endpoint.name: _with_params(endpoint) for endpoint in _TABLE}

#: Raw path below the prefix -> endpoint, for paths without a parameter.
_FIXED_PATHS = {
    path: endpoint
    for endpoint in ENDPOINTS.values()
    if endpoint.path_param is None
    for path in ((endpoint.path, endpoint.path + "/") if endpoint.trailing_slash else (endpoint.path,))
}
#: ``(what comes before the {parameter}, endpoint)`` for the others.
_PARAMETER_PATHS = [
    (endpoint.path.partition("{")[0], endpoint) for endpoint in ENDPOINTS.values() if endpoint.path_param is not None
]


def resolve(path: str) -> tuple[Endpoint, str | None] | None:
    """The endpoint for a raw (still percent-encoded) path, and its path parameter's value if any."""
    if not path.startswith(API_PREFIX):
        return None
    rest = path[len(API_PREFIX) :]
    endpoint = _FIXED_PATHS.get(rest)
    if endpoint is not None:
        return endpoint, None
    for prefix, endpoint in _PARAMETER_PATHS:
        if rest.startswith(prefix):
            try:
                return endpoint, endpoint.path_param.kind.parse(rest[len(prefix) :])
            except ValueError:
                return None
    return None


def cache_key(endpoint: Endpoint, arg: str | None, values: dict) -> tuple:
    """The same key for every request that must get the same response.

    The endpoint's name, its path parameter's value (if it has one, or if it
    takes no parameter at all: then ``None``), then each query parameter's
    canonical value in table order, defaults filled in.
    """
    query = tuple(values[param.name] for param in endpoint.params)
    if endpoint.path_param is not None or not query:
        return (endpoint.name, arg, *query)
    return (endpoint.name, *query)


def index_document() -> dict:
    """The small JSON index at /api/v1: the data endpoints, then the documents."""
    listed = sorted((endpoint for endpoint in ENDPOINTS.values() if endpoint.name != "index"), key=lambda e: e.build is None)
    return {
        "name": "qsite",
        "version": "v1",
        "terms": USAGE_TERMS,
        "documentation": ENDPOINTS["openapi"].url,
        "endpoints": {endpoint.name: endpoint.url for endpoint in listed},
    }
