"""Every query and path parameter of /api/v1, described once: :data:`PARAMETERS`.

Each :class:`~qsite.service.api.parameters.Param` gives a parameter's kind of value, bounds,
default, documentation, the names other news APIs use for it, and the endpoints that take
it (``on``, by name in :data:`qsite.service.api.endpoints.ENDPOINTS`). An endpoint takes those
that name it, in this order: the order of its errors, of its ``next`` links and of the
OpenAPI document. Adding a query parameter is one entry here.

The parameters a mirror uses (``updated_since``, those of ``/news/removed``) are kept in
:mod:`qsite.service.api.sync` and listed here like every other. What must not change: a name, a
default or a canonical value once published, since clients, cached answers and ``next``
links carry them.
"""

from __future__ import annotations

from qsite.db.model import TAGS

from qsite.service.api.kinds import Cursor, DateTime, Integer, ItemId, Name, OneOf, Segment
from qsite.service.api.parameters import CURSOR_HINT, CURSOR_PEERS, Param
from qsite.service.api.search_language import Words
from qsite.service.api.sync import REMOVED_PARAMETERS, UPDATED_SINCE
from qsite.service.i18n import DEFAULT_LANGUAGE, LANGUAGES

#: Items per page of /news: when ``limit`` is not given, and its bounds. 100, not 500: an uncached
#: page of 500 costs several times one of 100 (bench/limit_cost.py; docs/news-api.md).
LIMIT_DEFAULT = 20
LIMIT_MIN = 1
LIMIT_MAX = 100
#: The feeds of the news (/news.atom, /news.json): the filters of /news but cursor and sort.
FEEDS = ("news_atom", "news_json")
#: The orders /news can list in (``sort``): newest first (the default) and oldest first.
SORTS = ("-published_at", "published_at")
#: Longest search (glossary, news) accepted, in characters.
Q_MAX = 200
#: What a search does, said once for the news and the glossary (docs/api.md: what a search matches).
Q_SYNTAX = (
    "Every word must occur, matched as a word in any order; a word after - (-series) must not occur, and OR "
    "between two words takes either: quantum funding OR investment -series. Quoted words are words, never a "
    "phrase. Only excluded words, or an OR without a word on each side, is a 400. Empty: no filter."
)
#: What other news APIs call a search (NewsAPI and GNews call it q, as qsite does).
Q_PEERS = ("keywords", "query", "search")
#: Longest publisher name accepted in ``source``, and how many publishers one request may name.
SOURCE_MAX = 200
SOURCES_MAX = 20

#: Every parameter, in the order the OpenAPI document lists them; an endpoint
#: takes those that name it in ``on``, in this order.
PARAMETERS = (
    Param(
        "tag",
        OneOf(TAGS, component="Tag"),
        on=("news", "news_removed", *FEEDS),
        description="Only items of this category, matched ignoring letter case. Omitted: all tags.",
        example="Science",
        peers=("category", "categories", "topic"),
    ),
    Param(
        "limit", Integer(LIMIT_MIN, LIMIT_MAX), on=("news", "news_removed", *FEEDS), description="Items per page.",
        default=LIMIT_DEFAULT,
        peers=("pageSize", "page_size", "page-size", "max", "size", "per_page", "hitsPerPage"),
        hint=f"qsite calls this limit ({LIMIT_MIN}\u2013{LIMIT_MAX})",
    ),
    Param(
        "cursor",
        Cursor(),
        on=("news",),
        description="Opaque; only as given in next. Keyset on (published_at, id), so paging stays "
        "right while new items arrive.",
        peers=CURSOR_PEERS,
        hint=CURSOR_HINT,
    ),
    Param(
        "sort",
        # the orders other news APIs rank by, which qsite has none of: said so, not only refused
        OneOf(SORTS, component="NewsSort",
              hints=dict.fromkeys(("relevancy", "relevance", "popularity"), "only date order exists")),
        on=("news",),
        default=SORTS[0],
        description="The order: -published_at, newest first (the default), or published_at, oldest first; ties "
        "by id the same way. A cursor belongs to the order it was given in: with the other sort it is a 400.",
        example="published_at",
        peers=("sortBy", "sort_by", "order-by", "order_by"),
    ),
    Param(
        "since",
        DateTime(),
        on=("news", *FEEDS),
        description="Only items published after this RFC 3339 time (with a time zone). With until, it must be "
        "before until: both are exclusive.",
        example="2026-11-20T08:00:00Z",
        # both ends exclusive: since at or after until is a range no item can be in
        before="until",
        peers=("from", "from_date", "from-date", "start_date", "published_after"),
        hint="qsite calls this since (an RFC 3339 date-time)",
    ),
    Param(
        "until",
        DateTime(round_up=True),
        on=("news", *FEEDS),
        description="Only items published before this RFC 3339 time (with a time zone).",
        example="2026-11-25T00:00:00Z",
        peers=("to", "to_date", "to-date", "end_date", "published_before"),
        hint="qsite calls this until (an RFC 3339 date-time)",
    ),
    # Repeated, not comma-separated: publishers' names may contain commas.
    Param(
        "source",
        Name(SOURCE_MAX),
        on=("news", "news_removed", *FEEDS),
        repeat=SOURCES_MAX,
        description="Only items of this publisher, by its exact name, letter case included (as in source, or as "
        "/api/v1/sources lists it). Repeat the parameter for several publishers (source=A&source=B): names may "
        "contain commas, so one value is always one whole name. When nothing matches and a name is no "
        "publisher's, the answer is a 400 that names it and suggests the publisher meant.",
        example=["Quantum Lab Notes"],
        peers=("sources", "domains"),
        hint="qsite calls this source, repeated once per publisher",
    ),
    UPDATED_SINCE,
    Param(
        "q",
        Words(Q_MAX),
        on=("news", *FEEDS),
        component="newsQ",
        description="Full-text search of title and summary. " + Q_SYNTAX,
        example="qubit",
        peers=Q_PEERS,
    ),
    Param(
        "q",
        Words(Q_MAX),
        on=("glossary",),
        description="Full-text search of term and definition. " + Q_SYNTAX,
        example="qubit",
        peers=Q_PEERS,
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
        "id",
        ItemId(),
        on=("news_item",),
        where="path",
        component="newsItemId",
        description="The item's id, as in its id field. It is made from the item's address when the item is first "
        "stored and never changes: the same in every later ingest, snapshot and replica.",
    ),
    Param(
        "file",
        Segment(),
        on=("snapshot_file",),
        where="path",
        description="The file named by /api/v1/snapshot; any other name is a 404.",
        example="site-v00000042-0123456789abcdef.db",
    ),
)
