"""Fetching a document politely: the one way the pipeline reads anything.

Both the site export and the news feeds come through here. A location is an
http(s) URL or a local path. Over HTTP we send a User-Agent naming the
project, follow at most :data:`MAX_REDIRECTS` redirects, give up after
connect/read timeouts and an overall deadline, refuse bodies over
:data:`MAX_BODY_BYTES` *after* decompression (so a gzip bomb cannot fill
memory), refuse bodies of more than one content-coding (an inner layer is
decompressed whole, past any limit), and do conditional GETs with the
validators sent back exactly as the server gave them.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import hashlib
import os
import re
import ssl
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone

import httpx

from qsite.config import is_url
from qsite.db.model import VERSION

USER_AGENT = f"qsite/{VERSION} (read-only quantum-computing site data service; feed fetcher)"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 20.0
#: A server that drips bytes forever defeats a read timeout; this bounds the whole fetch.
TOTAL_DEADLINE = 60.0
MAX_REDIRECTS = 5
MAX_BODY_BYTES = 15 * 1024 * 1024
#: The options of :func:`fetch` itself; the others a caller passes along go to :func:`make_client`.
FETCH_OPTIONS = ("max_bytes", "deadline")


class FetchError(Exception):
    """A fetch that produced no usable document.

    :param status: the HTTP status, when there was a response.
    :param retry_after: seconds the server asked us to wait (429 and 503).
    """

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def gone(self) -> bool:
        """410 Gone: the publisher removed the feed for good."""
        return self.status == 410


@dataclass
class Fetched:
    """What a fetch returned. ``body`` is ``None`` when the server said 304."""

    location: str
    body: bytes | None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.body is None

    @property
    def content_hash(self) -> str | None:
        return hashlib.sha256(self.body).hexdigest() if self.body is not None else None


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA bundle is slow, far more than a request's TLS set-up; one
    # context serves every client of the process (the scheduler makes one per sweep).
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def make_client(
    connect_timeout: float = CONNECT_TIMEOUT, read_timeout: float = READ_TIMEOUT
) -> httpx.AsyncClient:
    """An HTTP client with the project's timeouts, redirect limit and User-Agent."""
    return httpx.AsyncClient(
        verify=_tls_context(),
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
    )


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; ``None`` for anything else.

    RFC 9110 10.2.3: delta-seconds are ASCII digits only (``str.isdigit`` also takes ``²``,
    which ``float`` refuses), and a value that is neither is ignored.
    """
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"[0-9]+", value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


async def fetch(
    client: httpx.AsyncClient,
    location: str,
    etag: str | None = None,
    last_modified: str | None = None,
    max_bytes: int = MAX_BODY_BYTES,
    deadline: float = TOTAL_DEADLINE,
) -> Fetched:
    """Fetch ``location`` (URL or path); raise :class:`FetchError` on any failure."""
    if not is_url(location):
        return _read_file(location, max_bytes)
    try:
        return await asyncio.wait_for(_fetch_http(client, location, etag, last_modified, max_bytes), deadline)
    except asyncio.TimeoutError:
        raise FetchError(f"{location}: gave up after {deadline:g} s") from None


async def _fetch_http(client, url, etag, last_modified, max_bytes) -> Fetched:
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    try:
        async with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304:
                return Fetched(
                    url,
                    None,
                    304,
                    dict(response.headers),
                    response.headers.get("etag", etag),
                    response.headers.get("last-modified", last_modified),
                )
            if response.status_code >= 400 or response.status_code < 200:
                raise FetchError(
                    f"{url}: HTTP {response.status_code} {response.reason_phrase}".rstrip(),
                    status=response.status_code,
                    retry_after=parse_retry_after(response.headers.get("retry-after"))
                    if response.status_code in (429, 503)
                    else None,
                )
            codings = [value.strip().lower() for value in response.headers.get_list("content-encoding", split_commas=True)]
            codings = [coding for coding in codings if coding not in ("", "identity")]
            if len(codings) > 1:
                # httpx decodes each layer of a chunk whole, with no bound on its output: one
                # layer turns a 64 KiB chunk into at most about 64 MiB, but a second layer turns
                # those into gigabytes before the byte limit below sees any. No feed needs two.
                raise FetchError(f"{url}: Content-Encoding {', '.join(codings)!r} has more than one coding; refused")
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes and "content-encoding" not in response.headers:
                raise FetchError(f"{url}: body of {int(declared)} bytes is over the {max_bytes} byte limit")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise FetchError(f"{url}: body is over the {max_bytes} byte limit")
                chunks.append(chunk)
            # The final URL after redirects: relative links resolve against it.
            return Fetched(
                str(response.url),
                b"".join(chunks),
                response.status_code,
                dict(response.headers),
                response.headers.get("etag"),
                response.headers.get("last-modified"),
            )
    except httpx.TooManyRedirects:
        raise FetchError(f"{url}: more than {MAX_REDIRECTS} redirects") from None
    except httpx.TimeoutException as exc:
        raise FetchError(f"{url}: timed out ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise FetchError(f"{url}: {type(exc).__name__}: {exc}") from None
    except (httpx.InvalidURL, ValueError, OverflowError, ExceptionGroup) as exc:
        # A URL httpx or the socket layer refuses is no httpx.HTTPError: InvalidURL,
        # an IDNA error, or (as an ExceptionGroup from the connection's task group)
        # a port over 65535, also when a redirect leads there. It fails this source only.
        raise FetchError(f"{url}: cannot request this URL: {_innermost(exc)}") from None


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _read_file(location: str, max_bytes: int) -> Fetched:
    try:
        # O_NONBLOCK: opening a FIFO waits for a writer, for ever and on the event loop, holding
        # the writer lock; so open without waiting, and read only a regular file.
        with open(os.open(location, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise FetchError(f"{location}: cannot read file: it is {_file_kind(mode)}, not a regular file")
            body = handle.read(max_bytes + 1)
    except OSError as exc:
        raise FetchError(f"{location}: cannot read file: {exc.strerror or exc}") from None
    if len(body) > max_bytes:
        raise FetchError(f"{location}: file is over the {max_bytes} byte limit")
    return Fetched(location, body)


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words, from its ``st_mode``."""
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}
    return next((kind for test, kind in kinds.items() if test(mode)), "a special file")


def split_options(options: dict) -> tuple[dict, dict]:
    """Fetch ``options`` as two dicts: those of :func:`make_client` (``connect_timeout``,
    ``read_timeout``) and those of :func:`fetch` (:data:`FETCH_OPTIONS`)."""
    client_options = {key: value for key, value in options.items() if key not in FETCH_OPTIONS}
    fetch_options = {key: value for key, value in options.items() if key in FETCH_OPTIONS}
    return client_options, fetch_options


def fetch_one(location: str, etag: str | None = None, last_modified: str | None = None, **options) -> Fetched:
    """Synchronous :func:`fetch` of one location with a client of its own (the site export's one document).

    :param options: for :func:`make_client` and :func:`fetch` (:func:`split_options`).
    """
    client_options, fetch_options = split_options(options)

    async def run():
        async with make_client(**client_options) as client:
            return await fetch(client, location, etag, last_modified, **fetch_options)

    return asyncio.run(run())
