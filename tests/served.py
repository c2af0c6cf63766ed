"""Shared helpers for the process-level tests: free ports, polling, a real ``qsite serve``, growing feeds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import httpx

from conftest import QSITE, Reply


def free_port() -> int:
    """A loopback port nothing listens on (the OS picked it free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Call ``predicate()`` until it returns something truthy; returns that, or its last falsy value at ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def stop(process: subprocess.Popen, signum: int = signal.SIGTERM, timeout: float = 15) -> int:
    """Send ``signum`` and wait; a process that ignores it for ``timeout`` s is killed. Returns the exit code."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


class Served:
    def __init__(self, process: subprocess.Popen, port: int, log: Path):
        self.process = process
        self.port = port
        self.log = log
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path


@contextmanager
def qsite_serve(
    config: Path,
    log: Path,
    env: dict | None = None,
    timeout: float = 30,
    *,
    command: str = "serve",
    args: Sequence[str] = (),
    ready: str = "/api/v1",
    wrapper: Sequence[str] = (),
) -> Iterator[Served]:
    """Start ``qsite serve --config config --port <free port>`` and yield once ``ready`` answers.

    Its stdout and stderr go to ``log``. ``command`` runs another port-taking command
    (``up``), ``args`` adds options, ``env`` adds environment variables; ``ready`` is the
    path polled until any HTTP answer (pick one the rate limit exempts when the budget
    matters). A process the test has not stopped itself gets SIGTERM at the end.
    """
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*wrapper, QSITE, command, "--config", str(config), "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    served = Served(process, port, log)

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"qsite {command} exited with {process.returncode}: {log.read_text()[-2000:]}")
        try:
            httpx.get(served.url(ready), timeout=1)
            return True
        except httpx.HTTPError:
            return False

    try:
        if not wait_until(answers, timeout, interval=0.1):
            raise RuntimeError(f"qsite {command} did not answer in {timeout} s: {log.read_text()[-2000:]}")
        yield served
    finally:
        stop(process)


def growing_feed(name: str, step: int, window: int | None = None):
    """A route for ``http_server`` serving an RSS feed that grows by ``step`` new items on every fetch.

    Fetch k serves items 0 to k * step - 1, or only the newest ``window`` of them, so an
    ingest always has exactly ``step`` new items to store. Links carry a tracking
    parameter and descriptions escaped HTML, as real feeds do.
    """
    fetches = 0
    lock = threading.Lock()
    slug = name.lower().replace(" ", "-")

    def reply(seen):
        nonlocal fetches
        with lock:
            fetches += 1
            top = fetches * step
        first = 0 if window is None else max(0, top - window)
        items = "".join(
            f"<item><title>{name} story {n}</title><link>https://feeds.example/{slug}/{n}?utm_source=rss</link>"
            f"<description>&lt;p&gt;Story {n} of {name}.&lt;/p&gt;</description>"
            f"<pubDate>{time.strftime('%a, %d %b %Y %H:%M:%S GMT', time.gmtime(1_700_000_000 + n * 60))}</pubDate></item>"
            for n in range(first, top)
        )
        body = f'<?xml version="1.0"?><rss version="2.0"><channel><title>{name}</title><link>https://feeds.example/</link>{items}</channel></rss>'
        return Reply(200, body, {"Content-Type": "application/rss+xml"})

    return reply


def other_export(export: dict) -> dict:
    """A second valid version of a site export: a course fewer and the first retitled.

    Two versions let a test tell "one export or the other" from "a mix of both".
    """
    other = json.loads(json.dumps(export))
    other["courses"] = other["courses"][:-1]
    other["courses"][0]["title"] += " (revised)"
    kept = {course["id"] for course in other["courses"]}
    other["glossary"] = [
        entry for entry in other["glossary"] if not isinstance(entry.get("lesson"), dict) or entry["lesson"]["course"] in kept
    ]
    return other
