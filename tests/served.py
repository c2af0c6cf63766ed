"""A real ``qsite serve`` process on a free loopback port, for the reliability tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from conftest import QSITE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, process: subprocess.Popen, port: int, log: Path):
        self.process = process
        self.port = port
        self.log = log
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path


@contextmanager
def qsite_serve(config: Path, log: Path, env: dict | None = None, timeout: float = 20) -> Iterator[Served]:
    """Start ``qsite serve --config config`` and yield once /api/v1 answers; stop it with SIGTERM."""
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [QSITE, "serve", "--config", str(config), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    served = Served(process, port, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"qsite serve exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                httpx.get(served.url("/api/v1"), timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"qsite serve did not answer in {timeout} s: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
