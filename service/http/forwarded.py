"""What the proxies in front say of a request: ``X-Forwarded-For`` and ``X-Forwarded-Proto``.

Promises: only when ``api.trusted_proxies`` proxies stand in front (and, for the scheme,
``api.forwarded_proto`` says they set it themselves), and only entries a trusted proxy wrote
(:func:`forwarded_entry`); entries to their left may be made up by the client and are never used.

- The client's address, whom the rate limit counts (:func:`qsite.service.http.ratelimit.client_address`):
  the ``X-Forwarded-For`` entry ``trusted_proxies`` hops from the right (each proxy appends).
- The scheme the client used, which decides every absolute URL the instance makes: the last
  ``X-Forwarded-Proto`` entry, the one the nearest (trusted) proxy sent. That header is set once, by
  the proxy that ends TLS, and handed on as it is by the others, not appended hop by hop.

Why: behind a proxy that ends TLS qsite hears plain http, and every absolute URL (``termsOfService``,
``next_url``, ``Link``, the dashboard's chart requests) would say ``http://``, which a browser refuses
from an https page. Must not change: :class:`ForwardedScheme` sits outside every other middleware,
so the scheme is set before anything reads it (``request.url``, ``absolute_url``,
:func:`qsite.service.datasette.front.client_scheme`). Not granian's ``wrap_asgi_with_proxy_headers``: it
trusts proxies by socket address rather than number, and takes the first ``X-Forwarded-Proto``
field, the client's own when a proxy adds another.
"""

from __future__ import annotations

from datasette import hookimpl

from qsite.config import ConfigError

from qsite.service.http.settings import qsite_config

#: The schemes a proxy may say; anything else leaves the scope's own.
SCHEMES = frozenset({"http", "https"})


def forwarded_entry(scope: dict, header: bytes, hops: int) -> str | None:
    """The entry of the ``header`` list (``x-forwarded-for``, ``x-forwarded-proto``) ``hops``
    from the right (1: the last), stripped; None when there are fewer entries, when it is
    empty, or when ``hops`` is 0 (no proxy trusted).

    Every field of that name counts, in order, as one comma-separated list (RFC 9110 5.3).
    """
    if hops <= 0:
        return None
    entries = [
        part.strip()
        for name, value in scope.get("headers", ())
        if name == header
        for part in value.decode("latin-1").split(",")
    ]
    if len(entries) < hops:
        return None
    return entries[-hops] or None


def forwarded_scheme(scope: dict, trusted_proxies: int) -> str | None:
    """``http`` or ``https`` (any letter case) as the nearest proxy says the client asked, when
    ``trusted_proxies`` trusts it (and ``api.forwarded_proto`` is on: :func:`asgi_wrapper`); else None."""
    said = forwarded_entry(scope, b"x-forwarded-proto", 1 if trusted_proxies > 0 else 0)
    said = said.lower() if said is not None else None
    return said if said in SCHEMES else None


class ForwardedScheme:
    """ASGI middleware: the scope's ``scheme`` from :func:`forwarded_scheme`, for HTTP requests."""

    def __init__(self, app, trusted_proxies: int):
        self.app = app
        self.trusted_proxies = trusted_proxies

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            scheme = forwarded_scheme(scope, self.trusted_proxies)
            if scheme is not None and scheme != scope.get("scheme"):
                scope = {**scope, "scheme": scheme}
        return await self.app(scope, receive, send)


def scheme_proxies(datasette) -> int:
    """``api.trusted_proxies`` of the instance when ``api.forwarded_proto`` is on, else 0; 0 too
    when its configuration cannot be loaded (the plugin says why at startup and serves nothing)."""
    try:
        api = qsite_config(datasette).api
    except ConfigError:
        return 0
    return api.trusted_proxies if api.forwarded_proto else 0


@hookimpl(trylast=True)
def asgi_wrapper(datasette):
    """:class:`ForwardedScheme` around the whole instance (``trylast`` wraps it last: outermost),
    when ``api.forwarded_proto`` is on; else nothing is added to any request's path."""

    def wrap(app):
        proxies = scheme_proxies(datasette)
        return ForwardedScheme(app, proxies) if proxies > 0 else app

    return wrap
