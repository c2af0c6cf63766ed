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
import io
import random
import zlib
from dataclasses import dataclass, field

from tests.support.feeds import RSS_TYPE, Entry, rss

CLOSE = "</channel></rss>"


def good_feed(items: int, start: int = 0, encoding: str = "utf-8", title: str = "Hostile") -> str:
    """A well-formed RSS feed of ``items`` stories numbered from ``start``: the raw material the corpus breaks."""
    entries = [
        Entry(f"https://hostile.example/story-{n}?utm_source=x", f"Trapped-ion result {n}",
              f"Mon, 16 Nov 2026 08:{n % 60:02d}:00 GMT", f"<p>Finding {n}</p>")
        for n in range(start, start + items)
    ]
    return rss(entries, title=title, link="https://hostile.example/", description="d", encoding=encoding)


def _with_raw_items(items: str) -> str:
    """An empty good feed with ``items`` spliced in as they are, unescaped (hostile input need not be well-formed)."""
    return good_feed(0)[: -len(CLOSE)] + items + CLOSE


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
    good = good_feed(5).encode()
    xml = RSS_TYPE
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
        Hostile("wrong-encoding-declared-utf8-sent-latin1", good_feed(3, title="Zürich café").encode("latin-1"), xml, True),
        Hostile("wrong-encoding-utf16-without-bom", good_feed(3, encoding="utf-8").encode("utf-16-le"), xml, True),
        Hostile("unknown-encoding", good_feed(3, encoding="x-no-such-charset").encode(), xml, True),
        Hostile("header-charset-lies", good_feed(3).encode("utf-8"), {"Content-Type": "application/rss+xml; charset=ebcdic-cp-be"}, True),
        Hostile("invalid-utf8-sequences", good_feed(3).encode().replace(b"Finding", b"Find\xff\xfe\xc3ing"), xml, True),
        Hostile(
            "gigantic-summary",
            _with_raw_items("<item><title>big</title><link>https://hostile.example/big</link><description>"
                            + "word " * (400_000 * scale) + "</description></item>").encode(),
            xml,
            True,
        ),
        Hostile("many-entries", good_feed(1_000 * scale).encode(), xml, True),
        Hostile(
            "hostile-links",
            _with_raw_items("".join(
                f"<item><title>l{n}</title><link>{link}</link></item>"
                for n, link in enumerate([
                    "javascript:alert(1)", "file:///etc/passwd", "data:text/html,<script>", "http://[::1", "http://%zz/",
                    "//no-scheme.example/x", "http://" + "a" * 70_000 + ".example/", "mailto:x@example.com", "",
                ])
            )).encode(),
            xml,
            True,
        ),
        Hostile("control-characters", good_feed(2).replace("Finding", "Find\x01\x02\x1b[31m").encode(), xml, True),
    ]
    return docs


def gzip_bomb(expanded_bytes: int) -> bytes:
    """A gzip body a few KiB long that expands to ``expanded_bytes`` of zeros."""
    chunk = b"\0" * (1 << 20)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as compressor:
        left = expanded_bytes
        while left > 0:
            compressor.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
    return out.getvalue()


def double_gzip_bomb(expanded_bytes: int) -> bytes:
    """A body to send with ``Content-Encoding: gzip, gzip``: a few KiB that, gunzipped twice, are ``expanded_bytes`` of zeros.

    The inner layer is compressed at level 1, ten times faster than 9 on zeros, so the test builds it in well under a second.
    """
    inner = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    layer = b"".join(inner.compress(chunk) for _ in range(expanded_bytes >> 20)) + inner.flush()
    return gzip.compress(layer, compresslevel=9)


def memory_hungry(size: int) -> bytes:
    """One good item, then unclosed ``<a>`` to at least ``size`` bytes: about 125 MiB of feedparser's memory per MiB."""
    return (good_feed(1)[: -len(CLOSE)] + "<a>" * (size // 3 + 1)).encode()


def slow_to_parse(size: int) -> bytes:
    """Deep unclosed nesting of at least ``size`` bytes: about 6 s of feedparser per MiB, linear in size."""
    level = len(b"<item><channel>")
    return _deep_unclosed(size // level + 1)
