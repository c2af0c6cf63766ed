"""The status a request was answered with, handed up the chain of qsite's own ASGI layers.

An ASGI app returns nothing; ``/metrics`` needs each request's status. Reading it from the
``http.response.start`` message means a ``send`` wrapper on every request, two more Python
calls where the cached path spends a few microseconds in all. So, on ``qsite serve``'s own
server only, qsite's layers *return* the status of the /api/v1 requests they answer (the fast
path, the rate limiter's 429, a replica's 503), and hand the status of what they pass on to
Datasette up from :func:`status_of`; the outermost layer (:mod:`qsite.service.metrics`) reads it
and returns None, as ASGI expects. Installed in someone else's Datasette, the layers return
None: servers such as uvicorn close the connection of an app that returns anything else.

The protocol holds only while every ASGI wrapper is qsite's: :func:`only_qsite_wrappers` says so;
otherwise the outermost layer reads every status from ``send``.
"""

from __future__ import annotations

#: What a request that raised before it answered is counted as (the server answers 500).
NOT_ANSWERED = 500


async def status_of(app, scope, receive, send) -> int:
    """Run the ASGI ``app`` and return the status it answered with (:data:`NOT_ANSWERED` if none)."""
    status = NOT_ANSWERED

    def reading_send(message):  # not a coroutine: hands back send's own awaitable, no frame of its own
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        return send(message)

    await app(scope, receive, reading_send)
    return status


def only_qsite_wrappers() -> bool:
    """Whether every ``asgi_wrapper`` Datasette applies is qsite's own (so each returns the status)."""
    from datasette.plugins import pm

    return all(getattr(impl.plugin, "__name__", "").startswith("qsite.") for impl in pm.hook.asgi_wrapper.get_hookimpls())
