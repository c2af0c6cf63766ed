"""A built 200 response and its conditional answer: the ETag, Last-Modified and 304.

An :class:`Entry` is made once per distinct response and data version: the
JSON is serialised once, its ETag computed once from the bytes, and its
header lists prepared once, so answering a repeat (200 or 304) costs a
comparison and two ASGI messages. :mod:`service.response_cache` keeps them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime
from typing import Hashable, NamedTuple

from .problems import CORS_HEADERS, JSON_CONTENT_TYPE

#: Datasette's router adds this to every response it routes; the fast path
#: sends it too so that both paths answer byte for byte the same.
VARY = (b"vary", b"Cookie, Authorization")

#: How stored and served times are written (RFC 3339, UTC, whole seconds).
_STORED_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def dumps(payload) -> bytes:
    """The JSON body of a response: compact, UTF-8, non-ASCII kept as it is."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def parse_stored_time(rfc3339: str) -> datetime:
    """``2026-11-20T08:00:00Z`` as an aware UTC datetime."""
    return datetime.strptime(rfc3339, _STORED_TIME_FORMAT).replace(tzinfo=timezone.utc)


def http_date(rfc3339: str) -> str:
    """``2026-11-20T08:00:00Z`` as an HTTP date (``Fri, 20 Nov 2026 08:00:00 GMT``)."""
    return format_datetime(parse_stored_time(rfc3339), usegmt=True)


def etag_for(body: bytes) -> str:
    """A strong ETag from the bytes themselves, so it is the same in every process."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison of an ``If-None-Match`` list against ``etag``."""
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in if_none_match.split(","))


def not_modified_since(if_modified_since: str, last_modified: datetime | None) -> bool:
    if last_modified is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError):
        return False  # an unparseable date is ignored (RFC 9110 13.1.3)
    if since.tzinfo is None:
        since = since.replace(tzinfo=timezone.utc)
    return last_modified <= since


class Conditions(NamedTuple):
    """What a request's headers say about answering it from a built response."""

    if_none_match: str | None
    if_modified_since: str | None
    #: A cookie or ``Authorization`` came with it: Datasette's router decides how that is cached.
    credentialed: bool


def read_conditions(headers) -> Conditions:
    """The conditional headers of ASGI ``headers`` (the first of each), and whether credentials came."""
    if_none_match = if_modified_since = None
    credentialed = False
    for key, value in headers:
        key = key.lower()
        if key == b"if-none-match":
            if if_none_match is None:
                if_none_match = value.decode("latin-1")
        elif key == b"if-modified-since":
            if if_modified_since is None:
                if_modified_since = value.decode("latin-1")
        elif key == b"cookie" or key == b"authorization":
            credentialed = True
    return Conditions(if_none_match, if_modified_since, credentialed)


class Entry:
    """One built 200 response: its body, ETag and prepared header lists.

    :param datasets: the datasets it was built from; a change to any drops it.
    :param updated_at: RFC 3339 time of the data behind it, sent as Last-Modified;
        ``None`` for documents with no data behind them.
    :param extra_headers: more header pairs for the 200 (e.g. ``link``).
    :param content_type: of the body; JSON unless said otherwise (the documentation page is HTML).
    """

    __slots__ = ("key", "body", "etag", "datasets", "last_modified", "headers", "not_modified_headers", "size")

    def __init__(
        self,
        key: Hashable,
        body: bytes,
        datasets: tuple[str, ...],
        updated_at: str | None,
        max_age: int,
        extra_headers: tuple = (),
        content_type: str = JSON_CONTENT_TYPE,
    ):
        self.key = key
        self.body = body
        self.datasets = datasets
        self.etag = etag_for(body)
        cache_control = (b"cache-control", f"public, max-age={max_age}".encode())
        etag = (b"etag", self.etag.encode())
        self.headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
            cache_control,
            etag,
            *CORS_HEADERS,
            VARY,
            *extra_headers,
        ]
        self.last_modified = None
        if updated_at:
            self.headers.append((b"last-modified", http_date(updated_at).encode()))
            self.last_modified = parse_stored_time(updated_at)
        # RFC 9110 15.4.5: a 304 carries the validators and caching headers, no body.
        self.not_modified_headers = [cache_control, etag, *CORS_HEADERS, VARY]
        self.size = len(body) + 512

    def answer(self, conditions: Conditions):
        """``(status, headers, body)`` for a GET of this entry under those conditions.

        ``If-None-Match`` wins over ``If-Modified-Since`` when both came (RFC 9110 13.2.2).
        """
        if conditions.if_none_match is not None:
            if etag_matches(conditions.if_none_match, self.etag):
                return 304, self.not_modified_headers, b""
        elif conditions.if_modified_since is not None:
            if not_modified_since(conditions.if_modified_since, self.last_modified):
                return 304, self.not_modified_headers, b""
        return 200, self.headers, self.body
