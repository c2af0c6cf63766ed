"""The edges of an /api/v1 answer: the address asked, the query read, who may keep it, what a failure says.

Promises:

- :func:`base_url` writes only a plain host name or IP literal and port from ``Host`` into a
  document, else ``http://localhost``;
- :func:`without_parameters` takes an actor plugin's credential parameters out of a query,
  as sent or percent-decoded, before the API reads it;
- :func:`private` marks an answer given because of who asked so no shared cache keeps it;
- :func:`failed` answers a build that failed with a problem document and no internals
  (no traceback, SQL or file path): the client's mistakes as 4xx, a database that cannot be
  read as a 503 with ``Retry-After``.

Relies on :mod:`qsite.service.http.problems` for the problem documents.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_to_bytes

from qsite.service.api.bodies import Invalid, Missing, NoData
from qsite.service.api.health import NO_DATA_RETRY_AFTER
from qsite.service.api.parameters import invalid_parameters
from qsite.service.http.problems import problem_response

log = logging.getLogger("qsite.api")

#: Seconds a client should wait when the database is busy.
UNAVAILABLE_RETRY_AFTER = 5

#: A ``Host`` header that may be written into the OpenAPI document: a name or IP literal, and a port.
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*\.?|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$")
def base_url(headers, scheme: str) -> str:
    """``scheme://host`` of the request, from its ``Host`` header; ``http://localhost`` when that is unusable.

    Written into the OpenAPI document (``termsOfService`` must be an absolute
    URL), so anything but a plain host name or IP literal and port is refused.
    """
    host = next((value.decode("latin-1") for key, value in headers if key.lower() == b"host"), "")
    if not (len(host) <= 260 and _HOST.match(host)):
        return "http://localhost"
    return f"{'https' if scheme == 'https' else 'http'}://{host.lower()}"


def without_parameters(query: bytes, names: frozenset[bytes]) -> bytes:
    """``query`` without the parameters named ``names`` (as sent or percent-decoded)."""
    parts = [part for part in query.split(b"&") if unquote_to_bytes(part.partition(b"=")[0].replace(b"+", b" ")) not in names]
    return b"&".join(parts)


def private(answer: tuple[int, list, bytes]) -> tuple[int, list, bytes]:
    """``answer`` for one actor's eyes: an endpoint the anonymous may not read was answered because of
    who asked, so no shared cache may keep it (``Cache-Control: private``, RFC 9111 5.2.2.7)."""
    status, headers, body = answer
    return status, [
        (name, b"private, " + value.removeprefix(b"public, ")) if name == b"cache-control" else (name, value)
        for name, value in headers
    ], body


class NotServed(Exception):
    """The API's database is not served by this Datasette (a reason logged once, at start): each request
    is a 503, never a traceback of its own, so a misconfigured instance cannot flood its log."""


def failed(exc: Exception, path: str, searched: bool = False) -> tuple[int, list, bytes]:
    """The answer to a build of ``path`` that raised ``exc`` (:class:`NoData`, :class:`Missing`,
    :class:`Invalid` or :class:`sqlite3.Error`); called in the ``except`` block, so a database
    error is logged with its traceback. ``searched``: the request has a ``q``."""
    if isinstance(exc, NoData):
        return problem_response(
            "no-data",
            "no data has been ingested yet; try again shortly",
            headers=[(b"retry-after", str(NO_DATA_RETRY_AFTER).encode())],
        )
    if isinstance(exc, Missing):
        return problem_response("not-found", str(exc))
    if isinstance(exc, Invalid):
        return invalid_parameters([{"parameter": exc.parameter, "detail": detail} for detail in exc.details])
    if searched and str(exc).startswith("fts5:"):
        # The words of q are split as the index's tokenizer splits them (qsite.service.api.search_language.Words),
        # but SQLite's Unicode tables are older than Python's: a few letters (New Tai Lue vowels) are
        # separators to it. Such a q is the client's to change, not an outage.
        return invalid_parameters([{"parameter": "q", "detail": "holds characters the search cannot take"}])
    if not isinstance(exc, NotServed):
        log.exception("database error answering %s", path)
    return problem_response(
        "unavailable",
        "the database cannot be read just now; try again shortly",
        headers=[(b"retry-after", str(UNAVAILABLE_RETRY_AFTER).encode())],
    )
