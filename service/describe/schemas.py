"""The response schemas of the OpenAPI document: the shape of every JSON body /api/v1 answers.

Bounds and enums come from the endpoint table, the data model and the
problem types, so a schema cannot promise what the service does not enforce;
the tests validate every response they see against these.
"""

from __future__ import annotations

from http import HTTPStatus

from qsite.db.model import AUTHOR_CHARS, AUTHORS_MAX, IMAGE_URL_MAX

from qsite.service.api.feeds import ATOM, JSON_FEED_VERSION
from qsite.service.api.endpoint import SQLITE
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.kinds import OneOf
from qsite.service.api.news_bodies import SEARCH_COUNT_MAX
from qsite.service.api.parameter_table import LIMIT_MAX, LIMIT_MIN, PARAMETERS
from qsite.service.api.parameters import ECHO_MAX, MAX_ERRORS
from qsite.service.http.problems import PROBLEM_PREFIX, PROBLEMS

REF = "#/components/"

_TIME = {"type": "string", "format": "date-time", "description": "UTC, RFC 3339 with Z, whole seconds."}
_URL = {"type": "string", "format": "uri"}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}


def ref(kind: str, name: str) -> dict:
    return {"$ref": f"{REF}{kind}/{name}"}


def _object(properties: dict, description: str = "") -> dict:
    schema = {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}
    if description:
        schema["description"] = description
    return schema


def _list(item: str, description: str) -> dict:
    """A whole collection: how many, when it last changed, and every ``item``."""
    return _object(
        {
            "count": {"type": "integer", "minimum": 0},
            "updated_at": _TIME,
            "results": {"type": "array", "items": ref("schemas", item)},
        },
        description,
    )


def enums() -> dict:
    """Each enum of the parameters (:class:`~qsite.service.api.kinds.OneOf`), once, by its component name.

    Parameters, bodies and headers refer to these rather than repeat the list: an enum
    written inline in several places became a type per place in generated clients
    (NewsTag, NewsItemTag, SourceTag, ...).
    """
    return {param.kind.component: param.kind.enum for param in PARAMETERS if isinstance(param.kind, OneOf)}


def nullable(schema: dict, **more) -> dict:
    """``schema`` or null, as ``anyOf`` (openapi-python-client and openapi-typescript read it as
    ``X | None``; ``type: [X, "null"]`` with an enum made a new enum type per use)."""
    return {"anyOf": [schema, {"type": "null"}], **more}


TAG = ref("schemas", "Tag")


def _page_of(item: str) -> dict:
    """The fields every page of a walk has after its count: its size, the next page, when its data changed, the items."""
    return {
        "limit": {"type": "integer", "minimum": LIMIT_MIN, "maximum": LIMIT_MAX},
        "next": nullable(
            {"type": "string", "format": "uri-reference"},
            description="The next page (also sent as Link rel=next); null on the last page.",
        ),
        "updated_at": _TIME,
        "results": {"type": "array", "maxItems": LIMIT_MAX, "items": ref("schemas", item)},
    }
LANGUAGE_CODE = ref("schemas", "LanguageCode")


_QSITE_VERSION = {"type": "string", "description": "The version of qsite serving this answer, also sent as X-Qsite-Version."}
_SNAPSHOT_ID = nullable(
    {"type": "string"},
    description="The snapshot file a following replica serves (also sent as X-Qsite-Snapshot); null on an instance "
    "serving its own live database.",
)


def _json_feed() -> dict:
    """JSON Feed 1.1 as qsite writes it: the spec's required keys, and the ones every item has here."""
    author = _object({"name": {"type": "string"}, "url": _URL})
    item = {
        "type": "object",
        "required": ["id", "url", "title", "summary", "content_text", "date_published", "authors", "tags"],
        "properties": {
            "id": {"type": "string", "description": "A tag: URI made from the item's id; never changes."},
            "url": {**_URL, "description": "The original article, at its publisher."},
            "title": {"type": "string"},
            "summary": {"type": "string"},
            "content_text": {"type": "string"},
            "date_published": _TIME,
            "authors": {"type": "array", "items": author, "description": "The publisher, credited with the original article."},
            "tags": {"type": "array", "items": TAG},
            "image": _URL,
        },
    }
    return {
        "type": "object",
        "description": "JSON Feed 1.1 (https://www.jsonfeed.org/version/1.1/); keys starting with _ are qsite's extensions.",
        "required": ["version", "home_page_url", "feed_url", "title", "items"],
        "properties": {
            "version": {"const": JSON_FEED_VERSION},
            "home_page_url": {**_URL, "description": "The documentation page of this interface, at the address asked."},
            "feed_url": {**_URL, "description": "This feed at the address asked, its query in canonical form."},
            "title": {"type": "string"},
            "items": {"type": "array", "maxItems": LIMIT_MAX, "items": item},
        },
    }


def _health() -> dict:
    """/api/v1/health's body and what it is made of, as components: each enum once (one type in generated clients)."""
    count = {"type": "integer", "minimum": 0}
    ingest = _object(
        {
            "status": {**ref("schemas", "IngestStatus"), "description": "Of the latest run."},
            "last_run_at": {**_TIME, "description": "When the latest run ended (or began, while it runs)."},
            "last_success_at": nullable(_TIME, description="When the latest run that did not fail ended."),
            "sources": {**count, "description": "How many sources (feeds, or site exports) this kind has read."},
            "failed_sources": {**count, "description": "How many of them failed in their latest run."},
            "age_seconds": nullable(count, description="Seconds since last_success_at; null if no run of this kind worked."),
            "max_age_seconds": {
                **count,
                "description": "This kind's bound: api.health_max_data_age for news, api.health_max_site_age for the site export.",
            },
            "fresh": {"type": "boolean", "description": "Whether age_seconds is within max_age_seconds."},
            "decides": {"type": "boolean", "description": "Whether this kind decides the status: the config ingests it."},
        },
        "The latest ingest of one kind, its age and its bound.",
    )
    maybe_ingest = nullable(ref("schemas", "Ingest"))
    health = _object(
        {
            "status": {
                **ref("schemas", "HealthStatus"),
                "description": "ok (200); stale: a kind of ingest that decides is older than its bound (without runs: "
                "the data is older than max_data_age_seconds), no-data: nothing ingested or no database loaded, "
                "unavailable: the database cannot be read (503).",
            },
            "qsite_version": _QSITE_VERSION,
            "snapshot": _SNAPSHOT_ID,
            "data_version": nullable(count, description="The sum of the data's change counters."),
            "data_updated_at": nullable(
                _TIME, description="When the last ingest run that did not fail ended; without runs, when the data last changed."
            ),
            "data_age_seconds": nullable(count, description="Seconds since data_updated_at."),
            "max_data_age_seconds": {**count, "description": "The configured bound (api.health_max_data_age)."},
            "ingests": _object({"news": maybe_ingest, "site": maybe_ingest}, "The latest ingest of each kind; null if never."),
        },
        "Whether this instance has recent data to serve.",
    )
    return {
        "Health": health,
        "HealthStatus": {"type": "string", "enum": ["ok", "stale", "no-data", "unavailable"]},
        "Ingest": ingest,
        "IngestStatus": {"type": "string", "enum": ["running", "ok", "unchanged", "warning", "failed"]},
    }


def schemas() -> dict:
    count = {"type": "integer", "minimum": 0}
    statuses = sorted({status for status, _ in PROBLEMS.values()})
    return {
        **enums(),
        **_health(),
        "Section": _object(
            {
                "id": {"type": "string", "description": "Unique within its course."},
                "title": {"type": "string"},
                "position": {"type": "integer", "minimum": 1},
                "slide_count": count,
                "url": nullable(_URL),
            }
        ),
        "Course": _object(
            {
                "id": {"type": "string"},
                "title": {"type": "string"},
                "summary": {"type": "string"},
                "level": nullable({"type": "string"}),
                "url": _URL,
                "position": {"type": "integer", "minimum": 1},
                "section_count": count,
                "slide_count": count,
                "sections": {"type": "array", "items": ref("schemas", "Section")},
            },
            "A course; never any quiz content.",
        ),
        "CourseList": _list("Course", "The catalog in catalog order."),
        "GlossaryEntry": _object(
            {
                "id": {"type": "string"},
                "term": {"type": "string"},
                "definition": {"type": "string"},
                "lesson": _object({"title": {"type": "string"}, "url": _URL}, "The lesson that teaches the term."),
            }
        ),
        "GlossaryList": _list("GlossaryEntry", "Entries ordered by term, ignoring letter case."),
        "NewsItem": _object(
            {
                "id": {"type": "string"},
                "title": {"type": "string"},
                "url": _URL,
                "source": {"type": "string", "description": "The publisher; the item belongs to it."},
                "summary": {"type": "string"},
                "tag": TAG,
                "published_at": _TIME,
                "image_url": nullable(
                    {**_URL, "maxLength": IMAGE_URL_MAX},
                    description="The item's own image as its feed gives it (Media RSS, an image enclosure, "
                    "itunes:image), http(s) only; null when it has none. Never the feed's logo, even when an item "
                    "repeats it.",
                ),
                "authors": {
                    "type": "array",
                    "maxItems": AUTHORS_MAX,
                    "items": {"type": "string", "minLength": 1, "maxLength": AUTHOR_CHARS},
                    "description": "Its authors' names as the feed gives them, never an email address; empty when "
                    "the feed names none.",
                },
                "updated_at": {
                    **_TIME,
                    "description": "When qsite last changed anything served of this item (added it, or its title, "
                    "summary, date, tag, image or authors changed). UTC, RFC 3339 with Z, whole seconds.",
                },
            }
        ),
        "NewsPage": _object(
            {
                "count": {
                    **count,
                    "description": "All items matching the filters (tag, source, since, until, q, updated_since), "
                    "not just this page.",
                },
                "count_exact": {
                    "type": "boolean",
                    "description": f"false when a search (q) or updated_since matches more than {SEARCH_COUNT_MAX} "
                    f"items: count is then {SEARCH_COUNT_MAX}, a lower bound. Otherwise true.",
                },
                "tag": nullable(TAG, description="null: all tags."),
                **_page_of("NewsItem"),
            },
            "In the order sort names: by default newest first, published_at descending, then id descending; with "
            "updated_since, in the order the changes were made, oldest first (updated_at never decreases).",
        ),
        "RemovedItem": _object(
            {
                "id": {"type": "string", "description": "The id the item had in /api/v1/news, where it is no longer listed."},
                "removed_at": {**_TIME, "description": "When qsite removed it. UTC, RFC 3339 with Z, whole seconds."},
            }
        ),
        "RemovedPage": _object(
            {
                "count": {**count, "description": "All items removed at or after since, not just this page."},
                "count_exact": {
                    "type": "boolean",
                    "description": f"false when more than {SEARCH_COUNT_MAX} items match: count is then "
                    f"{SEARCH_COUNT_MAX}, a lower bound. Otherwise true.",
                },
                **_page_of("RemovedItem"),
            },
            "In the order the items were removed, oldest first (removed_at never decreases).",
        ),
        "Source": _object(
            {
                "name": {
                    "type": "string",
                    "description": "The publisher's name, as in the source of its news items and in the source parameter.",
                },
                "tag": {
                    # $ref with a sibling description: allowed in OpenAPI 3.1 (JSON Schema 2020-12)
                    **TAG,
                    "description": "The category its items get, unless a rule of the configuration gives another.",
                },
                "feed_url": {
                    "type": "string",
                    "description": "The address of its feed, without credentials: no user or password, the value of "
                    "every credential-like parameter REDACTED, a local file by its name only.",
                },
                "item_count": {**count, "description": "How many of its news items are held."},
                "last_success_at": nullable(
                    _TIME, description="When its feed was last fetched successfully (changed or not); null if never."
                ),
            },
            "A publisher qsite follows.",
        ),
        "SourceList": _list("Source", "Every publisher, ordered by name."),
        "Stats": _object(
            {
                "courses": count,
                "slides": count,
                "quizzes": count,
                "question_bank_size": count,
                "glossary_terms": count,
                "news_items": count,
                "updated_at": _TIME,
            }
        ),
        "Index": _object(
            {
                "name": {"type": "string"},
                "version": {"const": "v1"},
                "terms": {"type": "string"},
                "documentation": {"const": ENDPOINTS["openapi"].url},
                "qsite_version": _QSITE_VERSION,
                "snapshot": _SNAPSHOT_ID,
                "endpoints": {
                    "type": "object",
                    "additionalProperties": {"type": "string", "format": "uri-template"},
                },
                "languages": {
                    "type": "array",
                    "description": "The languages this interface is described in: the values lang takes.",
                    "items": _object(
                        {
                            "code": {**LANGUAGE_CODE, "description": "Its BCP 47 code, as lang takes it."},
                            "name": {"type": "string", "description": "Its name in itself."},
                        }
                    ),
                },
            }
        ),
        "ParameterError": _object(
            {
                "parameter": {
                    "type": "string",
                    "maxLength": ECHO_MAX + 1,
                    "description": f"The parameter's name; a longer one is cut to {ECHO_MAX} characters and \u2026.",
                },
                "detail": {"type": "string"},
            },
        ),
        "Problem": {
            "type": "object",
            "description": "RFC 9457 problem details.",
            "required": ["type", "title", "status", "detail"],
            "properties": {
                # x-enum-varnames: the names generated clients give the members (openapi-python-client,
                # OpenAPI Generator), else VALUE_0, VALUE_1, ... for values that are no identifiers
                "type": {
                    "type": "string",
                    "format": "uri-reference",
                    "enum": [PROBLEM_PREFIX + name for name in PROBLEMS],
                    "x-enum-varnames": [name.replace("-", "_").upper() for name in PROBLEMS],
                },
                "title": {"type": "string"},
                "status": {
                    "type": "integer",
                    "enum": statuses,
                    "x-enum-varnames": [HTTPStatus(status).name for status in statuses],
                },
                "detail": {"type": "string"},
                "errors": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_ERRORS,
                    "description": f"One per bad query parameter (400 only), at most {MAX_ERRORS}; "
                    "when there are more, detail ends with how many more were not listed.",
                    "items": ref("schemas", "ParameterError"),
                },
            },
        },
        "Snapshot": _object(
            {
                "file": {"type": "string", "pattern": r"^site-v\d{8,}-[0-9a-f]{16}\.db$"},
                "data_version": {**count, "description": "The sum of the data's change counters: grows with every change."},
                "schema_version": {"type": "integer", "minimum": 1},
                "bytes": {"type": "integer", "minimum": 1},
                "sha256": _SHA256,
                "published_at": _TIME,
                "download": {"type": "string", "format": "uri-reference", "description": "The file itself."},
            },
            "The published snapshot (a whole SQLite database) this replica serves.",
        ),
        # format binary: what generators read as a file (bytes); contentMediaType: what the bytes are
        "SnapshotFile": {"type": "string", "format": "binary", "contentMediaType": SQLITE},
        "AtomFeed": {"type": "string", "contentMediaType": ATOM, "description": "Atom 1.0 (RFC 4287)."},
        "JsonFeed": _json_feed(),
        "OpenAPI": {
            "type": "object",
            "required": ["openapi", "info", "paths"],
            "properties": {"openapi": {"const": "3.1.0"}, "info": {"type": "object"}, "paths": {"type": "object"}},
        },
    }

