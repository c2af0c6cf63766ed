"""Shared fixtures: a real HTTP server on 127.0.0.1, configs in temporary folders, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "pipeline" / "samples"
QSITE = str(Path(sys.executable).with_name("qsite"))


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
                    time.sleep(reply.stall)
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
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server():
    server = LocalServer()
    yield server
    server.close()


@pytest.fixture
def sample_export() -> dict:
    return json.loads((SAMPLES / "site-export.json").read_text(encoding="utf-8"))


@pytest.fixture
def make_config(tmp_path):
    """Write a config YAML into tmp_path and return its path.

    Defaults: the database at tmp_path/site.db, the bundled sample export, no news sources.
    """

    def make(**overrides) -> Path:
        data = {
            "database": str(tmp_path / "site.db"),
            "site_export": {"source": str(SAMPLES / "site-export.json"), "every": "1h"},
            "news": {"every": "15m", "retention_days": None, "sources": []},
            "api": {"cache_max_age": 300},
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        path = tmp_path / "qsite.yml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return path

    return make


@pytest.fixture
def seeded_config(make_config, tmp_path):
    """A config over a database seeded with the small known catalog and news of ``api_helpers``, no rate limit."""
    from api_helpers import seeded_database

    seeded_database(tmp_path / "site.db").close()
    return make_config(api={"cache_max_age": 300, "rate_limit": "off"})


def run_qsite(*args, env: dict | None = None, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run the real ``qsite`` console command."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("QSITE_CONFIG", None) if env is None or "QSITE_CONFIG" not in env else None
    return subprocess.run(
        [QSITE, *args], capture_output=True, text=True, env=full_env, timeout=timeout, **kwargs
    )


@pytest.fixture
def qsite():
    return run_qsite
