"""The page behind each problem ``type`` URI: ``/api/v1/problems/<name>``.

RFC 9457 (section 3.1.1) asks that a problem type URI, when dereferenced,
lead to documentation of the problem for people. Each type the service sends
(:data:`qsite.service.http.problems.PROBLEMS`) gets a short HTML page: its title and
status, what causes it and what to do. Built once, served like any other
document (cacheable, CORS, GET and HEAD).
"""

from __future__ import annotations

from html import escape

from qsite.service.http.problems import API_PREFIX, CORS_HEADERS, PROBLEM_PREFIX, PROBLEMS

#: What each problem means and what a client can do about it.
DESCRIPTIONS = {
    "invalid-parameters": "One or more query parameters were not accepted: an unknown or repeated parameter, "
    "or a value out of range. The errors member names each one with what it accepts. Fix them and try again; "
    "the OpenAPI document lists every parameter.",
    "bad-request": "The request could not be understood as asked: a request target that is neither a path nor "
    "an absolute URL, the target * with a method other than OPTIONS, or a Datasette page asked for something "
    "it cannot do (sorting by a column that does not exist, SQL that does not run).",
    "not-found": "There is no such endpoint or item. The endpoints are listed at " + API_PREFIX + ".",
    "forbidden": "The deployment's Datasette permissions (allow blocks in datasette.yaml, or a permission plugin) "
    "do not let this request read the canned query or database behind the endpoint. Requests with the right "
    "credentials may; the same rules apply to the query's own page.",
    "method-not-allowed": "The service is read-only: it answers GET and HEAD (and OPTIONS for CORS preflight). "
    "The Allow header lists the methods.",
    "uri-too-long": "The path and query string together are longer than the service accepts (8 KiB under /api/v1, 32 KiB "
    "on Datasette's pages). No URL of the API needs that much.",
    "rate-limited": "The client sent more requests than fair use allows in the window. Wait the seconds given "
    "in Retry-After; the RateLimit and RateLimit-Policy headers say the quota and what is left.",
    "query-running": "A client's SQL queries on the Datasette pages (?sql= and _where=) run one at a time, the next "
    "waiting for the one before, and at most 8 may wait; this one was one too many. Wait for the earlier ones to "
    "finish (Retry-After gives the time limit of one query).",
    "header-fields-too-large": "The request's header fields are larger than the service accepts (8 KiB in all under /api/v1, 32 KiB "
    "on Datasette's pages). "
    "Send fewer or shorter cookies and headers.",
    "internal-error": "A fault in the service. It is logged with its details, which are never sent to clients. "
    "Trying again may work; if it persists, the operators will see it in the log.",
    "no-data": "Nothing has been ingested yet for what was asked (a new installation). Retry after the seconds "
    "given in Retry-After.",
    "unavailable": "The database could not be read just now (it is being replaced, or is briefly locked). "
    "Retry after the seconds given in Retry-After.",
}

#: Seconds a shared cache or browser may keep a problem page.
PAGE_MAX_AGE = 86400

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title} ({status}) - qsite API</title></head>
<body>
<h1>{title}</h1>
<p>Problem type <code>{type}</code>, HTTP status {status}.</p>
<p>{description}</p>
<p>Errors of the qsite API are RFC 9457 problem details (<code>application/problem+json</code>) with the members
<code>type</code>, <code>title</code>, <code>status</code> and <code>detail</code>, and maybe others.
The API is described at <a href="{openapi}">{openapi}</a>.</p>
</body>
</html>
"""


def _page(name: str) -> bytes:
    status, title = PROBLEMS[name]
    return _TEMPLATE.format(
        title=escape(title),
        status=status,
        type=escape(PROBLEM_PREFIX + name),
        description=escape(DESCRIPTIONS[name]),
        openapi=escape(API_PREFIX + "/openapi.json"),
    ).encode("utf-8")


#: name -> page bytes, for every problem type.
PAGES = {name: _page(name) for name in PROBLEMS}


def problem_page(path: str) -> tuple[int, list, bytes] | None:
    """``(status, headers, body)`` of the page at ``path``, or None if no problem type has that path."""
    if not path.startswith(PROBLEM_PREFIX):
        return None
    body = PAGES.get(path[len(PROBLEM_PREFIX) :])
    if body is None:
        return None
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", f"public, max-age={PAGE_MAX_AGE}".encode()),
        *CORS_HEADERS,
    ]
    return 200, headers, body
