"""The bodies of the news endpoints: /news (pages, and the sync walk), /news/removed, one item, /sources.

Promises: every page is a keyset page (:mod:`qsite.service.api.cursors`) whose ``next`` link keeps
its filters and its order, and a cursor is refused (:class:`~qsite.service.api.bodies.Invalid`)
on a listing in another order than the one it came from; ``count`` is exact up to
:data:`SEARCH_COUNT_MAX` and said to be inexact past it (``count_exact``); an empty answer
that names a publisher no one has is a 400 (:func:`~qsite.service.api.publishers.check_sources`),
not an empty 200.

Relies on the canned queries in ``datasette.yaml`` (``api_news*``) and on counts carried in
cursors being sealed (:meth:`~qsite.service.api.bodies.Build.count`). What must not change: the
fields of a news item and of a page, which the response schemas
(:mod:`qsite.service.describe.schemas`) and every client rely on.
"""

from __future__ import annotations

import orjson

from qsite.db.news_arms import way_in
from qsite.db.news_queries import SORTED_BY_CALLER, in_page_order
from qsite.db.urls import public_location
from qsite.service.api.bodies import Build, Invalid, Missing
from qsite.service.api.cursors import keyset
from qsite.service.api.publishers import check_sources, sources_param
from qsite.service.api.search_language import fts_query

#: A search (``q``), a sync walk (``updated_since``) and the removed items count their matches up
#: to here: past it, ``count`` is this and ``count_exact`` false, as search engines say "1,000+".
#: Counting every match of a common word reads most of the index; the cost is in docs/performance.md
#: ("Figures behind the API's limits").
SEARCH_COUNT_MAX = 1_000


def news_filters(values: dict) -> dict:
    """The canned news queries' filter parameters; ``''`` is no filter.

    ``sources`` is a JSON array of names (the query reads it with ``json_each``),
    so a name with a comma in it stays one name.
    """
    return {
        "tag": values["tag"] or "",
        "since": values["since"] or "",
        "until": values["until"] or "",
        "sources": sources_param(values),
        "q": fts_query(values["q"]),
    }


def with_count_limit(filters: dict) -> dict:
    """A count query's parameters: its filters and where a count stops (:data:`SEARCH_COUNT_MAX`); what a seal covers."""
    return {**filters, "count_limit": SEARCH_COUNT_MAX + 1}


def page_rows(build: Build, filters: dict, oldest_first: bool, position, position_id, limit: int) -> list[dict]:
    """The first ``limit`` items of a listing with :func:`news_filters`' ``filters``, in its order, after the
    cursor's ``position`` (``''`` for the first page): the canned page query's arms of their way, the
    few rows of a search's sorted here (:data:`qsite.db.news_queries.SORTED_BY_CALLER`)."""
    way = way_in(filters)
    if oldest_first:
        rows = build.rows("news_oldest", {**filters, "after": position, "after_id": position_id, "limit": limit}, way)
    else:
        rows = build.rows("news", {**filters, "before": position, "before_id": position_id, "limit": limit}, way)
    return in_page_order(rows, oldest_first, limit) if way in SORTED_BY_CALLER else rows


def served_item(row: dict) -> dict:
    """One ``news`` row as served: its authors, stored as a JSON array, as a list; its change key is not served.

    The row itself, changed in place: each row is read for one body only, and a
    page makes a hundred of them; orjson reads the array (docs/performance.md, "Figures behind the API's limits").
    """
    row["authors"] = orjson.loads(row["authors"] or "[]")
    row.pop("change_key", None)
    return row


def _page(build: Build, query: str, params: dict, position) -> tuple[list[dict], str | None, int, bool]:
    """A page of an oldest-first walk (news changes, removals): its rows, next link, count and whether it is exact.

    ``position`` gives the cursor of a row: the keyset the walk is ordered by.
    """
    limit = build.values["limit"]
    cursor = build.values["cursor"]
    if cursor is not None and (cursor.oldest_first or not cursor.in_change_order):
        # /news wrote it: a position in another listing's order
        raise Invalid("cursor", "was given in next of /api/v1/news; keep each cursor to the listing it came from")
    after, after_id = keyset(cursor)
    page = build.rows(query, {**params, "after": after, "after_id": after_id, "limit": limit + 1})
    count_params = with_count_limit(params)
    count = build.count(query + "_count", count_params)
    link = None
    if len(page) > limit:
        page = page[:limit]
        last = build.after(*position(page[-1]), False, query + "_count", count_params, count)
        link = build.endpoint.next_link(build.values, last)
    return page, link, min(count, SEARCH_COUNT_MAX), count <= SEARCH_COUNT_MAX


def _news_changes(build: Build):
    """/news?updated_since=: a sync walk, oldest change first (``api_news_changes``)."""
    values = build.values
    filters = news_filters(values)
    params = {"updated_since": values["updated_since"], "tag": filters["tag"], "sources": filters["sources"]}
    page, link, count, exact = _page(build, "news_changes", params, lambda row: (row["change_key"], row["id"]))
    if count == 0:
        check_sources(build)
    payload = {
        "count": count,
        "count_exact": exact,
        "tag": values["tag"],
        "limit": values["limit"],
        "next": link,
        "updated_at": build.updated_at,
        "results": [served_item(row) for row in page],
    }
    return payload, ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()


def news_removed(build: Build):
    """/news/removed: what left the view asked, oldest first, so a mirror of that view drops what left it.

    Without ``tag`` or ``source``, the tombstones (``api_news_removed``); with them, the tombstones of
    that view and the items that left it by a change of tag or source (``api_news_removed_filtered``).
    """
    values = build.values
    since = values["since"] or ""
    tag, sources = values["tag"] or "", sources_param(values)
    if tag or sources:
        params = {"since": since, "tag": tag, "sources": sources}
        page, link, count, exact = _page(build, "news_removed_filtered", params, lambda row: (row["change_key"], row["id"]))
        if count == 0:
            check_sources(build)
    else:
        page, link, count, exact = _page(build, "news_removed", {"since": since}, lambda row: (row["change_key"], row["id"]))
    payload = {
        "count": count,
        "count_exact": exact,
        "limit": build.values["limit"],
        "next": link,
        "updated_at": build.updated_at,
        "results": [{"id": row["id"], "removed_at": row["removed_at"]} for row in page],
    }
    return payload, ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()


def news(build: Build):
    values = build.values
    if values["updated_since"] is not None:
        return _news_changes(build)
    limit = values["limit"]
    oldest_first = values["sort"] == "published_at"
    cursor = values["cursor"]
    position, position_id = keyset(cursor)
    if cursor is not None and cursor.oldest_first != oldest_first:
        raise Invalid("cursor", "was given in next of a listing in the other order; keep the sort it came with, or start without a cursor")
    if cursor is not None and cursor.in_change_order:
        raise Invalid("cursor", "was given in next of a walk in change order (updated_since, /news/removed); keep each cursor to the listing it came from")
    filters = news_filters(values)
    count_params = with_count_limit(filters)
    # Each of the two queries is skipped when the other one's answer already says what it would
    # return: a search whose words and filters seldom meet reads both index lists to their end,
    # and would do it twice (docs/performance.md, "Figures behind the API's limits").
    count = None
    if cursor is not None:
        # A later page: nothing in the whole range means nothing on this page either. Its count is
        # usually the one the first page read, carried in the cursor (Build.count).
        count = build.count("news_count", count_params)
    if count == 0:
        page = []
    else:
        page = page_rows(build, filters, oldest_first, position, position_id, limit + 1)
    if count is None:
        # The first page: when it is not full, it holds every match, so it is the count.
        if len(page) <= limit:
            count = len(page)
        else:
            count = build.count("news_count", count_params)
    if count == 0:
        check_sources(build)
    exact = values["q"] is None or count <= SEARCH_COUNT_MAX
    link = None
    if len(page) > limit:
        page = page[:limit]
        last = build.after(page[-1]["published_at"], page[-1]["id"], oldest_first, "news_count", count_params, count)
        link = build.endpoint.next_link(values, last)
    payload = {
        "count": count if exact else SEARCH_COUNT_MAX,
        "count_exact": exact,
        "tag": values["tag"],
        "limit": limit,
        "next": link,
        "updated_at": build.updated_at,
        "results": [served_item(row) for row in page],
    }
    headers = ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()
    return payload, headers


def news_item(build: Build):
    """One item by its id (checked by :class:`~qsite.service.api.parameters.ItemId` before this is called)."""
    found = build.rows("news_item", {"item_id": build.arg})
    if not found:
        raise Missing(f"no news item with id {build.arg!r}")
    return served_item(found[0]), ()


def sources(build: Build):
    """Every publisher; feed addresses only in their public form (:func:`qsite.db.urls.public_location`)."""
    results = [
        {
            "name": row["name"],
            "tag": row["tag"],
            "feed_url": public_location(row["url"]),
            "item_count": row["item_count"],
            "last_success_at": row["last_success_at"],
        }
        for row in build.rows("sources", {})
    ]
    # a fetch that changed no item still changes last_success_at: the body's updated_at says so
    newest_fetch = max((source["last_success_at"] for source in results if source["last_success_at"]), default=None)
    return build.listing(results, newest_fetch), ()
