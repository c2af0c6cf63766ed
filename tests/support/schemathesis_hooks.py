"""Schemathesis hooks for the runs against a real server (``SCHEMATHESIS_HOOKS=tests.support.schemathesis_hooks``).

The snapshot file is sent as application/octet-stream, which schemathesis has no
deserializer for: it would skip checking that answer against its schema. Its
schema is a binary string, so the bytes are handed over as one (latin-1 maps
each byte to one character).
"""

from __future__ import annotations

import schemathesis


@schemathesis.deserializer("application/octet-stream")
def octet_stream(ctx, response) -> str:
    return response.content.decode("latin-1")


#: What updated_since cannot be combined with (its description says so; OpenAPI has no way to).
_NOT_WITH_UPDATED_SINCE = ("since", "until", "q")


@schemathesis.hook
def filter_query(ctx, query) -> bool:
    """Keep only queries the document's words allow, where its schemas cannot say it.

    Rules OpenAPI 3.1 has no keyword for, each stated in the parameter's description and
    answered with a 400 naming the parameter: ``updated_since`` does not combine with
    ``since``, ``until``, ``q`` or a ``sort`` but the default; ``since`` must be before ``until``; a ``q`` of excluded words
    only, or with an ``OR`` lacking a word on a side, is refused; a ``cursor`` is only one
    given in a ``next`` link (an opaque string of the pattern's letters, not any such
    string). A request breaking them is no "schema-valid request rejected"; the tests of
    those 400s are in test_news_sync.py, test_news_filters.py and test_api.py.
    """
    from qsite.service.api.cursors import decode_cursor
    from qsite.service.api.kinds import Refused, exact_time
    from qsite.service.api.search_language import parse_search

    if not query:
        return True
    if query.get("updated_since") is not None and any(query.get(name) is not None for name in _NOT_WITH_UPDATED_SINCE):
        return False
    # nor with a sort but the default (sent as generated clients send every default)
    if query.get("updated_since") is not None and query.get("sort") not in (None, "-published_at"):
        return False
    since, until = query.get("since"), query.get("until")
    if isinstance(since, str) and isinstance(until, str) and None not in (exact_time(since), exact_time(until)):
        if exact_time(since) >= exact_time(until):
            return False
    if isinstance(query.get("q"), str):
        try:
            parse_search(query["q"])
        except Refused:
            return False
    cursor = query.get("cursor")
    return cursor is None or not isinstance(cursor, str) or decode_cursor(cursor) is not None


#: The 400 of a source no publisher has (qsite.service.api.publishers.Publishers.unknown): how its details begin.
_NO_PUBLISHER = "no publisher is named "


@schemathesis.hook
def filter_failure(ctx, failure, case, response) -> bool:
    """Keep every failure but a schema-valid request refused only because a ``source`` names no publisher.

    Whether a name is a publisher's is a fact of the data served, which no schema can state:
    source's description says such a request is a 400 when nothing matches (naming it, with the
    publisher meant). Generated names are no publisher's, and the document's example is one only
    where that publisher is followed. Any other refusal of a schema-valid request is kept.
    """
    if getattr(failure, "code", None) != "ST202" or response.status_code != 400:
        return True
    try:
        errors = response.json().get("errors") or []
    except ValueError:
        return True
    return not errors or not all(
        error.get("parameter") == "source" and str(error.get("detail", "")).startswith(_NO_PUBLISHER) for error in errors
    )
