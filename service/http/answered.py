"""The status a request was answered with, noted where qsite answers it, for ``/metrics``.

An ASGI app returns nothing; ``/metrics`` needs each request's status. Reading it from the
``http.response.start`` message takes a ``send`` wrapper on every request: two more Python
calls where the cached path spends a few microseconds in all. So, on ``qsite serve``, the
outermost layer (:mod:`qsite.service.metrics`) puts a one-item list in an /api/v1 request's
scope under :data:`ANSWERED`, and the qsite layer that answers (the fast path, the rate limiter's
429, a replica's 503) writes the status into it (:func:`note`); what they hand on to Datasette
is read from ``send`` (:func:`hand_on`). The list rides along when a middleware copies the
scope (a shallow copy, as ASGI's lifespan ``state`` does); where there is none (a Datasette
not run by ``qsite serve``), nothing is noted and nothing is wrapped.

It holds only while every ASGI wrapper is qsite's (:func:`only_qsite_wrappers`): one of another
plugin's could build a scope of its own, or answer itself. Otherwise the outermost layer reads
every status from ``send``.
"""

from __future__ import annotations

#: The scope key of the one-item list an answer's status is written into.
ANSWERED = "qsite.answered"
#: What a request that raised before it answered is counted as (the server answers 500).
NOT_ANSWERED = 500


def note(scope, status: int) -> None:
    """Write ``status`` where the outermost layer reads it, if it asked."""
    answered = scope.get(ANSWERED)
    if answered is not None:
        answered[0] = status


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


async def hand_on(app, scope, receive, send) -> None:
    """Run ``app`` for a request qsite does not answer itself, noting its status if it is asked for."""
    answered = scope.get(ANSWERED)
    if answered is None:
        await app(scope, receive, send)
    else:
        answered[0] = await status_of(app, scope, receive, send)


def only_qsite_wrappers() -> bool:
    """Whether every ``asgi_wrapper`` Datasette applies is qsite's own."""
    from datasette.plugins import pm

    return all(getattr(impl.plugin, "__name__", "").startswith("qsite.") for impl in pm.hook.asgi_wrapper.get_hookimpls())
