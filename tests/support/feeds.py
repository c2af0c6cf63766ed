"""Feed documents built in code: RSS 2.0 and Atom 1.0, from a list of :class:`Entry`.

A test says what its entries are (link, title, date, summary); :func:`rss` and
:func:`atom` write the document a server would send. Text is escaped as XML
text, so an HTML summary arrives escaped, as most real feeds carry it. Tests
that need a broken document (truncated, re-encoded, spliced) start from one of
these and break it themselves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Iterable
from xml.sax.saxutils import escape, quoteattr

from tests.support.local_server import Reply, SeenRequest

RSS_TYPE = {"Content-Type": "application/rss+xml"}


@dataclass(frozen=True)
class Entry:
    """One item of a feed.

    ``published`` is sent as it is when a string (so a test can send a date as
    real feeds spell it, wrong weekday and all), or formatted for the feed's
    format when a timezone-aware datetime; ``None`` leaves the date out (RSS).
    ``summary`` is text, HTML included, and is escaped into the document.
    """

    link: str
    title: str
    published: str | datetime | None = None
    summary: str | None = None


def _element(name: str, text: str | None) -> str:
    return "" if text is None else f"<{name}>{escape(text)}</{name}>"


def _rss_time(value: str | datetime | None) -> str | None:
    return format_datetime(value.astimezone(timezone.utc), usegmt=True) if isinstance(value, datetime) else value


def rss(entries: Iterable[Entry], *, title: str = "Test feed", link: str = "https://t.example/",
        description: str | None = None, encoding: str = "UTF-8") -> str:
    """An RSS 2.0 document of ``entries``; its channel's description is its title unless given."""
    items = "".join(
        "<item>" + _element("title", entry.title) + _element("link", entry.link) + _element("description", entry.summary)
        + _element("pubDate", _rss_time(entry.published))
        + "</item>"
        for entry in entries
    )
    return (
        f'<?xml version="1.0" encoding="{encoding}"?>\n<rss version="2.0"><channel>'
        + _element("title", title) + _element("link", link) + _element("description", title if description is None else description)
        + items + "</channel></rss>"
    )


def _atom_time(value: str | datetime) -> str:
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(value, datetime) else value


def atom(entries: Iterable[Entry], *, title: str = "Test feed", link: str | None = None, base: str | None = None,
         updated: str | datetime = "2025-01-01T00:00:00Z") -> str:
    """An Atom 1.0 document of ``entries``.

    ``base`` becomes the feed's ``xml:base`` (relative links resolve against it);
    ``link`` the feed's own alternate link. Each entry's id is its link, and an
    entry without a date carries the feed's ``updated``, as Atom requires one.
    """
    body = "".join(
        "<entry>" + _element("title", entry.title) + f"<link href={quoteattr(entry.link)}/>" + _element("id", entry.link)
        + _element("updated", _atom_time(entry.published or updated))
        + ("" if entry.summary is None else f'<summary type="html">{escape(entry.summary)}</summary>')
        + "</entry>"
        for entry in entries
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"'
        + ("" if base is None else f" xml:base={quoteattr(base)}") + ">"
        + _element("title", title) + ("" if link is None else f"<link href={quoteattr(link)}/>")
        + _element("id", "urn:qsite-tests:feed") + _element("updated", _atom_time(updated))
        + body + "</feed>"
    )


def growing_feed(name: str, step: int, window: int | None = None):
    """A route for ``http_server`` serving an RSS feed that grows by ``step`` new items on every fetch.

    Fetch k serves items 0 to k * step - 1, or only the newest ``window`` of them, so an
    ingest always has exactly ``step`` new items to store. Links carry a tracking
    parameter and summaries HTML, as real feeds do.
    """
    fetches = 0
    lock = threading.Lock()
    slug = name.lower().replace(" ", "-")

    def reply(seen: SeenRequest) -> Reply:
        nonlocal fetches
        with lock:
            fetches += 1
            top = fetches * step
        first = 0 if window is None else max(0, top - window)
        entries = [
            Entry(
                f"https://feeds.example/{slug}/{n}?utm_source=rss",
                f"{name} story {n}",
                datetime.fromtimestamp(1_700_000_000 + n * 60, timezone.utc),
                f"<p>Story {n} of {name}.</p>",
            )
            for n in range(first, top)
        ]
        return Reply(200, rss(entries, title=name, link="https://feeds.example/"), RSS_TYPE)

    return reply


def rss_items(*entries: dict) -> bytes:
    """An RSS 2.0 document; each entry: ``link``, ``title``, and optionally ``guid``, ``date`` (datetime), ``category``."""
    items = []
    for entry in entries:
        parts = [f"<title>{escape(entry['title'])}</title>", f"<link>{escape(entry['link'])}</link>"]
        if entry.get("guid"):
            parts.append(f'<guid isPermaLink="false">{escape(entry["guid"])}</guid>')
        if entry.get("date"):
            parts.append(f"<pubDate>{entry['date'].strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate>")
        if entry.get("category"):
            parts.append(f"<category>{escape(entry['category'])}</category>")
        items.append("<item>" + "".join(parts) + "</item>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>T</title>'
        "<link>https://site.example/</link><description>T</description>" + "".join(items) + "</channel></rss>"
    ).encode()
