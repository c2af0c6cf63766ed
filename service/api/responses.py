"""A built 200 response and its conditional answer: the ETag, Last-Modified and 304.

An :class:`Entry` is made once per distinct response and data version: the
JSON is serialised once, its ETag computed once from the bytes, and its
header lists prepared once, so answering a repeat (200 or 304) costs a
comparison and two ASGI messages. :mod:`qsite.service.api.response_cache` keeps them.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from email.utils import format_datetime
from functools import lru_cache
from typing import Hashable, NamedTuple

import orjson
import xxhash
from werkzeug.http import parse_date, parse_etags

from qsite.db.model import format_time
from qsite.service.http.problems import CORS_HEADERS, JSON_CONTENT_TYPE, VARY
from qsite.service.http.targets import headers_size

#: Bytes Python spends on an :class:`Entry` besides its body, key and header
#: bytes (the object, its lists and tuples, the cache's slots for it), measured
#: with tracemalloc and rounded up.
ENTRY_OVERHEAD = 1024
#: Bytes Python spends on a str, bytes or number besides its characters.
OBJECT_OVERHEAD = 64

#: Stands for this instance's address in a built body, qsite not knowing its own: each answer has
#: the address the request was made to put in its place (the OpenAPI document's terms, the JSON
#: Feed's feed_url and home_page_url: :meth:`Entry.at_base_url`).
BASE_URL_PLACEHOLDER = "https://base-url.invalid"

#: How stored and served times are written (RFC 3339, UTC, whole seconds).
_STORED_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def dumps(payload) -> bytes:
    """The JSON body of a response: compact, UTF-8, non-ASCII kept as it is.

    orjson writes the same bytes as ``json.dumps(payload, ensure_ascii=False,
    separators=(",", ":"))`` for the values bodies hold (strings, integers,
    lists, objects), fifteen times as fast: on an uncached request the
    standard encoder was a tenth of the time.
    """
    return orjson.dumps(payload)


# Cached: every response built from one data version has the same time, and
# strptime costs more than the rest of building a small response.
@lru_cache(maxsize=64)
def parse_stored_time(rfc3339: str) -> datetime:
    """``2026-11-20T08:00:00Z`` as an aware UTC datetime."""
    return datetime.strptime(rfc3339, _STORED_TIME_FORMAT).replace(tzinfo=timezone.utc)


@lru_cache(maxsize=64)
def http_date(rfc3339: str) -> str:
    """``2026-11-20T08:00:00Z`` as an HTTP date (``Fri, 20 Nov 2026 08:00:00 GMT``)."""
    return format_datetime(parse_stored_time(rfc3339), usegmt=True)


_now = [0, ""]


def now_text() -> str:
    """:func:`qsite.db.model.utc_now`, written again only when the second changes: every uncached
    build asks, and writing the time took a third of making its :class:`Entry`."""
    second = int(time.time())
    if second != _now[0]:
        _now[:] = second, format_time(datetime.fromtimestamp(second, timezone.utc))
    return _now[1]


def size_of(value) -> int:
    """About how many bytes ``value`` (a cache key: nested tuples of str, bytes, numbers, None) takes."""
    size = OBJECT_OVERHEAD
    if isinstance(value, tuple):
        # a key's members are mostly not tuples: counted here, without a call each
        for part in value:
            if isinstance(part, tuple):
                size += size_of(part)
            else:
                size += OBJECT_OVERHEAD + len(part) if isinstance(part, (str, bytes)) else OBJECT_OVERHEAD
    elif isinstance(value, (str, bytes)):
        size += len(value)
    return size


def etag_for(body: bytes) -> str:
    """A strong ETag from the bytes themselves, so it is the same in every process.

    XXH3's 128 bits: a validator needs no cryptographic strength (it is
    compared with what this URL answered before, never trusted as proof), and
    it is an order of magnitude cheaper than blake2b on a page (docs/performance.md,
    "Measurements behind the code").
    """
    return '"' + xxhash.xxh3_128_hexdigest(body) + '"'


def etag_matches(if_none_match: str, etag: str) -> bool:
    """RFC 9110 weak comparison of an ``If-None-Match`` list against our strong ``etag`` (``"..."``).

    werkzeug.http reads the list (``*``, ``W/``, commas inside quotes). A client sending back
    the one ETag it was given is answered without parsing, the list's cost a twentieth of a 304
    (docs/performance.md, "Measurements behind the code").
    """
    return if_none_match == etag or parse_etags(if_none_match).contains_weak(etag[1:-1])


#: The three forms of an HTTP-date (RFC 9110 5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms.
_HTTP_DATES = (
    re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT"),
    re.compile(r"(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT"),
    re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"),
)


def parse_http_date(value: str) -> datetime | None:
    """``value`` as an aware UTC datetime if it is exactly one HTTP-date, else None.

    Strict on purpose: RFC 9110 13.1.3 says an ``If-Modified-Since`` that is
    not a valid HTTP-date, or has more than one member, is ignored. The form
    is checked here because werkzeug's ``parse_date`` alone is lenient (it
    reads the first date of a list, a date with no zone or a numeric zone);
    werkzeug then reads it (None for no such date: 31 Feb, 25:00).
    """
    value = value.strip()
    if any(pattern.fullmatch(value) for pattern in _HTTP_DATES):
        return parse_date(value)
    return None


def not_modified_since(if_modified_since: str, last_modified: datetime | None) -> bool:
    if last_modified is None:
        return False
    since = parse_http_date(if_modified_since)
    if since is None:
        return False  # not one valid HTTP-date: ignored (RFC 9110 13.1.3)
    return last_modified <= since


class Conditions(NamedTuple):
    """What a request's headers say about answering it from a built response."""

    if_none_match: str | None
    if_modified_since: str | None
    #: A cookie or ``Authorization`` came with it: Datasette's router decides how that is cached.
    credentialed: bool


def read_conditions(headers) -> Conditions:
    """The conditional headers of ASGI ``headers``, and whether credentials came.

    Several ``If-None-Match`` lines are one list (RFC 9110 5.3); a second
    ``If-Modified-Since`` makes it more than one member, so it is ignored
    (kept as ``""``, which no date matches; RFC 9110 13.1.3).
    """
    if_none_match = if_modified_since = None
    credentialed = False
    for key, value in headers:
        key = key.lower()
        if key == b"if-none-match":
            text = value.decode("latin-1")
            if_none_match = text if if_none_match is None else f"{if_none_match}, {text}"
        elif key == b"if-modified-since":
            if_modified_since = value.decode("latin-1") if if_modified_since is None else ""
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
        # None for a time ahead of this clock (the writer's clock ahead of a replica's): RFC 9110
        # 8.8.2.1 forbids a Last-Modified after the answer's Date, and any other date would either
        # not be the data's own or could answer an If-Modified-Since wrongly. The ETag stays.
        if updated_at and updated_at <= now_text():
            self.headers.append((b"last-modified", http_date(updated_at).encode()))
            self.last_modified = parse_stored_time(updated_at)
        # RFC 9110 15.4.5: a 304 carries the validators and caching headers, no body.
        self.not_modified_headers = [cache_control, etag, *CORS_HEADERS, VARY]
        self.size = len(body) + size_of(key) + headers_size(self.headers) + ENTRY_OVERHEAD

    def at_base_url(self, base_url: str, count: int) -> "Entry":
        """This entry with the first ``count`` :data:`BASE_URL_PLACEHOLDER` of its body made ``base_url``.

        A new entry, with the ETag and length of its own body, never kept: the one kept (with the
        placeholder) serves every address. Only the first ``count``: a body's own links come
        before its data (:attr:`~qsite.service.api.endpoint.Endpoint.absolute_links`), which could
        hold the placeholder's text.
        """
        other = Entry.__new__(Entry)
        other.key, other.datasets, other.last_modified = self.key, self.datasets, self.last_modified
        other.body = self.body.replace(BASE_URL_PLACEHOLDER.encode(), base_url.encode(), count)
        other.etag = etag_for(other.body)
        etag, length = (b"etag", other.etag.encode()), (b"content-length", str(len(other.body)).encode())
        changed = {b"etag": etag, b"content-length": length}
        other.headers = [changed.get(header[0], header) for header in self.headers]
        other.not_modified_headers = [changed.get(header[0], header) for header in self.not_modified_headers]
        other.size = self.size + len(other.body) - len(self.body)
        return other

    def vary_on_host(self) -> None:
        """Say that this entry's body holds the request's ``Host`` (``Vary: ..., Host``); only for an entry made
        for one request (:meth:`at_base_url`), never for one kept."""
        vary = (VARY[0], VARY[1] + b", Host")
        self.headers = [vary if header == VARY else header for header in self.headers]
        self.not_modified_headers = [vary if header == VARY else header for header in self.not_modified_headers]

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
