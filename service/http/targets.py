"""Request targets and heads: their size limits, and the forms Datasette does not route.

Promises, checked in the plugin's ASGI wrapper before anything else runs (whichever ASGI server):

- **Size.** Under /api/v1 a request target (path and query string) over
  :data:`MAX_TARGET` bytes is answered 414, header fields over
  :data:`MAX_HEADERS` bytes in all 431 (RFC 9110 15.5.15, RFC 6585 5). Every
  byte of either would otherwise be parsed, and the query string kept as a
  response-cache alias. Datasette's own pages take what researchers send (a
  long ``?sql=``, an SSO proxy's cookies): :data:`PAGE_MAX_TARGET` and
  :data:`PAGE_MAX_HEADERS`, checked only on ``qsite serve``'s own server.
- **absolute-form** (``GET http://host:port/api/v1/stats HTTP/1.1``, RFC 9112
  3.2.2): a server must accept it. Some servers hand it on as the path; it is
  taken apart here, the path and query used as the target, and the
  target's authority as the ``Host`` (the received ``Host`` field is ignored,
  as that section requires).
- **asterisk-form** (``OPTIONS * HTTP/1.1``, RFC 9112 3.2.4): asks about the
  server as a whole; answered 204 with ``Allow``. Any other method with it is
  a 400.
- A path beginning ``//`` names no page: on ``qsite serve`` a 404 here (Datasette 0.65's
  "drop the trailing slash" redirect sent ``//host/`` on to ``//host``).

In someone else's Datasette (``whole_instance=False``) only targets under /api/v1 are checked.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes, urlsplit

from qsite.service.http.problems import API_PREFIX, problem_response

API_PREFIX_BYTES = API_PREFIX.encode()

#: Longest request target (path and query string) accepted, in bytes.
MAX_TARGET = 8 * 1024
#: Most bytes of header fields (names and values) accepted in one request.
MAX_HEADERS = 8 * 1024
#: The same for Datasette's own pages (``?sql=`` of a few kilobytes, large cookies): deploy/nginx.conf agrees.
PAGE_MAX_TARGET = 32 * 1024
PAGE_MAX_HEADERS = 32 * 1024
#: What ``OPTIONS *`` answers: every method the instance answers anywhere.
SERVER_METHODS = b"GET, HEAD, OPTIONS"


def raw_target(scope) -> bytes:
    """The path as the client sent it (percent-encoded, no query), as Datasette routes on it."""
    raw = scope.get("raw_path")
    if raw is None:
        raw = scope["path"].encode("utf-8")
    return raw.partition(b"?")[0]


def headers_size(headers) -> int:
    """The bytes of header ``(name, value)`` pairs (a loop: a generator in ``sum`` took twice as long)."""
    size = 0
    for name, value in headers:
        size += len(name) + len(value)
    return size


def absolute_form(scope) -> dict | None:
    """``scope`` for the origin-form of an absolute-form target, or None if the target is not one."""
    target = scope.get("raw_path") or scope["path"].encode("utf-8")
    lowered = target[:8].lower()
    if not (lowered.startswith(b"http://") or lowered.startswith(b"https://")):
        return None
    parts = urlsplit(target.decode("latin-1"))
    path = parts.path or "/"
    raw_path = path.encode("latin-1")
    query = scope.get("query_string", b"")
    if parts.query and not query:  # a server that kept the query in the path
        query = parts.query.encode("latin-1")
    headers = [(name, value) for name, value in scope.get("headers", ()) if name.lower() != b"host"]
    if parts.netloc:
        authority = parts.netloc.rpartition("@")[2]  # never userinfo (RFC 9110 4.2.4)
        headers.append((b"host", authority.encode("latin-1")))
    return {
        **scope,
        "raw_path": raw_path,
        "path": unquote_to_bytes(raw_path).decode("utf-8", "replace"),
        "query_string": query,
        "headers": headers,
    }


def is_api_target(target: bytes) -> bool:
    return target == API_PREFIX_BYTES or target.startswith(API_PREFIX_BYTES + b"/")


def check_target(scope, whole_instance: bool = True) -> tuple[dict, tuple | None]:
    """``(scope, answer)``: the scope to go on with, or the answer that ends the request here.

    ``answer`` is ``(status, headers, body)``, or None to go on with the (maybe rewritten) scope.

    :param whole_instance: ``qsite serve``'s own server; else only /api/v1 targets are checked
        (an absolute-form target naming one included) and every other scope is handed back as it came.
    """
    target = raw_target(scope)
    query = scope.get("query_string", b"")
    form = absolute_form(scope) if not target.startswith(b"/") else None
    api = is_api_target(form["raw_path"] if form is not None else target)
    if not whole_instance and not api:
        return scope, None
    max_target, max_headers = (MAX_TARGET, MAX_HEADERS) if api else (PAGE_MAX_TARGET, PAGE_MAX_HEADERS)
    if len(target) + len(query) > max_target:
        return scope, problem_response(
            "uri-too-long", f"the request target is over {max_target} bytes; this service's URLs are all shorter"
        )
    if headers_size(scope.get("headers", ())) > max_headers:
        return scope, problem_response(
            "header-fields-too-large", f"the header fields are over {max_headers} bytes in all"
        )
    if target == b"*":
        if scope["method"] == "OPTIONS":
            return scope, (204, [(b"allow", SERVER_METHODS), (b"content-length", b"0")], b"")
        return scope, problem_response("bad-request", "the request target * is only for OPTIONS")
    if not target.startswith(b"/"):
        rewritten = absolute_form(scope)
        if rewritten is None:
            return scope, problem_response("bad-request", "the request target must be a path or an absolute URL")
        scope, target = rewritten, rewritten["raw_path"]
    if target.startswith(b"//"):
        return scope, problem_response("not-found", "no such page")
    return scope, None
