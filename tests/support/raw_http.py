"""Requests written byte for byte on a socket: targets and heads no HTTP client would send as they are."""

from __future__ import annotations

import socket
from typing import Sequence


def raw_request(
    port: int, target: str, method: str = "GET", headers: Sequence[tuple[str, str]] = (("Host", "127.0.0.1"),)
) -> tuple[int, dict, bytes]:
    """Send exactly ``method target`` (no client-side normalising) with ``headers`` to 127.0.0.1:``port``.

    ``Connection: close`` is added. Returns the status, the headers (lower-cased
    names; a repeated one keeps its last value) and the whole body (de-chunked).
    """
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{name}: {value}\r\n" for name, value in headers)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((head + "Connection: close\r\n\r\n").encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    response_head, _, body = data.partition(b"\r\n\r\n")
    lines = response_head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    response_headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    if response_headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return status, response_headers, body


def _dechunk(data: bytes) -> bytes:
    body = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body, data = body + data[:size], data[size + 2 :]
    return body
