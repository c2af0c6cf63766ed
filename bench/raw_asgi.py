"""The ceiling: the smallest ASGI app that returns what the real API returned.

The benchmark first fetches each measured URL from the running ``qsite serve``
and writes status, headers and body to a JSON file; this app replays exactly
those bytes, with no routing beyond a dict lookup, no SQL and no
serialisation. ``make bench`` runs it under granian (as ``qsite serve``) and
under uvicorn with h11 and with httptools (:mod:`bench.servers`), e.g.::

    BENCH_RAW_RESPONSES=responses.json granian --interface asgi --http 1 --port 8002 bench.raw_asgi:app

A request whose ``If-None-Match`` equals the recorded ``ETag`` gets a 304 with
the validators and no body, like the real API.
"""

from __future__ import annotations

import json
import os


#: Headers the server itself writes; replaying them would send them twice.
_SERVER_HEADERS = ("content-length", "date", "server", "transfer-encoding", "connection")


def _headers(recorded: list[list[str]], body: bytes | None) -> list[tuple[bytes, bytes]]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in recorded
        if name.lower() not in _SERVER_HEADERS
    ]
    if body is not None:
        headers.append((b"content-length", str(len(body)).encode()))
    return headers


def load(path: str) -> dict[bytes, tuple]:
    """Map ``path?query`` (bytes, as in the ASGI scope) to what to answer.

    Each value is (status, headers, body, etag, headers of the 304) where the
    304's headers are the ones the real API sent to a matching ``If-None-Match``.
    """
    with open(path, encoding="utf-8") as handle:
        recorded = json.load(handle)
    routes = {}
    for target, response in recorded.items():
        body = response["body"].encode("utf-8")
        headers = _headers(response["headers"], body)
        etag = next((value for name, value in headers if name == b"etag"), None)
        not_modified = response.get("not_modified_headers")
        routes[target.encode("latin-1")] = (
            response["status"],
            headers,
            body,
            etag,
            _headers(not_modified, None) if not_modified is not None else None,
        )
    return routes


ROUTES = load(os.environ["BENCH_RAW_RESPONSES"]) if os.environ.get("BENCH_RAW_RESPONSES") else {}
NOT_FOUND = (404, [(b"content-type", b"text/plain"), (b"content-length", b"9")], b"not found", None, None)


async def app(scope, receive, send):
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        if message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
        return
    target = scope["path"].encode("latin-1")
    if scope["query_string"]:
        target += b"?" + scope["query_string"]
    status, headers, body, etag, not_modified = ROUTES.get(target, NOT_FOUND)
    if not_modified is not None:
        for name, value in scope["headers"]:
            if name == b"if-none-match" and value == etag:
                status, headers, body = 304, not_modified, b""
                break
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

