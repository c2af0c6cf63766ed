"""Turning one parsed feed entry into one clean news item: no I/O, no database.

Each rule has its own module: :mod:`qsite.pipeline.news.urls` (the canonical URL),
:mod:`qsite.pipeline.text` (plain text), :mod:`qsite.pipeline.news.dates` (the date). This
module picks the entry's link and its identity within its feed, and puts an
item together; :func:`qsite.pipeline.news.policy.merge_items` then decides what
the items change in the database.

An entry is identified within its source by its guid/id, else by its link
plus its enclosure, else by its link alone; only when that link repeats
within the document (podcast episodes sharing the show's page, untitled
posts on one page) by its link plus its title, else (no title either) its
link plus its text. Each distinct entry is its own item, even when many
share one link, and a publisher fixing a typo in a title changes the item,
not makes a second one. Across sources, one canonical URL is one story
(:mod:`qsite.pipeline.news.policy`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping, Sequence

from qsite.db.model import IMAGE_URL_MAX, format_time

from qsite.pipeline.news.dates import DateReader
from qsite.pipeline.news.legacy import legacy_id
from qsite.pipeline.news.media import entry_image
from qsite.pipeline.news.people import entry_authors
from qsite.pipeline.text import plain_text, shorten, text_of
from qsite.pipeline.news.urls import canonical_url, is_web_link
from qsite.pipeline.store.records import Item

#: Longest summary kept, in characters, ellipsis included.
SUMMARY_LIMIT = 500
#: Longest title made up from the summary when an entry has no title.
TITLE_LIMIT = 120
#: Longest title kept as the feed gives it, ellipsis included: far above real ones (the longest of
#: tests/data/realfeeds has 282 characters), so that a hostile one (14 MB) is not stored and served whole.
TITLE_MAX = 500
#: Longest url an entry may have: the bound of an image's (a longer link is no usable link; the entry is skipped).
URL_MAX = IMAGE_URL_MAX
#: A date further ahead than this is a publisher's mistake, not a scheduled post we can show.
FUTURE_TOLERANCE = timedelta(days=1)
#: The version of these rules. Part of each source's stored content key
#: (:func:`qsite.pipeline.news.policy.content_key`), so that a new version reads every feed again once.
#: 3: an entry keyed by its link alone unless the link repeats in the document; items carry their image and authors.
#: 4: an Atom entry without an author has its feed's; a time on a 12-hour clock keeps its AM or PM.
#: 5: no control character in a title, summary or author; titles cut to TITLE_MAX; a date before 1991 is no date; an address feedparser cut leaves no author.
#: 6: an author's name keeps the separators at its edges (``/u/jane``) unless an address was cut from there; an avatar is no image; a code sample's text is never read as HTML again;
#:    Google News's news/url redirector followed, AddThis's #.xxxxxxxxxxx sharing fragment dropped.
#: 7: the code-sample exception lets no markup through (text around samples read as one, unclosed code is none);
#:    a control character inside a tag no longer hides it from the second read; a name never ends with a separator
#:    and starts with one only when a letter or digit follows it (``/u/jane``; ``Jane Doe,`` is ``Jane Doe``).
#: 8: a fragment that only navigates or tracks is no part of a URL (``#respond``, ``#comments``, ``#more-1234``, ``#top``,
#:    ``#xtor=...``, a text fragment); an entry whose guid changed is the item at its URL with its title.
RULES_VERSION = 8

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
    #: The feed document's own URLs (fetched from, ``Content-Location``, ``rel="self"``, its
    #: ``xml:base``), canonical: never an item's url. An empty ``href=""`` resolves to one of them.
    own_urls: frozenset[str] = frozenset()
    dates: DateReader = field(default_factory=DateReader)
    #: Whether items need their :attr:`Item.legacy_id` (the source has unclaimed items of the old rules).
    legacy: bool = True
    #: The own links (canonical) that more than one entry keyed by its link carries (:func:`shared_links`).
    shared_links: frozenset[str] = frozenset()
    #: The feed's own pictures (:func:`qsite.pipeline.news.media.feed_logos`): never an item's image.
    logos: frozenset[str] = frozenset()
    #: The authors of an entry that names none (an Atom feed's own ``<author>``; :mod:`qsite.pipeline.news.people`).
    authors: tuple[str, ...] = ()
    #: Whether the feed is Atom: its authors' names and addresses are elements of their own.
    atom: bool = False


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
    """Read a time written by :func:`qsite.db.model.format_time`."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def published_at(moment: datetime | None, first_seen: datetime) -> tuple[str, bool]:
    """When the item was published, as stored, and whether that is the feed's date.

    ``moment`` is the entry's date (:class:`qsite.pipeline.news.dates.DateReader`); without
    one, or one more than a day ahead of ``first_seen``, it is ``first_seen``.
    """
    if moment is None or moment - first_seen > FUTURE_TOLERANCE:
        return format_time(first_seen), False
    return format_time(moment), True


def entry_link(entry: Mapping, context: FeedContext) -> str | None:
    """The entry's url: the first usable candidate, canonical; ``None`` if it has none.

    In order: its ``alternate`` links (web pages before other types, such as
    a PDF), its ``link``, its guid when that is a permalink, its first
    enclosure, then its id when that is an http(s) URL (an Atom entry's id is
    often its permalink, the one link left when its ``href`` is empty). Usable
    means an http(s) URL (relative ones resolved) that is not one of the feed
    document's own URLs, which is what an empty ``href=""`` resolves to, and
    is at most :data:`URL_MAX` characters long once canonical. The
    feed's site link is never an entry's url: a homepage is not a news item,
    so an entry with no link of its own is skipped (and counted).
    """
    links = [link for link in entry.get("links") or () if isinstance(link, Mapping)]
    alternates = [link for link in links if (link.get("rel") or "alternate") == "alternate"]
    alternates.sort(key=lambda link: (link.get("type") or "").lower() not in _PAGE_TYPES)
    candidates = [link.get("href") for link in alternates]
    candidates.append(entry.get("link"))
    if entry.get("guidislink"):
        candidates.append(entry.get("id"))
    candidates += [link.get("href") for link in links if link.get("rel") == "enclosure"]
    guid = entry.get("id")
    if is_web_link(guid):
        candidates.append(guid)
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            url = _canonical(candidate, context.base)
            if url is not None and url not in context.own_urls and len(url) <= URL_MAX:
                return url
    return None


def _enclosure(entry: Mapping) -> str | None:
    links = entry.get("links") or ()
    return next((link.get("href") for link in links if isinstance(link, Mapping) and link.get("rel") == "enclosure"), None)


def own_link(entry: Mapping, base: str | None) -> str | None:
    """The entry's own ``link``, canonical (its fragment kept): what identifies a guid-less entry."""
    link = entry.get("link")
    return _canonical(link, base) if isinstance(link, str) else None


def shared_links(entries: Iterable[Mapping], base: str | None) -> frozenset[str]:
    """The own links that more than one entry without guid or enclosure carries in one document.

    Only those entries are told apart by their title (or text): an entry whose
    link is its own is that link, whatever its title says.
    """
    keyed_by_link = Counter(
        own_link(entry, base)
        for entry in entries
        if not (isinstance(entry.get("id"), str) and entry["id"].strip()) and not _enclosure(entry)
    )
    return frozenset(link for link, count in keyed_by_link.items() if link and count > 1)


def entry_key(entry: Mapping, link: str | None, title: str, text: str, *, shared: bool = False) -> tuple[str, bool]:
    """The entry's identity within its feed, as 32 hex digits, and whether it rests on its link alone or its text.

    Its guid/id; else its own link (canonical, fragment kept) plus its first
    enclosure; else that link alone, unless the link is ``shared`` by other
    entries of the document (:func:`shared_links`): then that link plus its
    title, else that link plus its text. The second value tells
    :func:`qsite.pipeline.news.policy.merge_items` that a stored item at the same
    url may be this entry under another key (its title edited while its link
    was shared, or stored by the rules before, which keyed every guid-less
    entry by link and title).
    """
    guid = entry.get("id")
    if isinstance(guid, str) and guid.strip():
        parts: tuple[str, ...] = ("id", guid.strip())
    else:
        enclosure = _enclosure(entry)
        if enclosure:
            parts = ("link+enclosure", link or "", enclosure.strip())
        elif link and not shared:
            parts = ("link", link)
        elif title:
            parts = ("link+title", link or "", title)
        else:
            parts = ("link+text", link or "", text)
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32], parts[0] not in ("id", "link+enclosure")


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
    # What still holds markup once read (HTML escaped twice, as Reddit's feeds do) is read as HTML again,
    # but never a code sample's text (qsite.pipeline.text.plain_text).
    return plain_text(summary, kind or "text/html") if isinstance(summary, str) else ""


#: What an entry holds of a story: a title, a link, an id, text, links (enclosures among them).
_STORY_KEYS = ("title", "link", "id", "summary", "content", "links", "enclosures")
#: What holds the story in each of feedparser's mappings under those keys: a content's ``value`` (or the
#: ``src`` of Atom content kept elsewhere), a link's ``href`` (feedparser's name for an enclosure's ``url``
#: once it holds an address; an empty one stays ``url``). The rest only describes it (``type``, ``base``,
#: ``language``, ``rel``, ``length``, ``title``), and feedparser fills ``type`` and ``base`` in even for an
#: empty ``<content type="html"></content>``, which must not make an entry with nothing in it a story.
_STORY_PARTS = frozenset({"value", "src", "href", "url"})


def is_empty(entry: Mapping) -> bool:
    """Whether ``entry`` holds nothing of a story: no title, link, id, text or link of any kind.

    Not an entry skipped for want of a link, but none at all: a stray ``<item />``
    nested inside a real one (PCMag's FeedBurner feed has one in each of its
    items) makes feedparser yield one more, empty, entry after each.
    """
    return not any(_holds_something(entry.get(key)) for key in _STORY_KEYS)


def _holds_something(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    if isinstance(value, Mapping):
        return any(_holds_something(part) for key, part in value.items() if key in _STORY_PARTS)
    if isinstance(value, (list, tuple)):
        return any(_holds_something(part) for part in value)
    return False


def normalise_entry(entry: Mapping, context: FeedContext) -> Item | None:
    """One feedparser entry as an :class:`Item`, or ``None`` when it has nothing to link to."""
    url = entry_link(entry, context)
    if url is None:
        return None
    full_text = entry_text(entry)
    raw_title = entry.get("title")
    title = text_of(raw_title, _detail_type(entry, "title")) if isinstance(raw_title, str) else ""
    link = own_link(entry, context.base)
    key, key_from_text = entry_key(entry, link, title, full_text, shared=link in context.shared_links)
    categories = [tag.get("term") or "" for tag in entry.get("tags") or () if isinstance(tag, Mapping)]
    title = shorten(title, TITLE_MAX) or shorten(full_text, TITLE_LIMIT) or url
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
        authors=entry_authors(entry, context.atom) or context.authors,
    )
