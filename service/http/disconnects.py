"""A response stops when its client has gone, as ASGI 2.4 has it and granian does not yet.

ASGI 2.4 has ``send()`` raise an ``OSError`` once the client has gone, so that
an application stops a long response. granian (2.x, ASGI spec 2.3) returns
instead, and logs ``ASGI transport error`` for every message sent to nobody
(emmett-framework/granian#650). A client that asked for Datasette's streamed
CSV (``?_stream=on``, up to ``max_csv_mb``) and left at once had the stream run
to its end all the same, and put a log line per chunk, a thousand and more per
request. Both servers tell the application on ``receive()`` (``http.disconnect``),
so :func:`until_gone` watches it once the answer has started, and makes ``send()``
raise :class:`ClientGone` from then on.
"""

from __future__ import annotations

import asyncio


class ClientGone(OSError):
    """The client closed its connection: nothing more can reach it."""


def until_gone(receive, send):
    """``send`` for a request without a body that raises :class:`ClientGone` once the client has gone.

    The watch starts with the answer (``http.response.start``), when the
    application has read the request, and ends with it; so the application's own
    ``receive`` is never raced. Returns the ``send`` to use, and a function that
    ends the watch (call it when the application returns).
    """
    watch: asyncio.Task | None = None
    gone = asyncio.Event()

    async def watch_receive():
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    async def checked_send(message):
        nonlocal watch
        if gone.is_set():
            raise ClientGone("the client closed the connection")
        if message["type"] == "http.response.start" and watch is None:
            watch = asyncio.ensure_future(watch_receive())
        await send(message)

    def stop():
        if watch is not None:
            watch.cancel()

    return checked_send, stop
