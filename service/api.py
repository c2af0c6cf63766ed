"""The /api/v1 endpoints: parameters, the queries they run, and the JSON they answer.

:class:`Api` answers a request given as method, raw path, raw query string and
headers, returning ``(status, headers, body)``; the plugin feeds it from
Datasette's router and from the ASGI fast path (:meth:`Api.fast`) that serves
repeats straight from :mod:`service.cache`. All SQL comes from the canned
queries in ``metadata.yml``, run with bound parameters.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable
from urllib.parse import quote, unquote, unquote_to_bytes, urlencode

from db.model import TAGS, format_time

from .cache import DataVersions, Entry, ResponseCache, Versions, read_versions
from .problems import ALLOWED_METHODS, API_PREFIX, PREFLIGHT_HEADERS, problem_response

log = logging.getLogger("qsite.api")

LIMIT_DEFAULT = 20
LIMIT_MIN = 1
LIMIT_MAX = 100
#: Longest glossary search accepted, in characters.
Q_MAX = 200
#: Seconds a client should wait when there is no data yet, or the database is busy.
NO_DATA_RETRY_AFTER = 30
UNAVAILABLE_RETRY_AFTER = 5

USAGE_TERMS = (
    "Fair use. Attribution is appreciated. News items belong to their original publishers. "
    "Use is for education and research only; the data is not investment advice."
)

TAG_DETAIL = "must be one of " + ", ".join(TAGS) + " (any letter case)"
LIMIT_DETAIL = f"must be an integer from {LIMIT_MIN} to {LIMIT_MAX}"
SINCE_DETAIL = "must be an RFC 3339 date-time with a time zone, such as 2026-11-20T08:00:00Z"
CURSOR_DETAIL = "must be a cursor exactly as given in next"
Q_DETAIL = f"must be at most {Q_MAX} characters"

#: A name echoed back in an error is cut to this many characters (plus an ellipsis),
#: and a 400 lists at most ``MAX_ERRORS`` parameters, so a hostile query string
#: cannot make the error body larger than a few KB.
ECHO_MAX = 64
MAX_ERRORS = 20

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)
_STORED_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
#: What a glossary search matches on: words, as the FTS tokenizer sees them.
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Endpoint:
    """One route: the query parameters it takes and the datasets behind it.

    :param datasets: the ``data_versions`` rows its response is built from.
    :param required: the dataset that must have been ingested, or the answer is 503.
    """

    name: str
    params: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    required: str | None = None


ENDPOINTS = {
    "index": Endpoint("index"),
    "openapi": Endpoint("openapi"),
    "courses": Endpoint("courses", (), ("catalog",), "catalog"),
    "glossary": Endpoint("glossary", ("q",), ("glossary",), "glossary"),
    "glossary_entry": Endpoint("glossary_entry", (), ("glossary",), "glossary"),
    "news": Endpoint("news", ("tag", "limit", "cursor", "since"), ("news",), "news"),
    "stats": Endpoint("stats", (), ("totals", "news"), "totals"),
}

_FIXED_PATHS = {
    "": "index",
    "/": "index",
    "/openapi.json": "openapi",
    "/courses": "courses",
    "/glossary": "glossary",
    "/news": "news",
    "/stats": "stats",
}


def resolve(path: str) -> tuple[Endpoint, str | None] | None:
    """The endpoint for a raw (still percent-encoded) path, and its ``{id}`` if any."""
    if not path.startswith(API_PREFIX):
        return None
    rest = path[len(API_PREFIX) :]
    name = _FIXED_PATHS.get(rest)
    if name:
        return ENDPOINTS[name], None
    if rest.startswith("/glossary/"):
        entry_id = rest[len("/glossary/") :]
        if entry_id and "/" not in entry_id:
            return ENDPOINTS["glossary_entry"], unquote(entry_id, errors="strict")
    return None


# -- parameters ---------------------------------------------------------------


def echo(text: str) -> str:
    """``text`` as it may be quoted back to the client: at most ``ECHO_MAX`` characters and "…"."""
    return text if len(text) <= ECHO_MAX else text[:ECHO_MAX] + "\u2026"


def parse_since(value: str) -> str | None:
    """An RFC 3339 time as the stored form (UTC, whole seconds, ``Z``), or None.

    Fractions are dropped: stored times are whole seconds, so "after 08:00:00.5"
    and "after 08:00:00" select the same items. A ``+`` that arrived unencoded
    (and so as a space) before the offset is taken as the ``+`` it was.
    """
    value = re.sub(r" (\d{2}:\d{2})$", r"+\1", value)
    match = _RFC3339.match(value)
    if not match:
        return None
    date, time_of_day, _fraction, zulu, sign, hours, minutes = match.groups()
    offset = "+00:00" if zulu else f"{sign}{hours}:{minutes}"
    try:
        moment = datetime.fromisoformat(f"{date}T{time_of_day}{offset}").astimezone(timezone.utc)
    except (ValueError, OverflowError):  # no such date, or one that leaves year 1..9999 in UTC
        return None
    return format_time(moment)


def encode_cursor(published_at: str, item_id: str) -> str:
    """The opaque ``cursor`` for the page after the item ``(published_at, item_id)``."""
    raw = json.dumps([published_at, item_id], separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(value: str) -> tuple[str, str] | None:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        published_at, item_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        return None
    if not (isinstance(published_at, str) and isinstance(item_id, str) and _STORED_TIME.match(published_at)):
        return None
    return published_at, item_id


def parse_limit(value: str) -> int | None:
    if not (value.isascii() and value.isdigit() and len(value) <= 6):
        return None
    number = int(value)
    return number if LIMIT_MIN <= number <= LIMIT_MAX else None


def split_query(query: bytes) -> list[tuple[bytes, bytes]]:
    """``(name, value)`` byte pairs of a query string, percent-decoded, ``+`` as space.

    Bytes, not text: a value that is not UTF-8 becomes a 400 naming its
    parameter rather than an exception.
    """
    pairs = []
    for part in query.split(b"&"):
        if part:
            name, _, value = part.partition(b"=")
            pairs.append((unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" "))))
    return pairs


def parse_params(endpoint: Endpoint, query: bytes) -> tuple[dict, list[dict]]:
    """The endpoint's parameters, validated and canonical, and one error per bad one.

    Unknown and repeated parameters are errors: a typo must never silently
    return unfiltered data.
    """
    values: dict = {}
    errors: list[dict] = []
    seen: dict[str, int] = {}
    raw_values: dict[str, str] = {}
    for raw_name, raw_value in split_query(query):
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            errors.append({"parameter": echo(raw_name.decode("utf-8", "replace")), "detail": "unknown parameter"})
            continue
        seen[name] = seen.get(name, 0) + 1
        if seen[name] == 2:
            errors.append({"parameter": echo(name), "detail": "given more than once"})
        if seen[name] > 1:
            continue
        if name not in endpoint.params:
            takes = ", ".join(endpoint.params)
            detail = f"unknown parameter; this endpoint takes {takes}" if takes else "unknown parameter; this endpoint takes none"
            errors.append({"parameter": echo(name), "detail": detail})
            continue
        try:
            raw_values[name] = raw_value.decode("utf-8")
        except UnicodeDecodeError:
            errors.append({"parameter": name, "detail": "must be UTF-8 text"})
    for name in endpoint.params:
        if name not in raw_values or seen.get(name, 0) > 1:
            continue
        value = raw_values[name]
        if name == "tag":
            canonical = {tag.casefold(): tag for tag in TAGS}.get(value.casefold())
            if canonical is None:
                errors.append({"parameter": "tag", "detail": TAG_DETAIL})
            values["tag"] = canonical
        elif name == "limit":
            values["limit"] = parse_limit(value)
            if values["limit"] is None:
                errors.append({"parameter": "limit", "detail": LIMIT_DETAIL})
        elif name == "since":
            values["since"] = parse_since(value)
            if values["since"] is None:
                errors.append({"parameter": "since", "detail": SINCE_DETAIL})
        elif name == "cursor":
            values["cursor"] = decode_cursor(value)
            if values["cursor"] is None:
                errors.append({"parameter": "cursor", "detail": CURSOR_DETAIL})
        elif name == "q":
            if len(value) > Q_MAX:
                errors.append({"parameter": "q", "detail": Q_DETAIL})
            # blank: no filter (None); only punctuation: no words, so nothing matches ("")
            values["q"] = " ".join(_WORD.findall(value)).casefold() if value.strip() else None
    order = {name: i for i, name in enumerate(endpoint.params)}
    errors.sort(key=lambda error: order.get(error["parameter"], len(order)))
    return values, errors


def cache_key(endpoint: Endpoint, arg: str | None, values: dict) -> tuple:
    """The same key for every request that must get the same response."""
    if endpoint.name == "news":
        return ("news", values.get("tag"), values.get("limit") or LIMIT_DEFAULT, values.get("since"), values.get("cursor"))
    if endpoint.name == "glossary":
        return ("glossary", values.get("q"))
    return (endpoint.name, arg)


# -- building responses ---------------------------------------------------------


class NoData(Exception):
    """The dataset behind the response has never been ingested."""


class Missing(Exception):
    """The requested item does not exist (404)."""


def _rows(conn: sqlite3.Connection, sql: str, params: dict) -> list[dict]:
    cursor = conn.execute(sql, params)
    columns = [column[0] for column in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def fts_query(q: str | None) -> str:
    """A glossary search as an FTS5 query: every word quoted, so all must occur.

    Quoting makes FTS syntax (``AND``, ``"``, ``*``) plain text; a search with no
    words at all becomes an empty phrase that matches nothing, never a syntax
    error. ``None`` is no search (the canned query's empty ``:q``).
    """
    if q is None:
        return ""
    return " ".join(f'"{word}"' for word in q.split()) or '""'


def dumps(payload) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def updated_at(versions: Versions, datasets: tuple[str, ...]) -> str:
    return max(versions[name][1] for name in datasets if name in versions)


def next_link(values: dict, limit: int, cursor: str) -> str:
    params = []
    if values.get("tag"):
        params.append(("tag", values["tag"]))
    params.append(("limit", limit))
    if values.get("since"):
        params.append(("since", values["since"]))
    params.append(("cursor", cursor))
    return f"{API_PREFIX}/news?{urlencode(params, quote_via=quote)}"


class Queries:
    """Turns the canned queries' rows into the API's JSON shapes (pure, sync, on one connection)."""

    def __init__(self, sql: dict[str, str]):
        self.sql = sql

    def courses(self, conn, versions, values, arg):
        courses = _rows(conn, self.sql["courses"], {})
        sections: dict[str, list] = {}
        for section in _rows(conn, self.sql["sections"], {"course": ""}):
            sections.setdefault(section.pop("course_id"), []).append(section)
        results = [{**course, "sections": sections.get(course["id"], [])} for course in courses]
        return {"count": len(results), "updated_at": updated_at(versions, ("catalog",)), "results": results}, ()

    def _glossary(self, conn, entry_id: str, q: str | None) -> list[dict]:
        rows = _rows(conn, self.sql["glossary"], {"id": entry_id, "q": fts_query(q)})
        return [
            {
                "id": row["id"],
                "term": row["term"],
                "definition": row["definition"],
                "lesson": {"title": row["lesson_title"], "url": row["lesson_url"]},
            }
            for row in rows
        ]

    def glossary(self, conn, versions, values, arg):
        results = self._glossary(conn, "", values.get("q"))
        return {"count": len(results), "updated_at": updated_at(versions, ("glossary",)), "results": results}, ()

    def glossary_entry(self, conn, versions, values, arg):
        found = self._glossary(conn, arg, None)
        if not found:
            raise Missing(f"no glossary entry with id {echo(arg)!r}")
        return found[0], ()

    def news(self, conn, versions, values, arg):
        limit = values.get("limit") or LIMIT_DEFAULT
        before, before_id = values.get("cursor") or ("", "")
        filters = {"tag": values.get("tag") or "", "since": values.get("since") or ""}
        page = _rows(conn, self.sql["news"], {**filters, "before": before, "before_id": before_id, "limit": limit + 1})
        count = conn.execute(self.sql["news_count"], filters).fetchone()[0]
        link = None
        if len(page) > limit:
            page = page[:limit]
            link = next_link(values, limit, encode_cursor(page[-1]["published_at"], page[-1]["id"]))
        payload = {
            "count": count,
            "tag": values.get("tag"),
            "limit": limit,
            "next": link,
            "updated_at": updated_at(versions, ("news",)),
            "results": page,
        }
        headers = ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()
        return payload, headers

    def stats(self, conn, versions, values, arg):
        rows = _rows(conn, self.sql["stats"], {})
        if not rows:
            raise NoData()
        return {**rows[0], "updated_at": updated_at(versions, ("totals", "news"))}, ()


def in_snapshot(conn: sqlite3.Connection, build: Callable):
    """Run ``build(conn, versions)`` in one read transaction with the versions it saw.

    The data and its ``data_versions`` come from the same snapshot, so an
    ETag and ``updated_at`` always describe exactly the bytes they go with.
    """
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        versions = read_versions(conn)
        return versions, build(conn, versions)
    finally:
        if own:
            conn.execute("COMMIT")


# -- answering -------------------------------------------------------------------


def invalid_parameters(errors: list[dict]) -> tuple[int, list, bytes]:
    """The 400 naming the bad parameters: the first ``MAX_ERRORS`` of them, and how many more."""
    shown = errors[:MAX_ERRORS]
    names = ", ".join(dict.fromkeys(error["parameter"] for error in shown))
    detail = f"invalid query parameters: {names}"
    if len(errors) > len(shown):
        detail += f" and {len(errors) - len(shown)} more not listed"
    return problem_response("invalid-parameters", detail, shown)


def _header(headers, name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class Api:
    """Answers /api/v1 requests for one database.

    :param execute_fn: runs a sync ``fn(conn)`` on a read connection of the
        database and returns its result (Datasette's ``Database.execute_fn``).
    :param versions: the :class:`~service.cache.DataVersions` of that database.
    :param documents: ``{"index": dict, "openapi": dict}``, served as they are.
    :param broken: a reason the API cannot serve data (logged, never sent).
    """

    def __init__(
        self,
        execute_fn,
        versions: DataVersions | None,
        sql: dict[str, str] | None,
        max_age: int,
        documents: dict,
        broken: str | None = None,
    ):
        self.execute_fn = execute_fn
        self.versions = versions
        self.queries = Queries(sql or {})
        self.max_age = max_age
        self.documents = documents
        self.broken = broken
        self.cache = ResponseCache()

    def refresh(self, force: bool = False) -> None:
        """Poll ``data_versions`` (rate-limited) and drop responses whose data changed."""
        if self.versions is not None:
            changed = self.versions.poll(force)
            if changed:
                self.cache.drop(changed)

    def fast(self, method: str, raw_key: tuple[bytes, bytes], headers) -> tuple | None:
        """The answer to an anonymous GET/HEAD from an already built response, else None.

        No parsing, SQL or serialisation: an alias lookup and the conditional check.
        """
        if method != "GET" and method != "HEAD":
            return None
        self.refresh()
        entry = self.cache.aliases.get(raw_key)
        if entry is None:
            return None
        if_none_match = if_modified_since = None
        for key, value in headers:
            key = key.lower()
            if key == b"cookie" or key == b"authorization":
                return None  # Datasette's router decides how those are cached
            if key == b"if-none-match":
                if_none_match = value.decode("latin-1")
            elif key == b"if-modified-since":
                if_modified_since = value.decode("latin-1")
        return entry.answer(if_none_match, if_modified_since)

    async def handle(self, method: str, path: str, query: bytes, headers) -> tuple[int, list, bytes]:
        """``(status, headers, body)`` for any request under /api/v1 (body is for GET).

        Never raises: whatever goes wrong is logged here and answered as a
        problem without internals (no traceback, SQL or file path).

        :param path: the raw path, percent-encoded, decoded from bytes as latin-1.
        """
        try:
            return await self._handle(method, path, query, headers)
        except Exception:
            log.exception("error answering %s %s", method, path)
            return problem_response("internal-error", "the request could not be answered")

    async def _handle(self, method: str, path: str, query: bytes, headers) -> tuple[int, list, bytes]:
        try:
            resolved = resolve(path)
        except UnicodeDecodeError:
            resolved = None
        if resolved is None:
            return problem_response("not-found", f"no such endpoint; the endpoints are listed at {API_PREFIX}")
        endpoint, arg = resolved
        if method == "OPTIONS":
            return 204, list(PREFLIGHT_HEADERS), b""
        if method not in ("GET", "HEAD"):
            return problem_response(
                "method-not-allowed",
                f"{echo(method)} is not allowed; the API is read-only",
                headers=[(b"allow", ALLOWED_METHODS.encode())],
            )
        values, errors = parse_params(endpoint, query)
        if errors:
            return invalid_parameters(errors)
        try:
            entry = await self._entry(endpoint, arg, values)
        except NoData:
            return self._no_data()
        except Missing as exc:
            return problem_response("not-found", str(exc))
        except sqlite3.Error:
            log.exception("database error answering %s", path)
            return problem_response(
                "unavailable",
                "the database cannot be read just now; try again shortly",
                headers=[(b"retry-after", str(UNAVAILABLE_RETRY_AFTER).encode())],
            )
        self.cache.add_alias((path.encode("latin-1"), query), entry)
        return entry.answer(_header(headers, b"if-none-match"), _header(headers, b"if-modified-since"))

    def _no_data(self):
        return problem_response(
            "no-data",
            "no data has been ingested yet; try again shortly",
            headers=[(b"retry-after", str(NO_DATA_RETRY_AFTER).encode())],
        )

    async def _entry(self, endpoint: Endpoint, arg: str | None, values: dict) -> Entry:
        key = cache_key(endpoint, arg, values)
        if endpoint.name in self.documents:
            return await self.cache.get_or_build(key, lambda: self._document(key, endpoint.name))
        if self.broken:
            raise sqlite3.OperationalError(self.broken)
        self.refresh()
        if endpoint.required not in self.versions.current:
            raise NoData()
        return await self.cache.get_or_build(key, lambda: self._build(key, endpoint, arg, values))

    async def _document(self, key, name: str):
        return Entry(key, dumps(self.documents[name]), (), None, self.max_age), True

    async def _build(self, key, endpoint: Endpoint, arg, values):
        method = getattr(self.queries, endpoint.name)

        def build(conn, versions):
            if endpoint.required not in versions:
                raise NoData()
            return method(conn, versions, values, arg)

        versions, (payload, extra_headers) = await self.execute_fn(lambda conn: in_snapshot(conn, build))
        modified = updated_at(versions, endpoint.datasets)
        entry = Entry(key, dumps(payload), endpoint.datasets, modified, self.max_age, extra_headers)
        return entry, self._storable(versions, endpoint.datasets)

    def _storable(self, seen: Versions, datasets: tuple[str, ...]) -> bool:
        """Store only what was built from the versions now current (else it is stale already)."""
        current = self.versions.current
        if all(seen.get(name) == current.get(name) for name in datasets):
            return True
        self.refresh(force=True)  # the build may simply have seen a change before the poll did
        current = self.versions.current
        return all(seen.get(name) == current.get(name) for name in datasets)
