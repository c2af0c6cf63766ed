"""``GET /api/v1/snapshot/<file>``: the SQLite file a following replica serves, streamed from its disk.

The bulk download research users ask for. ``/api/v1/snapshot`` (a document of
the :class:`~qsite.service.datasette.handler.Api`, :func:`qsite.service.replica.follow.describe`) names the file
and links here. The file's name carries its data version and hash, so its URL
never changes meaning: it is cacheable for a year, with the SHA-256 as ETag. A
name that is not the current snapshot is a 404 (old files are deleted), and an
instance that does not follow snapshots has none. The endpoint is
``snapshot_file`` in :data:`qsite.service.api.endpoints.ENDPOINTS`; it is answered here
rather than by the Api only because its body is a file, not built bytes.
It counts against fair use like any request.
"""

from __future__ import annotations

import asyncio

from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.parameters import echo, invalid_parameters, parse_params
from qsite.service.http.problems import ALLOWED_METHODS, API_PREFIX, CORS_HEADERS, PREFLIGHT_HEADERS, problem_response, send_response
from qsite.service.api.responses import etag_matches, http_date, read_conditions
from qsite.service.api.routing import resolve

ENDPOINT = ENDPOINTS["snapshot_file"]
#: A snapshot file never changes under its name.
IMMUTABLE = (b"cache-control", b"public, max-age=31536000, immutable")
#: Bytes sent per ASGI message.
CHUNK = 256 * 1024


#: Where every snapshot file's raw path starts (``/api/v1/snapshot/``).
FILE_PREFIX = (API_PREFIX + ENDPOINT.path.partition("{")[0]).encode()


def is_snapshot_file(path: str) -> bool:
    resolved = resolve(path)
    return resolved is not None and resolved[0] is ENDPOINT


async def send_snapshot_file(serving, scope, path: str, send) -> None:
    """Answer a request for ``/api/v1/snapshot/<file>`` through ``send``.

    :param serving: the :class:`~qsite.service.replica.follow.Serving` snapshot, None when not following (or none yet).
    """
    method = scope["method"]
    _, name = resolve(path)
    if method == "OPTIONS":
        answer = 204, list(PREFLIGHT_HEADERS), b""
    elif method not in ("GET", "HEAD"):
        answer = problem_response(
            "method-not-allowed",
            f"{echo(method)} is not allowed; the API is read-only",
            headers=[(b"allow", ALLOWED_METHODS.encode())],
        )
    elif errors := parse_params(ENDPOINT.params, scope.get("query_string", b""))[1]:
        answer = invalid_parameters(errors)
    elif serving is None:
        answer = problem_response("not-found", "this instance serves a live database, not snapshots (they are served by qsite serve --follow)")
    elif name != serving.pointer.file:
        answer = problem_response("not-found", "no such snapshot on this replica; the current one is described at /api/v1/snapshot")
    else:
        return await _send_file(serving, scope, send, head=method == "HEAD")
    await send_response(send, *answer, head=method == "HEAD")


async def _send_file(serving, scope, send, head: bool) -> None:
    pointer = serving.pointer
    etag = f'"{pointer.sha256}"'
    validators = [IMMUTABLE, (b"etag", etag.encode()), *CORS_HEADERS]
    if_none_match = read_conditions(scope["headers"]).if_none_match
    if if_none_match is not None and etag_matches(if_none_match, etag):
        return await send_response(send, 304, validators, b"")
    # Opened before the first byte is sent: a swap that deletes the file later does not cut the download short.
    fp = open(serving.path, "rb")
    try:
        headers = [
            (b"content-type", ENDPOINT.media_type.encode()),
            (b"content-length", str(pointer.bytes).encode()),
            (b"content-disposition", f'attachment; filename="{pointer.file}"'.encode()),
            (b"last-modified", http_date(pointer.published_at).encode()),
            *validators,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        while not head and (chunk := await asyncio.to_thread(fp.read, CHUNK)):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        fp.close()
