"""Keeping a copy of the news in sync: the parameters and the endpoint a mirror uses besides /api/v1/news.

A mirror asks ``/api/v1/news?updated_since=`` for what was added or changed
since its last call and ``/api/v1/news/removed?since=`` for what was removed
(retention) or, with the same ``tag`` and ``source``, left that view, each from the newest time it received (both bounds inclusive),
and follows ``next`` to the end. Both walks are in the order changes were
committed (``change_key``, :mod:`qsite.db.news_sync`), so nothing changed while one
pages is missed. Listed in :data:`qsite.service.api.parameter_table.PARAMETERS` and
``ENDPOINTS`` like every other; kept here, apart, so the table stays readable.
"""

from __future__ import annotations

from qsite.db.model import NEWS

from qsite.service.api import news_bodies
from qsite.service.api.kinds import Cursor, DateTime
from qsite.service.api.parameters import CURSOR_HINT, CURSOR_PEERS, Param

UPDATED_SINCE = Param(
    "updated_since",
    DateTime(),
    on=("news",),
    excludes=("since", "until", "q", "sort"),
    description="Only items qsite added or changed at or after this RFC 3339 time (with a time zone), for keeping "
    "a copy in sync. The page is then in the order the changes were made, oldest first (updated_at never "
    "decreases along it), and the cursor keeps that order: an item changed while you page comes again at the end, "
    "so a walk misses nothing. Give the newest updated_at you received as updated_since next time (an item at "
    "that time comes again); /api/v1/news/removed lists the items removed. Combines with tag and source, not "
    "with since, until, q or sort.",
)

REMOVED_PARAMETERS = (
    Param(
        "since",
        DateTime(),
        on=("news_removed",),
        component="removedSince",
        description="Only items removed at or after this RFC 3339 time (with a time zone): the newest removed_at you "
        "received last time (an item at that time comes again). Omitted: every removal qsite has recorded.",
    ),
    Param(
        "cursor",
        Cursor(),
        on=("news_removed",),
        component="removedCursor",
        description="Opaque; only as given in next. Keyset on the order of removal, so paging stays right while "
        "more items are removed.",
        peers=CURSOR_PEERS,
        hint=CURSOR_HINT,
    ),
)

#: The keywords of the ``/api/v1/news/removed`` :class:`~qsite.service.api.endpoints.Endpoint`.
NEWS_REMOVED = dict(
    name="news_removed",
    path="/news/removed",
    summary="News items qsite removed, for keeping a copy in sync",
    schema="RemovedPage",
    returns="One page of removed items.",
    tag="news",
    description="The ids of the news items that left the view asked, with when each left, oldest first; follow "
    "next for the page after it. Without tag or source: the items qsite no longer holds (published before the "
    "retention window). With tag and source, the same filters as /api/v1/news: also the items that left that "
    "view because their tag or source changed and are not in it now. A copy kept in sync with updated_since on "
    "/api/v1/news with the same tag and source deletes these, and so ends identical to that listing. An item "
    "that comes back is listed by /api/v1/news again, and no longer here.",
    build=news_bodies.news_removed,
    queries=("news_removed", "news_removed_count", "news_removed_filtered", "news_removed_filtered_count", "source_names"),
    datasets=(NEWS,),
    required=NEWS,
)
