"""The OpenAPI 3.1 document of /api/v1, derived from the endpoint table.

Paths, operations and parameters (with their enums, bounds and defaults) come
from :mod:`qsite.service.api.endpoints`, problem types from :mod:`qsite.service.http.problems`, so
the document cannot drift from what the service enforces; the tests validate
every response they see against it. What is written here is what the table
does not say: headers and shared responses (the response schemas are in
:mod:`qsite.service.describe.schemas`). It is written in English; :func:`build_documents`
makes it in every interface language (:mod:`qsite.service.i18n`).
"""

from __future__ import annotations

from qsite.db.model import VERSION

from qsite.service.api.feeds import ATOM, JSON_FEED
from qsite.service.api.endpoint import HTML, JSON, Endpoint
from qsite.service.api.endpoints import ENDPOINTS, TAGS_DOCUMENTED, USAGE_TERMS
from qsite.service.api.parameter_table import PARAMETERS
from qsite.service.i18n import LANGUAGES, Catalogs, translate_document
from qsite.service.api.parameters import MAX_ERRORS
from qsite.service.api.responses import BASE_URL_PLACEHOLDER
from qsite.service.http.problems import ALLOWED_METHODS, EXPOSE_HEADERS, PROBLEM_CONTENT_TYPE
from qsite.service.describe.schemas import ref, schemas

#: What Datasette's router sends instead when a request carries a cookie or Authorization.
PRIVATE = "private, no-store"
RATE_LIMIT_PATTERN = r'^"default";r=\d+;t=\d+$'
RATE_LIMIT_POLICY_PATTERN = r'^"default";q=\d+;w=\d+$'


def _headers(max_age: int) -> dict:
    def header(schema: dict, description: str, required: bool = True) -> dict:
        return {"description": description, "required": required, "schema": schema}

    rate_limit = (
        {"type": "string", "pattern": RATE_LIMIT_PATTERN},
        "IETF httpapi RateLimit: r requests left in the window, t seconds until r grows again.",
    )
    rate_limit_policy = (
        {"type": "string", "pattern": RATE_LIMIT_POLICY_PATTERN},
        "IETF httpapi RateLimit-Policy: q requests per window of w seconds.",
    )
    counted = " Sent on every response counted by the fair-use limit, unless api.rate_limit is off."
    return {
        "CacheControl": header(
            {"type": "string", "enum": [f"public, max-age={max_age}", PRIVATE]},
            f"How long the response may be reused; {PRIVATE} when the request carried a cookie or "
            "Authorization (Datasette's rule for credentialed requests).",
        ),
        "NoStore": header(
            {"type": "string", "enum": ["no-store", PRIVATE]},
            f"Errors are never cached; {PRIVATE} when the request carried a cookie or Authorization.",
        ),
        "ETag": header({"type": "string", "pattern": '^"[0-9a-f]{32}"$'}, "Strong validator of the body."),
        "LastModified": header(
            {"type": "string", "pattern": r"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$"},
            "updated_at as an HTTP date.",
        ),
        "Link": {
            "description": 'The next page, <...>; rel="next"; absent on the last page.',
            "required": False,
            "schema": {"type": "string", "pattern": '^<[^>]+>; rel="next"$'},
        },
        "AllowOrigin": header({"const": "*"}, "Any origin may read every response, errors included."),
        "QsiteVersion": header({"const": VERSION}, "The version of qsite that answered."),
        "QsiteSnapshot": header(
            {"type": "string"}, "The snapshot file this answer was built from; only on a following replica.", required=False
        ),
        "ExposeHeaders": header({"const": EXPOSE_HEADERS}, "Headers browser scripts may read."),
        "RetryAfter": header({"type": "string", "pattern": r"^\d+$"}, "Seconds to wait before trying again."),
        "ContentLanguage": header(
            ref("schemas", "LanguageCode"),
            "The language of the texts for people in this response (BCP 47).",
        ),
        "RateLimit": header(rate_limit[0], rate_limit[1] + counted, required=False),
        "RateLimitPolicy": header(rate_limit_policy[0], rate_limit_policy[1] + counted, required=False),
        "Immutable": header(
            {"type": "string", "enum": ["public, max-age=31536000, immutable", PRIVATE]},
            "A snapshot file never changes under its name.",
        ),
        "FileETag": header({"type": "string", "pattern": '^"[0-9a-f]{64}"$'}, "The file's SHA-256."),
        "ContentDisposition": header({"type": "string", "pattern": '^attachment; filename="'}, "Saved as its own name."),
        "RateLimitExhausted": header(rate_limit[0], rate_limit[1]),
        "RateLimitPolicyApplied": header(rate_limit_policy[0], rate_limit_policy[1]),
    }


_CORS = {
    "Access-Control-Allow-Origin": ref("headers", "AllowOrigin"),
    "Access-Control-Expose-Headers": ref("headers", "ExposeHeaders"),
    "X-Qsite-Version": ref("headers", "QsiteVersion"),
}
#: On every response the rate limiter counts (all but OPTIONS), when it is on.
_RATE_LIMIT = {
    "RateLimit": ref("headers", "RateLimit"),
    "RateLimit-Policy": ref("headers", "RateLimitPolicy"),
}


def _problem(description: str, **headers) -> dict:
    return {
        "description": description,
        "headers": {"Cache-Control": ref("headers", "NoStore"), **_CORS, **_RATE_LIMIT, **headers},
        "content": {PROBLEM_CONTENT_TYPE: {"schema": ref("schemas", "Problem")}},
    }


def _responses() -> dict:
    return {
        "NotModified": {
            "description": "If-None-Match matched the ETag, or If-Modified-Since is not older than the data. No body.",
            "headers": {
                "Cache-Control": ref("headers", "CacheControl"),
                "ETag": ref("headers", "ETag"),
                **_CORS,
                **_RATE_LIMIT,
            },
        },
        "FileNotModified": {
            "description": "If-None-Match matched the file's SHA-256. No body.",
            "headers": {
                "Cache-Control": ref("headers", "Immutable"),
                "ETag": ref("headers", "FileETag"),
                **_CORS,
                **_RATE_LIMIT,
            },
        },
        "BadRequest": _problem(
            "Bad query parameters: an unknown tag or lang, a limit out of range, a bad cursor, since or until, "
            "a source or q too long, an unknown parameter or one given twice (only source may be repeated). "
            f"errors names every one, up to {MAX_ERRORS}."
        ),
        "NotFound": _problem(
            "No such endpoint or item; for /api/v1/snapshot: an instance that does not follow snapshots, "
            "or a file that is not the current snapshot."
        ),
        "Forbidden": _problem(
            "The deployment's Datasette permissions do not let this request read the data behind the endpoint."
        ),
        "TooManyRequests": _problem(
            "Over the fair-use rate limit.",
            **{
                "Retry-After": ref("headers", "RetryAfter"),
                "RateLimit": ref("headers", "RateLimitExhausted"),
                "RateLimit-Policy": ref("headers", "RateLimitPolicyApplied"),
            },
        ),
        "Unavailable": _problem(
            "No data has been ingested yet (before the first ingest; on a following replica, every path "
            "before its first snapshot is in), or the database is briefly unreadable.",
            **{"Retry-After": ref("headers", "RetryAfter")},
        ),
        "InternalError": _problem("A fault in the service; logged, and never shown to the client in any detail."),
        "UriTooLong": _problem("The path and query string are over 8 KiB together."),
        "HeaderFieldsTooLarge": _problem("The header fields are over 8 KiB in all."),
    }


def _parameters() -> dict:
    """Every parameter of the table: query parameters first, then path parameters."""
    components = {}
    for param in sorted(PARAMETERS, key=lambda param: param.where == "path"):
        component = {"name": param.name, "in": param.where, "required": param.where == "path"}
        if param.description:
            component["description"] = param.description
        component["schema"] = param.schema
        if param.repeat:
            component["style"], component["explode"] = "form", True  # source=A&source=B
        if param.example is not None:
            component["example"] = param.example
        components[param.ref] = component
    return components


def _file(endpoint: Endpoint) -> dict:
    """The 200 of a file download: immutable, its SHA-256 as ETag."""
    return {
        "description": endpoint.returns,
        "headers": {
            "Cache-Control": ref("headers", "Immutable"),
            "ETag": ref("headers", "FileETag"),
            "Last-Modified": ref("headers", "LastModified"),
            "Content-Disposition": ref("headers", "ContentDisposition"),
            **_CORS,
            **_RATE_LIMIT,
        },
        "content": {endpoint.media_type: {"schema": ref("schemas", endpoint.schema)}},
    }


def _ok(endpoint: Endpoint) -> dict:
    headers = {
        "Cache-Control": ref("headers", "CacheControl"),
        "ETag": ref("headers", "ETag"),
        **_CORS,
        **_RATE_LIMIT,
        "X-Qsite-Snapshot": ref("headers", "QsiteSnapshot"),
    }
    if endpoint.last_modified:
        headers["Last-Modified"] = ref("headers", "LastModified")
    if endpoint.pager is not None:
        headers["Link"] = ref("headers", "Link")
    if any(param.name == "lang" for param in endpoint.params):
        headers["Content-Language"] = ref("headers", "ContentLanguage")
    if endpoint.media_type == HTML:
        content = {HTML: {"schema": {"type": "string"}}}
    else:  # JSON, or a feed (Atom, JSON Feed)
        content = {endpoint.media_type: {"schema": ref("schemas", endpoint.schema)}}
    return {"description": endpoint.returns, "headers": headers, "content": content}


#: The methods that are no operation here: the service answers each with 405 anywhere (429 over the limit).
OTHER_METHODS = ("POST", "PUT", "PATCH", "DELETE", "TRACE")
HEAD_DESCRIPTION = "The same as GET without the body: only the headers, to check whether something changed."
PREFLIGHT_DESCRIPTION = "Answers a browser's CORS preflight: any origin may read the API with GET and HEAD."


def _mechanics() -> dict:
    """What every path answers to HEAD and to a CORS preflight, said once for the document.

    They are HTTP mechanics, not operations. As operations (as the document once had them)
    every generated client grew two more methods per endpoint, and the
    HEAD operations' errors, documented with the problem body HEAD never carries, made
    the generated Python client raise JSONDecodeError. So the paths have GET only, and
    these extensions (which generators ignore) say the rest; the tests check HEAD and
    OPTIONS answers against them (tests/support/openapi_check.py).
    """
    preflight = {
        "description": "CORS preflight answer.",
        "headers": {
            **_CORS,
            "Access-Control-Allow-Methods": {"schema": {"const": "GET, HEAD, OPTIONS"}, "required": True},
            "Access-Control-Allow-Headers": {"schema": {"const": "*"}, "required": True},
            "Access-Control-Max-Age": {"schema": {"const": "86400"}, "required": True},
        },
    }
    return {
        # the status and headers the path's GET would answer, and no content
        "x-head": {"description": HEAD_DESCRIPTION},
        "x-preflight": {
            "summary": "CORS preflight",
            "description": PREFLIGHT_DESCRIPTION,
            "responses": {"204": preflight, "429": ref("responses", "TooManyRequests"), **_TOO_LARGE},
        },
    }


def _health_responses(endpoint: Endpoint) -> dict:
    """/api/v1/health: its 200 and 503 carry the same body, never cached; it takes no parameter."""
    headers = {"Cache-Control": ref("headers", "NoStore"), **_CORS, **_RATE_LIMIT, "X-Qsite-Snapshot": ref("headers", "QsiteSnapshot")}
    content = {JSON: {"schema": ref("schemas", endpoint.schema)}}
    return {
        "200": {"description": endpoint.returns, "headers": headers, "content": content},
        "400": ref("responses", "BadRequest"),
        "503": {
            "description": "The data is older than the configured bound, or there is none: the same body says which.",
            "headers": {**headers, "Retry-After": ref("headers", "RetryAfter")},
            "content": content,
        },
    }


#: Any request may be refused for its size before it is routed (service/http/targets.py).
_TOO_LARGE = {"414": ref("responses", "UriTooLong"), "431": ref("responses", "HeaderFieldsTooLarge")}


def _path(endpoint: Endpoint) -> dict:
    """The path item of ``endpoint``: its GET, the one operation (HEAD and OPTIONS: :func:`_mechanics`)."""
    if endpoint.media_type in (JSON, HTML, ATOM, JSON_FEED):
        ok, not_modified = _ok(endpoint), ref("responses", "NotModified")
    else:  # a file (the snapshot)
        ok, not_modified = _file(endpoint), ref("responses", "FileNotModified")
    responses = {"200": ok, "304": not_modified, "400": ref("responses", "BadRequest")}
    if endpoint.name == "health":
        responses = _health_responses(endpoint)
    if endpoint.path_param is not None or endpoint.following:
        responses["404"] = ref("responses", "NotFound")
    if endpoint.queries or endpoint.following:  # reads data: the deployer's permissions apply (service/datasette/access.py)
        responses["403"] = ref("responses", "Forbidden")
    responses["429"] = ref("responses", "TooManyRequests")
    responses.setdefault("503", ref("responses", "Unavailable"))  # no data yet; a follower before its first snapshot
    responses["500"] = ref("responses", "InternalError")
    responses.update(_TOO_LARGE)
    parameters = [ref("parameters", param.ref) for param in endpoint.params]
    get = {
        "operationId": endpoint.operation_id,
        "summary": endpoint.summary,
        "description": endpoint.description,
        "tags": [endpoint.tag],
        "parameters": parameters,
        "responses": responses,
    }
    item = {"get": get}
    if endpoint.path_param is not None:
        item["parameters"] = [ref("parameters", endpoint.path_param.ref)]
    return item


def _paths() -> dict:
    """A path item per endpoint of the table, in table order (``/api/v1/`` is said in the index's description)."""
    return {endpoint.url: _path(endpoint) for endpoint in ENDPOINTS.values()}


def build_document(max_age: int) -> dict:
    """The OpenAPI 3.1 document in English; ``max_age`` is the configured ``api.cache_max_age``.

    ``termsOfService`` must be an absolute URL and qsite does not know its own
    address, so it is written with :data:`BASE_URL_PLACEHOLDER` (see :func:`for_base_url`).
    """
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "qsite API",
            "version": "v1",
            "summary": "Free, read-only JSON over the cached data of a quantum-computing learning site.",
            "description": (
                "Course catalog (with sections and slide counts, never quiz content), glossary, news items with their "
                "publishers, and site totals. GET and HEAD only, no authentication; any other method is answered with "
                "405 and Allow: GET, HEAD, OPTIONS (see x-other-methods). HEAD and the CORS preflight (OPTIONS) are HTTP "
                "mechanics, not operations: HEAD answers as GET with the same status and headers and no body (x-head), "
                "OPTIONS with 204 and the CORS headers (x-preflight). Responses are cached; every 200 carries a strong "
                "ETag, Cache-Control and (for data) Last-Modified = updated_at, and answers If-None-Match / "
                "If-Modified-Since with 304. Errors are RFC 9457 problem details (application/problem+json) with "
                "Cache-Control: no-store. Every response carries CORS headers. This description exists in several "
                "languages (lang); paths, parameter names, tag values, field names and problem types are the same in "
                "all of them."
                "\n\nUsage terms: " + USAGE_TERMS
            ),
            "termsOfService": f"{BASE_URL_PLACEHOLDER}{ENDPOINTS['docs'].url}#terms",
            # What clients may do with the answers: the usage terms (the software's own license is not the data's).
            "license": {"name": "qsite usage terms", "url": f"{BASE_URL_PLACEHOLDER}{ENDPOINTS['docs'].url}#terms"},
            "x-usage-terms": USAGE_TERMS,
        },
        "servers": [{"url": "/", "description": "This instance: paths are relative to the host that served this document."}],
        # no authentication, said the way tools read it
        "security": [],
        "tags": [{"name": name, "description": description} for name, description in TAGS_DOCUMENTED.items()],
        "paths": _paths(),
        "x-other-methods": {
            "methods": list(OTHER_METHODS),
            "description": "Every other method (POST, PUT, PATCH, DELETE, TRACE and any other) is answered under "
            "/api/v1 with 405 method-not-allowed and Allow: GET, HEAD, OPTIONS; none of them is an operation here. They "
            "count against the rate limit too.",
            # inline, not a component: no path refers to it, and generators warn of unused components
            "responses": {
                "405": _problem(
                    "The API is read-only: it answers GET and HEAD.",
                    Allow={"description": "The methods the API answers.", "required": True, "schema": {"const": ALLOWED_METHODS}},
                ),
                "429": ref("responses", "TooManyRequests"),
                **_TOO_LARGE,
            },
        },
        **_mechanics(),
        "components": {
            "schemas": schemas(),
            "parameters": _parameters(),
            "headers": _headers(max_age),
            "responses": _responses(),
        },
    }


def build_documents(max_age: int, catalogs: Catalogs) -> dict[str, dict]:
    """``{language code: the document in that language}``, with the placeholder address."""
    english = build_document(max_age)
    return {language.code: translate_document(english, catalogs.gettext(language)) for language in LANGUAGES}


def for_base_url(body: bytes, base_url: str) -> bytes:
    """A built document with this instance's address (``http://host:port``, already checked) in place."""
    return body.replace(BASE_URL_PLACEHOLDER.encode(), base_url.encode())
