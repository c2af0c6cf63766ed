"""A corpus of hostile feed documents, built in code rather than committed as files.

Each entry is a :class:`Hostile`: a name, the bytes a server sends, the
headers it sends them with, and whether a careful reader may still find items
in it (a truncated feed keeps the entries before the cut, a feed with a wrong
charset still has entries). Everything else must fail the source cleanly.

Sizes are parameters so the same builder serves ``make test`` (small) and
``make soak`` (bigger).
"""

from __future__ import annotations

import gzip
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field

GOOD_ITEM = (
    "<item><title>Trapped-ion result {n}</title><link>https://hostile.example/story-{n}?utm_source=x</link>"
    "<description>&lt;p&gt;Finding {n}&lt;/p&gt;</description><pubDate>Mon, 16 Nov 2026 08:{m:02d}:00 GMT</pubDate></item>"
)


def rss(items: int, start: int = 0, encoding: str = "utf-8", title: str = "Hostile") -> str:
    body = "".join(GOOD_ITEM.format(n=n, m=n % 60) for n in range(start, start + items))
    return (
        f'<?xml version="1.0" encoding="{encoding}"?>\n<rss version="2.0"><channel><title>{title}</title>'
        f"<link>https://hostile.example/</link><description>d</description>{body}</channel></rss>"
    )


@dataclass(frozen=True)
class Hostile:
    name: str
    body: bytes
    headers: dict = field(default_factory=dict)
    #: True when entries may legitimately survive (bozo feeds with entries are warnings;
    #: an entity-expansion document may keep its entry with the entity left unexpanded).
    may_yield_items: bool = False


def _billion_laughs(levels: int = 10) -> bytes:
    lines = ['<!ENTITY lol0 "lol">']
    for level in range(1, levels):
        lines.append(f'<!ENTITY lol{level} "' + f"&lol{level - 1};" * 10 + '">')
    dtd = "\n".join(lines)
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE rss [\n{dtd}\n]>\n<rss version="2.0"><channel><title>&lol{levels - 1};</title>'
        f"<item><title>&lol{levels - 1};</title><link>https://hostile.example/laughs</link>"
        f"<description>&lol{levels - 1};</description></item></channel></rss>"
    ).encode()


def _quadratic_blowup(size: int) -> bytes:
    # One big entity referenced many times: defeats naive depth-only limits.
    entity = "A" * size
    refs = "&big;" * size
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE rss [<!ENTITY big "{entity}">]>\n<rss version="2.0"><channel><title>q</title>'
        f"<item><title>q</title><link>https://hostile.example/q</link><description>{refs}</description></item></channel></rss>"
    ).encode()


def _external_entity() -> bytes:
    # Must never be read: an external entity pointing at a local file.
    return (
        b'<?xml version="1.0"?>\n<!DOCTYPE rss [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
        b'<rss version="2.0"><channel><title>x</title><item><title>&xxe;</title>'
        b"<link>https://hostile.example/xxe</link><description>&xxe;</description></item></channel></rss>"
    )


def _deeply_nested(depth: int) -> bytes:
    return (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>deep</title><item><title>deep</title>'
        b"<link>https://hostile.example/deep</link><description>"
        + b"<div>" * depth
        + b"x"
        + b"</div>" * depth
        + b"</description></item>"
        + b"<x>" * depth
        + b"</x>" * depth
        + b"</channel></rss>"
    )


def _deep_unclosed(depth: int) -> bytes:
    return b'<?xml version="1.0"?><rss version="2.0"><channel>' + b"<item><channel>" * depth


def corpus(scale: int = 1, seed: int = 0) -> list[Hostile]:
    """The hostile documents; ``scale`` multiplies the sizes of the big ones."""
    rand = random.Random(seed)
    good = rss(5).encode()
    xml = {"Content-Type": "application/rss+xml"}
    docs = [
        Hostile("empty", b"", xml),
        Hostile("whitespace", b" \n\t\r\n" * 100, xml),
        Hostile("bom-only", b"\xef\xbb\xbf", xml),
        Hostile("xml-declaration-only", b'<?xml version="1.0" encoding="utf-8"?>', xml),
        Hostile("malformed-tags", b"<rss version='2.0'><channel><title>x</titel><item><<link>>a</item></chan", xml),
        Hostile("unclosed-everything", b"<rss><channel><item><title>t<link>https://hostile.example/a", xml),
        Hostile("truncated-mid-item", good[: len(good) * 2 // 3], xml, True),
        Hostile("truncated-mid-tag", good[: good.index(b"<item>") + 3], xml),
        Hostile("truncated-after-declaration", good[:60], xml),
        Hostile("not-xml-json", b'{"rss": {"channel": {"item": [1, 2, 3]}}}', {"Content-Type": "application/json"}),
        Hostile(
            "html-page",
            b"<!DOCTYPE html><html><head><title>Welcome</title></head><body><h1>Our news</h1>"
            b"<a href='/a'>story</a><p>Subscribe!</p></body></html>",
            {"Content-Type": "text/html; charset=utf-8"},
        ),
        Hostile(
            "html-login-wall-as-rss",
            b"<html><body><form action='/login'><input name='password'></form></body></html>",
            xml,
        ),
        Hostile("binary-random", bytes(rand.getrandbits(8) for _ in range(64 * 1024)), {"Content-Type": "application/octet-stream"}),
        Hostile("binary-png", b"\x89PNG\r\n\x1a\n" + bytes(rand.getrandbits(8) for _ in range(4096)), {"Content-Type": "image/png"}),
        Hostile("nul-bytes", b"\x00" * 10_000, xml),
        Hostile("gzip-without-header", gzip.compress(good), xml),
        Hostile("billion-laughs", _billion_laughs(), xml, True),
        Hostile("quadratic-blowup", _quadratic_blowup(20_000 * scale), xml, True),
        Hostile("external-entity", _external_entity(), xml, True),
        Hostile("deeply-nested", _deeply_nested(4_000 * scale), xml, True),
        Hostile("deep-unclosed", _deep_unclosed(4_000 * scale), xml),
        Hostile("wrong-encoding-declared-utf8-sent-latin1", rss(3, title="Zürich café").encode("latin-1"), xml, True),
        Hostile("wrong-encoding-utf16-without-bom", rss(3, encoding="utf-8").encode("utf-16-le"), xml, True),
        Hostile("unknown-encoding", rss(3, encoding="x-no-such-charset").encode(), xml, True),
        Hostile("header-charset-lies", rss(3).encode("utf-8"), {"Content-Type": "application/rss+xml; charset=ebcdic-cp-be"}, True),
        Hostile("invalid-utf8-sequences", rss(3).encode().replace(b"Finding", b"Find\xff\xfe\xc3ing"), xml, True),
        Hostile(
            "gigantic-summary",
            (rss(0)[: -len("</channel></rss>")] + "<item><title>big</title><link>https://hostile.example/big</link><description>"
             + "word " * (400_000 * scale) + "</description></item></channel></rss>").encode(),
            xml,
            True,
        ),
        Hostile("many-entries", rss(1_000 * scale).encode(), xml, True),
        Hostile(
            "hostile-links",
            (rss(0)[: -len("</channel></rss>")] + "".join(
                f"<item><title>l{n}</title><link>{link}</link></item>"
                for n, link in enumerate([
                    "javascript:alert(1)", "file:///etc/passwd", "data:text/html,<script>", "http://[::1", "http://%zz/",
                    "//no-scheme.example/x", "http://" + "a" * 70_000 + ".example/", "mailto:x@example.com", "",
                ])
            ) + "</channel></rss>").encode(),
            xml,
            True,
        ),
        Hostile("control-characters", rss(2).replace("Finding", "Find\x01\x02\x1b[31m").encode(), xml, True),
    ]
    return docs


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
                time.sleep(self.interval)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stopped.set()
        self.sock.close()
        self.thread.join(2)


def gzip_bomb(expanded_bytes: int) -> bytes:
    """A gzip body a few KiB long that expands to ``expanded_bytes`` of zeros."""
    chunk = b"\0" * (1 << 20)
    compressor = gzip.GzipFile(fileobj=(out := _Buffer()), mode="wb", compresslevel=9)
    left = expanded_bytes
    while left > 0:
        compressor.write(chunk[: min(left, len(chunk))])
        left -= len(chunk)
    compressor.close()
    return out.data


class _Buffer:
    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data
        return len(data)

    def flush(self):
        pass


def random_bytes(size: int, seed: int | None = None) -> bytes:
    return random.Random(seed).randbytes(size) if seed is not None else os.urandom(size)


def slow_to_parse(size: int) -> bytes:
    """Deep unclosed nesting of at least ``size`` bytes: about 6 s of feedparser per MiB, linear in size."""
    level = len(b"<item><channel>")
    return _deep_unclosed(size // level + 1)
