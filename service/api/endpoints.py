"""The /api/v1 endpoints, each described once: the table everything else is derived from.

:data:`ENDPOINTS` lists every endpoint (its path, the canned queries it runs, the datasets
behind it, the dataset it cannot answer without, its body builder and its response schema)
with the parameters it takes from :data:`qsite.service.api.parameter_table.PARAMETERS`. From these
come routing and cache keys (:mod:`qsite.service.api.routing`), validation
(:func:`qsite.service.api.parameters.parse_params` over :attr:`Endpoint.params`), ``next`` links
(:meth:`Endpoint.next_link`), the /api/v1 index (:func:`index_document`), the canned
queries the plugin loads (:data:`qsite.service.datasette.metadata.QUERY_NAMES`) and the OpenAPI
document (:mod:`qsite.service.describe.openapi`).

Adding an endpoint is one entry in :data:`ENDPOINTS` (plus its builder in
:mod:`qsite.service.api.bodies` or :mod:`qsite.service.api.news_bodies`, its canned query in
``datasette.yaml`` and its response schema in :mod:`qsite.service.describe.schemas`). What must
not change: an endpoint's name (its operationId and cache key) and path once published.
"""

from __future__ import annotations

from dataclasses import replace

from qsite.db.model import CATALOG, DATASETS, GLOSSARY, NEWS, TOTALS, VERSION

from qsite.service.api import bodies, feeds, news_bodies
from qsite.service.api.endpoint import BINARY, HTML, Endpoint
from qsite.service.api.parameter_table import PARAMETERS
from qsite.service.api.sync import NEWS_REMOVED
from qsite.service.i18n import LANGUAGES

USAGE_TERMS = (
    "Fair use. Attribution is appreciated. News items belong to their original publishers. "
    "Use is for education and research only; the data is not investment advice."
)


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
        build=news_bodies.news,
        queries=("news", "news_count", "news_oldest", "news_changes", "news_changes_count", "source_names"),
        datasets=(NEWS,),
        description="One page of news items, newest first; follow next (or the Link header) for the page after it. "
        "tag, source, since, until and q combine, and next keeps them, so every page applies the same filters.",
    ),
    Endpoint(**NEWS_REMOVED),
    Endpoint(
        "news_item",
        "/news/{id}",
        "One news item",
        "NewsItem",
        "The item.",
        tag="news",
        description="One news item by its id, as /api/v1/news lists it; 404 when no item has that id (never "
        "stored, or gone past the retention window), 400 when it cannot be an id.",
        build=news_bodies.news_item,
        queries=("news_item",),
        datasets=(NEWS,),
    ),
    Endpoint(
        "news_atom",
        "/news.atom",
        "News items as an Atom feed",
        "AtomFeed",
        "An Atom 1.0 feed (RFC 4287) of the newest items matching the filters.",
        tag="news",
        description="The newest limit news items matching tag, source, since, until and q, as an Atom feed a feed "
        "reader can follow. Each entry credits its publisher: its name as the entry's author and in its source, and "
        "the original article as its link. No cursor: a feed shows the newest items.",
        build=feeds.atom,
        queries=("news", "source_names"),
        datasets=(NEWS,),
        media_type=feeds.ATOM,
    ),
    Endpoint(
        "news_json",
        "/news.json",
        "News items as a JSON Feed",
        "JsonFeed",
        "A JSON Feed 1.1 of the newest items matching the filters.",
        tag="news",
        description="The same as /api/v1/news.atom, as a JSON Feed 1.1: each item credits its publisher as its author, "
        "with the original article as its url.",
        build=feeds.json_feed,
        queries=("news", "source_names"),
        datasets=(NEWS,),
        media_type=feeds.JSON_FEED,
        absolute_links=feeds.JSON_FEED_LINKS,
    ),
    Endpoint(
        "sources",
        "/sources",
        "The news publishers",
        "SourceList",
        "Every publisher.",
        tag="news",
        build=news_bodies.sources,
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
        "health",
        "/health",
        "Whether this instance has recent data to serve",
        "Health",
        "The data is recent enough: its age, the last ingests, this instance's version and snapshot.",
        tag="interface",
        description="For load balancers and probes: 200 when the data is no older than the configured bound "
        "(api.health_max_data_age), 503 with the same body when it is older or there is no data. The age is the time "
        "since the last ingest run that did not fail. Never cached.",
        queries=("health",),
        datasets=DATASETS,
        fresh=True,
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
        key=lambda e: e.build is None and e.name != "health",
    )
    return {
        "name": "qsite",
        "version": "v1",
        "qsite_version": VERSION,
        # the snapshot a following replica serves: filled in per snapshot (qsite.service.datasette.plugin)
        "snapshot": None,
        "terms": USAGE_TERMS,
        "documentation": ENDPOINTS["openapi"].url,
        "endpoints": {endpoint.name: endpoint.url for endpoint in listed},
        "languages": [{"code": language.code, "name": language.name} for language in LANGUAGES],
    }
