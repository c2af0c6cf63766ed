"""RFC 9457 problem details and the headers every /api/v1 response carries.

Kept apart from the plugin so that ASGI middleware (the rate limiter in
``service/http/ratelimit.py``) answers with exactly the same error shape and CORS
headers as the routes do, without importing Datasette's plugin machinery.
"""

from __future__ import annotations

import json

from qsite.db.model import VERSION

#: The path every API route lives under.
API_PREFIX = "/api/v1"

#: Problem ``type`` URIs are ``/api/v1/problems/<name>``.
PROBLEM_PREFIX = API_PREFIX + "/problems/"

PROBLEM_CONTENT_TYPE = "application/problem+json"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"
HTML_CONTENT_TYPE = "text/html; charset=utf-8"

#: Headers a browser script may read from a cross-origin response.
EXPOSE_HEADERS = "ETag, Last-Modified, Link, Retry-After, RateLimit, RateLimit-Policy, X-Qsite-Version, X-Qsite-Snapshot"

#: Which qsite answered (its version as installed): on every response with the CORS headers, so an
#: operator or a client can tell the versions of a rolling update apart. The snapshot a following
#: replica serves is named in ``X-Qsite-Snapshot`` (:mod:`qsite.service.datasette.handler`).
VERSION_HEADER = (b"x-qsite-version", VERSION.encode())
SNAPSHOT_HEADER = b"x-qsite-snapshot"

#: On every /api/v1 response, errors included, as ASGI (bytes) header pairs.
CORS_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"access-control-allow-origin", b"*"),
    (b"access-control-expose-headers", EXPOSE_HEADERS.encode()),
    VERSION_HEADER,
)

#: On every /api/v1 answer: the same URL may be answered differently to a credentialed
#: request (Datasette's privacy rule), so shared caches must tell the two apart.
#: Datasette's router adds it too; with it on every answer, an answer sent
#: without the router (service/datasette/plugin.py) is the same as one sent through it.
VARY = (b"vary", b"Cookie, Authorization")

#: Errors must never be stored by a cache: the next request may succeed.
NO_STORE = (b"cache-control", b"no-store")

#: The methods the API answers (OPTIONS: CORS preflight); everything else gets 405 with these in ``Allow``.
ALLOWED_METHODS = "GET, HEAD, OPTIONS"

#: Answer to a CORS preflight (OPTIONS), cached by browsers for a day.
PREFLIGHT_HEADERS: tuple[tuple[bytes, bytes], ...] = CORS_HEADERS + (
    (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-max-age", b"86400"),
    VARY,
)

#: name -> (status, title) of every problem type the service sends.
PROBLEMS = {
    "invalid-parameters": (400, "Invalid query parameters"),
    "bad-request": (400, "Bad request"),
    "not-found": (404, "Not found"),
    "forbidden": (403, "Forbidden"),
    "method-not-allowed": (405, "Method not allowed"),
    "uri-too-long": (414, "Request target too long"),
    "rate-limited": (429, "Too many requests"),
    "query-running": (429, "Too many queries waiting"),
    "header-fields-too-large": (431, "Header fields too large"),
    "internal-error": (500, "Internal error"),
    "no-data": (503, "No data yet"),
    "unavailable": (503, "Service unavailable"),
}


def problem_body(name: str, detail: str, errors: list[dict] | None = None, status: int | None = None) -> dict:
    """The problem object: ``type``, ``title``, ``status``, ``detail`` and maybe ``errors``.

    :param errors: ``[{"parameter": ..., "detail": ...}]``, one per bad parameter.
    """
    default_status, title = PROBLEMS[name]
    body = {"type": PROBLEM_PREFIX + name, "title": title, "status": status or default_status, "detail": detail}
    if errors:
        body["errors"] = errors
    return body


def problem_response(
    name: str,
    detail: str,
    errors: list[dict] | None = None,
    headers: list[tuple[bytes, bytes]] | tuple = (),
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """``(status, headers, body)`` of a complete problem+json response.

    ``headers`` are added after the standard ones (e.g. ``Retry-After``, ``Allow``).
    """
    body = problem_body(name, detail, errors)
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    all_headers = [
        (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
        (b"content-length", str(len(data)).encode()),
        NO_STORE,
        *CORS_HEADERS,
        VARY,
        *headers,
    ]
    return body["status"], all_headers, data


async def send_response(send, status: int, headers, body: bytes, head: bool = False) -> None:
    """Send one complete ASGI HTTP response; ``head`` keeps the headers and drops the body."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_problem(send, name: str, detail: str, errors=None, headers=(), head: bool = False) -> None:
    """Send a problem+json response through an ASGI ``send``."""
    status, all_headers, body = problem_response(name, detail, errors, headers)
    await send_response(send, status, all_headers, body, head=head)
