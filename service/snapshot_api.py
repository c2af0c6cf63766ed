"""``GET /api/v1/snapshot``: the snapshot a replica serves, and the file itself for download.

``/api/v1/snapshot`` describes it (data version, schema version, size,
SHA-256, publication time) and links to ``/api/v1/snapshot/<file>``, which
streams that SQLite file from the replica's disk: the bulk download research
users ask for. The file's name carries its data version and hash, so its URL
never changes meaning: it is cacheable for a year, with the SHA-256 as ETag.
A name that is not the current snapshot is a 404 (old ones are deleted).
Only a ``qsite serve --follow`` replica has snapshots; a live instance
answers 404 here. Both count against fair use like any request.
"""

from __future__ import annotations

import asyncio

from .api import Endpoint, dumps, invalid_parameters, parse_params
from .cache import Entry, etag_matches, http_date
from .follow import current_snapshot, describe
from .problems import ALLOWED_METHODS, API_PREFIX, CORS_HEADERS, PREFLIGHT_HEADERS, problem_response, send_response
from .settings import qsite_config

SNAPSHOT_PATH = API_PREFIX + "/snapshot"
SQLITE_CONTENT_TYPE = "application/vnd.sqlite3"
#: A snapshot file never changes under its name.
IMMUTABLE = (b"cache-control", b"public, max-age=31536000, immutable")
#: Bytes sent per ASGI message.
CHUNK = 256 * 1024


def is_snapshot_path(path: str) -> bool:
    return path == SNAPSHOT_PATH or path.startswith(SNAPSHOT_PATH + "/")


def _header(scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def snapshot_view(datasette, scope, path: str, send) -> None:
    """Answer a request for ``/api/v1/snapshot`` or ``/api/v1/snapshot/<file>`` through ``send``."""
    method = scope["method"]
    head = method == "HEAD"
    answer = _refusal(method, scope.get("query_string", b""))
    serving = current_snapshot(datasette)
    if answer is None and serving is None:
        answer = problem_response(
            "not-found", "this instance serves a live database, not snapshots (they are served by qsite serve --follow)"
        )
    if answer is None and path == SNAPSHOT_PATH:
        max_age = qsite_config(datasette).api.cache_max_age
        entry = Entry(("snapshot", serving.pointer.file), dumps(describe(serving)), (), serving.pointer.published_at, max_age)
        answer = entry.answer(_header(scope, b"if-none-match"), _header(scope, b"if-modified-since"))
    if answer is None and path[len(SNAPSHOT_PATH) + 1 :] != serving.pointer.file:
        answer = problem_response("not-found", f"no such snapshot on this replica; the current one is described at {SNAPSHOT_PATH}")
    if answer is not None:
        return await send_response(send, *answer, head=head)
    await _send_file(serving, scope, send, head)


def _refusal(method: str, query: bytes):
    """The answer to a preflight, a method other than GET/HEAD or a query string; None for a plain GET or HEAD."""
    if method == "OPTIONS":
        return 204, list(PREFLIGHT_HEADERS), b""
    if method not in ("GET", "HEAD"):
        return problem_response(
            "method-not-allowed", f"{method[:64]} is not allowed; the API is read-only", headers=[(b"allow", ALLOWED_METHODS.encode())]
        )
    _, errors = parse_params(Endpoint("snapshot"), query)
    return invalid_parameters(errors) if errors else None


async def _send_file(serving, scope, send, head: bool) -> None:
    pointer = serving.pointer
    etag = f'"{pointer.sha256}"'
    validators = [IMMUTABLE, (b"etag", etag.encode()), *CORS_HEADERS]
    if_none_match = _header(scope, b"if-none-match")
    if if_none_match is not None and etag_matches(if_none_match, etag):
        return await send_response(send, 304, validators, b"")
    # Opened before the first byte is sent: a swap that deletes the file later does not cut the download short.
    fp = open(serving.path, "rb")
    try:
        headers = [
            (b"content-type", SQLITE_CONTENT_TYPE.encode()),
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
