"""What every problem answer of the service (``application/problem+json``, RFC 9457) must look like."""

from __future__ import annotations

#: The response headers a browser script may read (CORS), on every API answer.
EXPOSED = "ETag, Last-Modified, Link, Retry-After, RateLimit, RateLimit-Policy, X-Qsite-Version, X-Qsite-Snapshot"


def assert_problem(response, status: int, name: str, parameters: list[str] | None = None) -> dict:
    """Assert ``response`` is the problem ``name`` with ``status``: never cached, readable cross-origin,
    naming the refused ``parameters`` when given, and showing none of the server's innards. Returns its body."""
    assert response.status_code == status
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["access-control-expose-headers"] == EXPOSED
    assert "etag" not in response.headers
    body = response.json()
    assert body["type"] == f"/api/v1/problems/{name}"
    assert body["status"] == status
    assert body["title"] and body["detail"]
    if parameters is not None:
        assert [error["parameter"] for error in body["errors"]] == parameters
    text = response.text.lower()
    for leak in ("traceback", "select ", "sqlite", ".db", "/tmp", "file \""):
        assert leak not in text
    return body
