"""A CSV export of SQL that fails is a 400, as its JSON is, never a 200 with an empty body.

Datasette 0.65's ``as_csv`` (``datasette/views/base.py``) reads the query page's data and drops
its status: SQL that does not run (``/site.csv?sql=select+nope``, a value past the size cap, a
canned query's bad parameter) becomes a 200 whose body is one empty heading row, ``\\r\\n``
(upstream: simonw/datasette#2129, "CSV ?sql= should indicate errors", still open on the 1.0
line, where the page became ``/-/query.csv``). No hook reaches that code, so this checks the
answer at the ASGI level: the start of a CSV answer is held until its first line, and a
heading row of no columns (no successful query has none; a single unnamed column is ``""``)
means the query failed. Only then is the same request asked again as ``.json`` of the inner
app (same actor, same budget slot), whose error becomes a 400 problem document. With
``_header=off`` a failure and an empty result are both an empty body: only an empty body is
checked that way. Every other CSV answer streams as before, its first line delayed by nothing
but the wait for it.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from qsite.service.http.problems import problem_response, send_response

EMPTY_HEADING = b"\r\n"


def is_csv(scope) -> bool:
    """A CSV export (``/db.csv``, ``/db/query.csv``, ``/db/table.csv``). ``?_format=csv`` needs
    nothing: Datasette 0.65 answers that form's failed query with its own 400 page."""
    return scope["method"] in ("GET", "HEAD") and scope.get("path", "").endswith(".csv")


def as_json(scope) -> dict:
    """The same request for the JSON form."""
    path = scope["path"][: -len(".csv")] + ".json"
    raw = scope.get("raw_path")
    raw = raw[: -len(b".csv")] + b".json" if raw and raw.endswith(b".csv") else path.encode()
    return {**scope, "method": "GET", "path": path, "raw_path": raw}


async def json_error(app, scope) -> str | None:
    """The error the JSON form of this request reports, or None when it succeeds."""
    status, chunks = None, []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def capture(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, capture)
    if status is None or status < 400:
        return None
    try:
        body = json.loads(b"".join(chunks))
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    return str(error or "the query failed")


async def guarded_csv(app, scope, receive, send) -> None:
    """Run ``app`` for a CSV request, answering a failed query's CSV as a 400 problem (see the module docstring)."""
    header_off = ("_header", "off") in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
    held: list[dict] = []
    first = b""
    state = "holding"  # then "passing" or "failed"

    async def release():
        nonlocal state
        state = "passing"
        for message in held:
            await send(message)
        held.clear()

    async def checking_send(message):
        nonlocal first, state
        if state == "passing":
            return await send(message)
        if state == "failed":
            return None  # the rest of the empty CSV: replaced by the problem
        if message["type"] == "http.response.start":
            held.append(message)
            if message["status"] != 200:
                await release()
            return None
        if message["type"] != "http.response.body":
            return await send(message)
        held.append(message)
        first += message.get("body", b"")
        more = message.get("more_body", False)
        if first == EMPTY_HEADING and not header_off:
            state = "failed"
        elif not first and more:
            return None  # nothing of the first line yet
        elif not first and header_off:
            state = "failed"  # an empty body: a failure, or no rows (asked below)
        else:
            await release()
        return None

    await app(scope, receive, checking_send)
    if state != "failed":
        if held:
            await release()
        return
    error = await json_error(app, as_json(scope))
    if error is None:  # no rows, with the header off: the empty CSV was the answer
        state = "holding"
        await release()
        return
    status, headers, body = problem_response("bad-request", error)
    await send_response(send, status, headers, body, head=scope["method"] == "HEAD")
