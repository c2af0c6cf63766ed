"""Datasette's pages of the served database on a loop of their own (``service/http/page_loop.py``).

Which paths go there, and that a request made there is the same request: its
messages cross both ways, the server's ``send`` runs on the server's loop, an
exception comes back as raised, a cancellation on the server's loop ends it
there, and the server's loop keeps running while the page's Python runs.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from qsite.service.http.page_loop import PageLoop, database_page


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (b"/site", True),
        (b"/site.json", True),
        (b"/site.csv", True),
        (b"/site/news", True),
        (b"/site/-/query.json", True),
        (b"/site.db", False),  # the file, streamed as it is
        (b"/sites", False),
        (b"/other/news", False),
        (b"/api/v1/news", False),
        (b"/-/versions.json", False),
        (b"/", False),
    ],
)
def test_only_the_served_databases_pages_go_to_the_page_loop(path, expected):
    assert database_page(path, "site") is expected


def run(coroutine):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


async def no_body():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_a_request_crosses_both_ways_and_the_servers_loop_keeps_running():
    pages = PageLoop("test-pages")
    server_thread = threading.get_ident()
    seen = {}

    async def app(scope, receive, send):
        seen["thread"] = threading.get_ident()
        seen["request"] = await receive()
        started = time.perf_counter()
        while time.perf_counter() - started < 0.3:  # Python that never awaits: a page being rendered
            pass
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    async def main():
        sent, ticks = [], []

        async def send(message):
            sent.append((threading.get_ident(), message))

        async def tick():
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.005)  # review: the ticker's period, what the loop's freedom is counted in, not a wait

        ticker = asyncio.ensure_future(tick())
        await pages.run(app, {"type": "http"}, no_body, send)
        ticker.cancel()
        return sent, ticks

    sent, ticks = run(main())
    assert seen["thread"] != server_thread and seen["request"]["type"] == "http.request"
    assert [message["type"] for _, message in sent] == ["http.response.start", "http.response.body"]
    assert all(thread == server_thread for thread, _ in sent)  # the server's send, on the server's loop
    assert len(ticks) > 4  # the server's loop ran while the page was made (on the same loop: once or twice)


def test_an_exception_comes_back_and_a_cancellation_reaches_the_page():
    pages = PageLoop("test-pages-2")
    ended = threading.Event()
    began = threading.Event()

    async def failing(scope, receive, send):
        raise ConnectionResetError("the client went")

    async def endless(scope, receive, send):
        began.set()
        try:
            await asyncio.sleep(60)  # review: a page that never ends by itself (it is cancelled), not a wait
        finally:
            ended.set()

    async def ignore(message):
        return None

    with pytest.raises(ConnectionResetError, match="the client went"):
        run(pages.run(failing, {}, no_body, ignore))

    async def cancelled():
        task = asyncio.ensure_future(pages.run(endless, {}, no_body, ignore))
        assert await asyncio.to_thread(began.wait, 10)  # the page is running on its own loop before it is cancelled
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancelled())
    assert ended.wait(5)
