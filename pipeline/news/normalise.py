"""Turning one parsed feed entry into one clean news item: no I/O, no database.

Each rule has its own module: :mod:`pipeline.news.urls` (the canonical URL),
:mod:`pipeline.text` (plain text), :mod:`pipeline.news.dates` (the date). This
module picks the entry's link and its identity within its feed, and puts an
item together; :func:`pipeline.news.policy.merge_items` then decides what
the items change in the database.

An entry is identified within its source by its guid/id, else by its link
plus its enclosure, else by its link plus its title, else (no title either)
by its link plus its text: each distinct entry is its own item, even when
many share one link (posts that are fragments of one page, podcast episodes
all linking to the show). Across sources, one canonical URL is one story
(:mod:`pipeline.news.policy`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping, Sequence

from db.model import format_time

from pipeline.news.dates import DateReader
from pipeline.news.legacy import legacy_id
from pipeline.news.media import entry_image
from pipeline.news.people import entry_authors
from pipeline.text import shorten, text_of
from pipeline.news.urls import canonical_url
from pipeline.store.records import Item

#: Longest summary kept, in characters, ellipsis included.
SUMMARY_LIMIT = 500
#: Longest title made up from the summary when an entry has no title.
TITLE_LIMIT = 120
#: A date further ahead than this is a publisher's mistake, not a scheduled post we can show.
FUTURE_TOLERANCE = timedelta(days=1)
#: The version of these rules. Part of each source's stored content key
#: (:func:`pipeline.news.policy.content_key`), so that a new version reads every feed again once.
#: 3: items carry their image and authors.
RULES_VERSION = 3

#: :func:`canonical_url`, remembered: an entry's ``link`` is usually also its first ``alternate`` link.
_canonical = functools.lru_cache(maxsize=2048)(canonical_url)

#: Link types that are a web page (an alternate link without a type is taken to be one).
_PAGE_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})


@dataclass
class FeedContext:
    """What every entry of one feed is normalised with."""

    tag: str
    rules: Sequence[tuple[str, str]]
    #: Resolves relative links: where the feed came from, else its own channel link.
    base: str | None
    first_seen: datetime
    #: The feed's site (``<channel><link>``), canonical: the last resort for an entry's url.
    channel_link: str | None = None
    #: The feed document's own URLs (fetched from, ``rel="self"``), canonical: never an item's url.
    own_urls: frozenset[str] = frozenset()
    dates: DateReader = field(default_factory=DateReader)
    #: Whether items need their :attr:`Item.legacy_id` (the source has unclaimed items of the old rules).
    legacy: bool = True
    #: The feed's own pictures (:func:`pipeline.news.media.feed_logos`): never an item's image.
    logos: frozenset[str] = frozenset()


def classify(
    rules: Sequence[tuple[str, str]], default_tag: str, title: str, summary: str, categories: Iterable[str] = ()
) -> str:
    """The tag of the first rule whose regex matches the title, summary or a category, else ``default_tag``."""
    fields = (title, summary, *categories)
    for pattern, tag in rules:
        regex = re.compile(pattern)  # re caches compiled patterns
        if any(regex.search(field) for field in fields if field):
            return tag
    return default_tag


def parse_time(value: str) -> datetime:
    """Read a time written by :func:`db.model.format_time`."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def published_at(moment: datetime | None, first_seen: datetime) -> tuple[str, bool]:
    """When the item was published, as stored, and whether that is the feed's date.

    ``moment`` is the entry's date (:class:`pipeline.news.dates.DateReader`); without
    one, or one more than a day ahead of ``first_seen``, it is ``first_seen``.
    """
    if moment is None or moment - first_seen > FUTURE_TOLERANCE:
        return format_time(first_seen), False
    return format_time(moment), True


def entry_link(entry: Mapping, context: FeedContext) -> str | None:
    """The entry's url: the first usable candidate, canonical.

    In order: its ``alternate`` links (web pages before other types, such as
    a PDF), its ``link``, its guid when that is a permalink, its first
    enclosure, then the feed's own site link. Usable means an http(s) URL
    (relative ones resolved) that is not the feed document itself, which is
    what an empty ``href=""`` resolves to.
    """
    links = [link for link in entry.get("links") or () if isinstance(link, Mapping)]
    alternates = [link for link in links if (link.get("rel") or "alternate") == "alternate"]
    alternates.sort(key=lambda link: (link.get("type") or "").lower() not in _PAGE_TYPES)
    candidates = [link.get("href") for link in alternates]
    candidates.append(entry.get("link"))
    if entry.get("guidislink"):
        candidates.append(entry.get("id"))
    candidates += [link.get("href") for link in links if link.get("rel") == "enclosure"]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            url = _canonical(candidate, context.base)
            if url is not None and url not in context.own_urls:
                return url
    return context.channel_link


def entry_key(entry: Mapping, link: str | None, title: str, text: str) -> tuple[str, bool]:
    """The entry's identity within its feed, as 32 hex digits, and whether it is made of its text.

    Its guid/id; else its own link (canonical, fragment kept) plus its first
    enclosure; else that link plus its title; else that link plus its text.
    """
    guid = entry.get("id")
    if isinstance(guid, str) and guid.strip():
        parts = ("id", guid.strip())
    else:
        enclosure = next(
            (link.get("href") for link in entry.get("links") or () if isinstance(link, Mapping) and link.get("rel") == "enclosure"),
            None,
        )
        if enclosure:
            parts = ("link+enclosure", link or "", enclosure.strip())
        elif title:
            parts = ("link+title", link or "", title)
        else:
            parts = ("link+text", link or "", text)
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32], parts[0] in ("link+title", "link+text")


def _detail_type(entry: Mapping, key: str) -> str | None:
    detail = entry.get(f"{key}_detail")
    return detail.get("type") if isinstance(detail, Mapping) else None


def entry_text(entry: Mapping) -> str:
    """The entry's full text, plain: its summary, else its first content, as typed by the feed."""
    summary, kind = entry.get("summary"), _detail_type(entry, "summary")
    content = [c for c in entry.get("content") or () if isinstance(c, Mapping) and c.get("value")]
    if summary and kind is None and content and content[0].get("value") == summary:
        kind = content[0].get("type")  # feedparser copied the content into the summary, without its type
    if not summary and content:
        summary, kind = content[0].get("value"), content[0].get("type")
    # A value with no type at all is taken to be HTML: stripping tags from text loses less than showing markup.
    return text_of(summary, kind or "text/html") if isinstance(summary, str) else ""


def normalise_entry(entry: Mapping, context: FeedContext) -> Item | None:
    """One feedparser entry as an :class:`Item`, or ``None`` when it has nothing to link to."""
    url = entry_link(entry, context)
    if url is None:
        return None
    full_text = entry_text(entry)
    raw_title = entry.get("title")
    title = text_of(raw_title, _detail_type(entry, "title")) if isinstance(raw_title, str) else ""
    own_link = _canonical(entry.get("link"), context.base) if isinstance(entry.get("link"), str) else None
    key, key_from_text = entry_key(entry, own_link, title, full_text)
    categories = [tag.get("term") or "" for tag in entry.get("tags") or () if isinstance(tag, Mapping)]
    title = title or shorten(full_text, TITLE_LIMIT) or url
    when, dated = published_at(context.dates.read(entry), context.first_seen)
    return Item(
        key=key,
        url=url,
        title=title,
        summary=shorten(full_text, SUMMARY_LIMIT),
        tag=classify(context.rules, context.tag, title, full_text, categories),
        published_at=when,
        dated=dated,
        legacy_id=legacy_id(entry.get("link"), context.base) if context.legacy else None,
        key_from_text=key_from_text,
        image_url=entry_image(entry, context.base, context.logos),
        authors=entry_authors(entry),
    )
