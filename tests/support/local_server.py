"""Servers on 127.0.0.1 the code under test fetches from: the only network targets the tests have.

:class:`LocalServer` is a real HTTP server whose answers a test sets per path
(the ``http_server`` fixture); :class:`DripServer` is a raw TCP server that never
finishes its answer, for the overall fetch deadline.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    """What the test server answers: a status, headers and a body.

    ``stall`` sleeps that many seconds before answering (for timeout tests).
    """

    status: int = 200
    body: bytes | str = b""
    headers: dict = field(default_factory=dict)
    stall: float = 0.0


@dataclass
class SeenRequest:
    """A request the test server received, with its header names in lower case."""

    method: str
    path: str
    headers: dict


class _QueueingServer(ThreadingHTTPServer):
    # The default listen queue of 5 stalls concurrent fetchers for a second.
    request_queue_size = 128
    daemon_threads = True


class LocalServer:
    """A real HTTP server on 127.0.0.1; tests set ``routes[path]`` to a Reply or a callable."""

    def __init__(self):
        self.routes: dict[str, Reply | Callable[[SeenRequest], Reply]] = {}
        self.requests: list[SeenRequest] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                seen = SeenRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()})
                server.requests.append(seen)
                route = server.routes.get(self.path.split("?")[0])
                reply = route(seen) if callable(route) else route
                if reply is None:
                    reply = Reply(404, b"not found")
                if reply.stall:
                    time.sleep(reply.stall)  # review: a slow server is the behaviour a test asks for, not a wait
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                try:
                    self.send_response(reply.status)
                    headers = {"Content-Length": str(len(body)), **reply.headers}
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply.status != 304:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.httpd = _QueueingServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class DripServer:
    """A raw TCP server on 127.0.0.1 that sends a 200 and then one byte every ``interval`` seconds, for ever.

    A read timeout never fires against it; only an overall deadline ends the fetch.
    """

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, path: str = "/drip.xml") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n\r\n<?xml version='1.0'?><rss version='2.0'><channel>")
            while not self.stopped.is_set():
                conn.sendall(b" ")
                time.sleep(self.interval)  # review: the drip's pace is the behaviour under test, not a wait
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopped.set()
        self.sock.close()
        self.thread.join(2)
