"""What qsite's outer layers and the layer that answers pass each other in the scope: the status
a request was answered with, for ``/metrics``, and the headers fair use adds.

An ASGI app returns nothing; ``/metrics`` needs each request's status. Reading it from the
``http.response.start`` message takes a ``send`` wrapper on every request: two more Python
calls where the cached path spends a few microseconds in all. So, on ``qsite serve``, the
outermost layer (:mod:`qsite.service.metrics`) puts a one-item list in an /api/v1 request's
scope under :data:`ANSWERED`, and the qsite layer that answers (the fast path, the rate limiter's
429, a replica's 503) writes the status into it (:func:`note`); what they hand on to Datasette
is read from ``send`` (:func:`hand_on`). The list rides along when a middleware copies the
scope (a shallow copy, as ASGI's lifespan ``state`` does); where there is none (a Datasette
not run by ``qsite serve``), nothing is noted and nothing is wrapped.

The same way, the fair-use limiter leaves the ``RateLimit`` fields of a request it lets through
under :data:`EXTRA_HEADERS` rather than wrapping ``send`` (two more calls and a copy of the
response's start on every request: a tenth of the cached path), and the layer that answers
adds them to what it sends (:func:`adding` when it hands the request on).

Both hold only while every ASGI wrapper is qsite's (:func:`only_qsite_wrappers`): one of another
plugin's could build a scope of its own, or answer itself. Otherwise the outermost layer reads
every status from ``send``, and the limiter wraps ``send`` itself.
"""

from __future__ import annotations

#: The scope key of the one-item list an answer's status is written into.
ANSWERED = "qsite.answered"
#: What a request that raised before it answered is counted as (the server answers 500).
NOT_ANSWERED = 500
#: The scope key of the headers (a list of pairs) the layer that answers adds to its response.
EXTRA_HEADERS = "qsite.extra_headers"


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


def adding(send, extra):
    """``send`` adding the header pairs ``extra`` to the response's start (``send`` itself when there are none)."""
    if not extra:
        return send

    def send_with_headers(message):  # not a coroutine: hands back send's own awaitable
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        return send(message)

    return send_with_headers


def answered_inside() -> bool:
    """Whether qsite's answering layer (the plugin's ``asgi_wrapper``) is inside every other layer
    and adds :data:`EXTRA_HEADERS`: it is registered, and every ASGI wrapper is qsite's."""
    from datasette.plugins import pm

    names = [getattr(impl.plugin, "__name__", "") for impl in pm.hook.asgi_wrapper.get_hookimpls()]
    return "qsite.service.datasette.plugin" in names and only_qsite_wrappers()


def only_qsite_wrappers() -> bool:
    """Whether every ``asgi_wrapper`` Datasette applies is qsite's own."""
    from datasette.plugins import pm

    return all(getattr(impl.plugin, "__name__", "").startswith("qsite.") for impl in pm.hook.asgi_wrapper.get_hookimpls())
