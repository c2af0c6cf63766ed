"""The /api/v1 endpoints, each described once: the table everything else is derived from.

:data:`PARAMETERS` lists every parameter (its kind of value, bounds, default and
documentation, and the endpoints that take it); :data:`ENDPOINTS` lists every
endpoint (its path, the canned queries it runs, the datasets behind it, the
dataset it cannot answer without, its body builder and its response schema).
From these come routing and cache keys (:mod:`service.api.routing`), validation
(:func:`service.api.parameters.parse_params` over :attr:`Endpoint.params`),
``next`` links (:meth:`Endpoint.next_link`), the /api/v1 index
(:func:`index_document`), the canned queries the plugin loads
(:data:`service.datasette.metadata.QUERY_NAMES`) and the OpenAPI document
(:mod:`service.describe.openapi`).

Adding a query parameter is one entry in :data:`PARAMETERS`; adding an
endpoint is one entry in :data:`ENDPOINTS` (plus its builder in
:mod:`service.api.bodies`, its canned query in ``metadata.yml`` and its response
schema in :mod:`service.describe.schemas`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable
from urllib.parse import quote, urlencode

from db.model import CATALOG, DATASETS, GLOSSARY, NEWS, TAGS, TOTALS

from service.api import bodies
from service.i18n import DEFAULT_LANGUAGE, LANGUAGES
from service.api.parameters import Cursor, DateTime, Integer, Name, OneOf, Param, Segment, Words
from service.api.sync import NEWS_REMOVED, REMOVED_PARAMETERS, UPDATED_SINCE
from service.http.problems import API_PREFIX

#: The media types of the 200 bodies: JSON but for the documentation page and the snapshot file.
JSON = "application/json"
HTML = "text/html"
#: The snapshot file, as bytes: generators read octet-stream as a file, but left application/vnd.sqlite3
#: (its registered type, which its schema names as contentMediaType) out of their clients.
BINARY = "application/octet-stream"
SQLITE = "application/vnd.sqlite3"

#: Items per page of /news: when ``limit`` is not given, and its bounds.
LIMIT_DEFAULT = 20
LIMIT_MIN = 1
LIMIT_MAX = 100
#: Longest search (glossary, news) accepted, in characters.
Q_MAX = 200
#: Longest publisher name accepted in ``source``, and how many publishers one request may name.
SOURCE_MAX = 200
SOURCES_MAX = 20

USAGE_TERMS = (
    "Fair use. Attribution is appreciated. News items belong to their original publishers. "
    "Use is for education and research only; the data is not investment advice."
)

#: Every parameter, in the order the OpenAPI document lists them; an endpoint
#: takes those that name it in ``on``, in this order.
PARAMETERS = (
    Param(
        "tag",
        OneOf(TAGS, component="Tag"),
        on=("news",),
        description="Only items of this category, matched ignoring letter case. Omitted: all tags.",
        example="Science",
    ),
    Param(
        "limit", Integer(LIMIT_MIN, LIMIT_MAX), on=("news", "news_removed"), description="Items per page.", default=LIMIT_DEFAULT
    ),
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
        example="2026-11-20T08:00:00Z",
    ),
    Param(
        "until",
        DateTime(),
        on=("news",),
        description="Only items published before this RFC 3339 time (with a time zone).",
        example="2026-11-25T00:00:00Z",
    ),
    # Repeated, not comma-separated: publishers' names may contain commas.
    Param(
        "source",
        Name(SOURCE_MAX),
        on=("news",),
        repeat=SOURCES_MAX,
        description="Only items of this publisher, by its exact name (as in source, or as /api/v1/sources lists it). "
        "Repeat the parameter for several publishers (source=A&source=B): names may contain commas, so one "
        "value is always one whole name. A name no publisher has matches nothing.",
        example=["Quantum Lab Notes"],
    ),
    UPDATED_SINCE,
    Param(
        "q",
        Words(Q_MAX),
        on=("news",),
        component="newsQ",
        description="Full-text search of title and summary; words are matched as words, "
        "all of them must occur. Empty: no filter.",
        example="qubit",
    ),
    Param(
        "q",
        Words(Q_MAX),
        on=("glossary",),
        description="Full-text search of term and definition; words are matched as words, "
        "all of them must occur. Empty: no filter.",
        example="qubit",
    ),
    Param(
        "lang",
        OneOf(tuple(language.code for language in LANGUAGES), component="LanguageCode"),
        on=("openapi", "docs"),
        default=DEFAULT_LANGUAGE.code,
        description="The language of the texts for people, by its BCP 47 code (any letter case); English when "
        "omitted. Identifiers are the same in every language.",
        example="de",
    ),
    *REMOVED_PARAMETERS,
    Param("id", Segment(), on=("glossary_entry",), where="path", example="qubit"),
    Param(
        "file",
        Segment(),
        on=("snapshot_file",),
        where="path",
        description="The file named by /api/v1/snapshot; any other name is a 404.",
        example="site-v00000042-0123456789abcdef.db",
    ),
)


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of /api/v1.

    :param name: its name in the index and in cache keys; camelCased, its OpenAPI operationId.
    :param path: under :data:`~service.http.problems.API_PREFIX`; ``{name}`` as the last segment
        is its path parameter.
    :param summary: one line for the OpenAPI document.
    :param schema: the OpenAPI component schema of its 200 body.
    :param returns: the description of its 200 response.
    :param build: the :mod:`service.api.bodies` function that builds its body; ``None`` for a
        document built once at startup (the index, the OpenAPI document).
    :param queries: the canned queries (``metadata.yml``, without ``api_``) ``build`` runs.
    :param datasets: the ``data_versions`` rows its body is built from; a change to any
        drops the cached body, and the newest is its ``updated_at``.
    :param required: the dataset that must have been ingested, or the answer is 503; by
        default the first of ``datasets`` for an endpoint built from data (``build``).
    :param trailing_slash: also answers at ``path + "/"`` (said in its description).
    :param tag: its OpenAPI tag (:data:`TAGS_DOCUMENTED`).
    :param description: what it answers, for the OpenAPI document and the documentation page.
    :param media_type: what its 200 is: JSON, :data:`HTML` for the documentation page
        (rendered from the document and examples of the other endpoints), or :data:`BINARY`
        for the snapshot file (a SQLite database) (streamed by :mod:`service.replica.snapshot_api`).
    :param fresh: built anew for every request, never kept: its data changes without a
        ``data_versions`` bump (a feed's last successful fetch). ETag and 304 work as for all.
    :param following: only a ``qsite serve --follow`` replica answers it (:mod:`service.replica.follow`);
        elsewhere it is a 404 and the index leaves it out.
    """

    name: str
    path: str
    summary: str
    schema: str
    returns: str
    tag: str = ""
    description: str = ""
    build: Callable | None = None
    queries: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    required: str | None = None
    trailing_slash: bool = False
    media_type: str = JSON
    fresh: bool = False
    following: bool = False
    #: Filled from :data:`PARAMETERS`: the query parameters it takes, and its path parameter.
    params: tuple[Param, ...] = field(default=(), compare=False)
    path_param: Param | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.required is None and self.build is not None and self.datasets:
            object.__setattr__(self, "required", self.datasets[0])

    @property
    def operation_id(self) -> str:
        first, *rest = self.name.split("_")
        return first + "".join(word.title() for word in rest)

    @property
    def url(self) -> str:
        return API_PREFIX + self.path

    @property
    def pager(self) -> Param | None:
        """Its :class:`~service.api.parameters.Cursor` parameter, if it answers in pages."""
        return next((param for param in self.params if isinstance(param.kind, Cursor)), None)

    def next_link(self, values: dict, after) -> str:
        """The link to the page after the item ``after`` (the cursor's canonical value).

        Every other parameter that has a value, in table order, then the cursor.
        """
        pager = self.pager
        query = [
            pair
            for param in self.params
            if param is not pager and values[param.name] is not None
            for pair in param.link_pairs(values[param.name])
        ]
        query.extend(pager.link_pairs(after))
        return f"{self.url}?{urlencode(query, quote_via=quote)}"


#: The OpenAPI tags (names are identifiers, never translated) and what each groups.
TAGS_DOCUMENTED = {
    "catalog": "Courses with their sections and slide counts, and the site totals. Never any quiz content.",
    "glossary": "Quantum terms explained in plain language, each linked to the lesson that teaches it.",
    "news": "News items from the publishers qsite follows, and the publishers themselves.",
    "snapshot": "The whole data set as one SQLite file, on replicas that follow published snapshots "
    "(qsite serve --follow); elsewhere these paths answer 404.",
    "interface": "This interface itself: the index, the OpenAPI document and the documentation page, in every language.",
}

_TABLE = (
    Endpoint(
        "index",
        "",
        "Links to the endpoints and this document",
        "Index",
        "The index.",
        tag="interface",
        description="Where each endpoint lives, the usage terms, and the languages this interface is described in. "
        "The same answer is given at /api/v1/ with a trailing slash.",
        trailing_slash=True,
    ),
    Endpoint(
        "openapi",
        "/openapi.json",
        "This document",
        "OpenAPI",
        "OpenAPI 3.1 document.",
        tag="interface",
        description="This OpenAPI 3.1 document in the language lang names (English by default), named in "
        "Content-Language. Only texts for people are translated; paths, parameter names, tag values, field names "
        "and problem types are the same in every language.",
    ),
    Endpoint(
        "docs",
        "/docs",
        "This interface, as a page for people",
        "",
        "The documentation page, HTML.",
        tag="interface",
        description="This interface as a page for people, in the language lang names: every endpoint with its "
        "parameters and a real example, the errors, fair use, caching and the usage terms. HTML, with no script "
        "and nothing loaded from another host.",
        media_type=HTML,
        datasets=DATASETS,
    ),
    Endpoint(
        "courses",
        "/courses",
        "The course catalog",
        "CourseList",
        "Courses in catalog order.",
        tag="catalog",
        build=bodies.courses,
        queries=("courses", "sections"),
        datasets=(CATALOG,),
        description="Every course in catalog order, with its sections and their slide counts. Never any quiz content.",
    ),
    Endpoint(
        "glossary",
        "/glossary",
        "The glossary",
        "GlossaryList",
        "Entries ordered by term.",
        tag="glossary",
        build=bodies.glossary,
        queries=("glossary",),
        datasets=(GLOSSARY,),
        description="Every glossary entry ordered by term, with its definition and the lesson that teaches it; "
        "q searches terms and definitions.",
    ),
    Endpoint(
        "glossary_entry",
        "/glossary/{id}",
        "One glossary entry",
        "GlossaryEntry",
        "The entry.",
        tag="glossary",
        build=bodies.glossary_entry,
        queries=("glossary",),
        datasets=(GLOSSARY,),
        description="One glossary entry by its id; 404 when there is none.",
    ),
    Endpoint(
        "news",
        "/news",
        "News items, newest first",
        "NewsPage",
        "One page of items.",
        tag="news",
        build=bodies.news,
        queries=("news", "news_count", "news_changes", "news_changes_count"),
        datasets=(NEWS,),
        description="One page of news items, newest first; follow next (or the Link header) for the page after it. "
        "tag, source, since, until and q combine, and next keeps them, so every page applies the same filters.",
    ),
    Endpoint(**NEWS_REMOVED),
    Endpoint(
        "sources",
        "/sources",
        "The news publishers",
        "SourceList",
        "Every publisher.",
        tag="news",
        build=bodies.sources,
        queries=("sources",),
        datasets=(NEWS,),
        fresh=True,
        description="Every publisher qsite follows: its name (as in the source of its items), its tag, the address "
        "of its feed without credentials, how many of its items are held, and when its feed was last fetched "
        "successfully.",
    ),
    Endpoint(
        "stats",
        "/stats",
        "Site totals",
        "Stats",
        "The totals.",
        tag="catalog",
        build=bodies.stats,
        queries=("stats",),
        datasets=(TOTALS, NEWS),
        description="Totals of the site: courses, slides, quizzes, the size of the question bank, glossary terms "
        "and news items.",
    ),
    Endpoint(
        "snapshot",
        "/snapshot",
        "The published snapshot this replica serves (qsite serve --follow)",
        "Snapshot",
        "Data version, schema version, size, SHA-256, publication time and the download link.",
        tag="snapshot",
        description="The published snapshot this replica serves: its file name, data version, schema version, size, "
        "SHA-256 and publication time, and the link to download it. 404 on an instance that does not follow "
        "snapshots.",
        following=True,
    ),
    Endpoint(
        "snapshot_file",
        "/snapshot/{file}",
        "The snapshot's SQLite file, streamed: the whole data set",
        "SnapshotFile",
        "The whole SQLite database; its SHA-256 is the ETag.",
        tag="snapshot",
        description="The whole data set as the SQLite database this replica serves, streamed as a download. Its name "
        "carries its data version and hash, so it never changes: cacheable for a year, with its SHA-256 as ETag. "
        "Only the file /api/v1/snapshot names is served; any other name is a 404.",
        following=True,
        media_type=BINARY,
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

def index_document(following: bool = False) -> dict:
    """The small JSON index at /api/v1: the data endpoints, then the documents.

    :param following: list the endpoints only a following replica answers (/api/v1/snapshot).
    """
    listed = sorted(
        (endpoint for endpoint in ENDPOINTS.values() if endpoint.name != "index" and (following or not endpoint.following)),
        key=lambda e: e.build is None,
    )
    return {
        "name": "qsite",
        "version": "v1",
        "terms": USAGE_TERMS,
        "documentation": ENDPOINTS["openapi"].url,
        "endpoints": {endpoint.name: endpoint.url for endpoint in listed},
        "languages": [{"code": language.code, "name": language.name} for language in LANGUAGES],
    }
