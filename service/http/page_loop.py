"""Datasette's pages of the served database, made on an event loop of their own.

Datasette makes a page on the event loop that runs it, in one stretch that
grows with the page's rows and columns, and every /api/v1 request of that
worker would wait for it. :class:`PageLoop`
runs such requests on a second event loop, in a thread of its own, so the
loop serving /api/v1 only forwards their messages: it stays free while a page
is made (the two threads share the interpreter, which switches between them
every few milliseconds). The thread keeps the scheduling of the one that
started it: a lower one (``SCHED_BATCH``) would be descheduled while it holds
the interpreter, and the API's loop wait for it all that time.

Only requests for the pages of the served database go there (:func:`database_page`):
the answers a client can make large. Everything else, /api/v1 among it, stays
on the server's loop. The request's messages cross between the loops as they
come (``receive`` and ``send`` run on the server's loop, where the server
expects them); an exception, a client gone among them, comes back as it was
raised, and a request cancelled on the server's loop is cancelled there too.
"""

from __future__ import annotations

import asyncio
import threading


def database_page(path: bytes, name: str) -> bool:
    """Whether ``path`` is a page of database ``name`` (``/name``, ``/name.json``, ``/name/...``), not its file (``/name.db``)."""
    prefix = b"/" + name.encode()
    if not path.startswith(prefix):
        return False
    rest = path[len(prefix) :]
    return rest in (b"", b".json", b".csv") or rest.startswith(b"/")


async def _call(function, *args):
    return await function(*args)


class PageLoop:
    """An event loop in a daemon thread, started on first use, that runs ASGI requests (see the module docstring)."""

    def __init__(self, name: str = "qsite-pages"):
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started in its thread if it is not yet."""
        with self._starting:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                self._loop = loop
        return self._loop

    async def run(self, app, scope, receive, send) -> None:
        """Run the ASGI ``app`` for this request on the page loop; returns when it has answered."""
        here = asyncio.get_running_loop()
        there = self.loop()
        if here is there:
            return await app(scope, receive, send)

        async def receive_here():
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_call(receive), here))

        async def send_here(message):
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_call(send, message), here))

        running = asyncio.run_coroutine_threadsafe(app(scope, receive_here, send_here), there)
        await asyncio.wrap_future(running)  # cancelled here: cancelled there (wrap_future chains it)
