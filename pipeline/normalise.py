"""Turning one parsed feed entry into one clean news item: pure functions only.

Nothing here does I/O or touches the database, so the rules of what an item
looks like (its canonical URL, its id, its plain text, its tag and its date)
can be tested on their own and run in a worker process next to the parser.
"""

from __future__ import annotations

import functools
import hashlib
import html
import re
from datetime import datetime, timedelta, timezone
from typing import Iterable, NamedTuple, Sequence
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import nh3

from db.model import format_time

#: Longest summary kept, in characters, ellipsis included.
SUMMARY_LIMIT = 500
#: Longest title made up from the summary when an entry has no title.
TITLE_LIMIT = 120
#: A date further ahead than this is a publisher's mistake, not a scheduled post we can show.
FUTURE_TOLERANCE = timedelta(days=1)

#: Query parameters that only say how a reader arrived; they make one story look like many.
TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid", "igshid",
        "mc_cid", "mc_eid", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
        "vero_id", "vero_conv", "wickedid", "rb_clickid", "s_cid", "ncid", "sr_share", "at_medium",
        "at_campaign", "ref_src", "spm", "__s",
    }
)
TRACKING_PREFIXES = ("utm_", "pk_", "hsa_", "piwik_", "matomo_", "itm_")

_BLOCK_TAG = re.compile(r"<(?=/?(?:p|div|br|li|ul|ol|h[1-6]|tr|td|th|blockquote|pre|section|article|figure|figcaption|hr)\b)", re.I)
_ENDING_PUNCTUATION = " \t,;:-–—([{'\"“‘"


class Item(NamedTuple):
    """One normalised news item, as stored in the ``news`` table.

    A named tuple: it crosses from parser processes cheaply.
    """

    id: str
    url: str
    title: str
    summary: str
    tag: str
    published_at: str


def canonical_url(link: str | None, base: str | None = None) -> str | None:
    """The one spelling of ``link`` that identifies a story, or ``None`` if it is not a web link.

    Relative links are resolved against ``base``; the scheme and host are
    lower-cased, default ports and the fragment dropped, and tracking
    parameters (``utm_*``, ``fbclid``, ``gclid``, ``mc_cid``...) removed
    while every other parameter keeps its order and spelling.
    """
    if not link or not link.strip():
        return None
    link = link.strip()
    if base and not link.startswith(("http://", "https://")):
        link = urljoin(base, link)
    try:
        parts = urlsplit(link)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    netloc = host.lower()
    if ":" in netloc:  # IPv6 literal
        netloc = f"[{netloc}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        netloc += f":{port}"
    kept = [pair for pair in parts.query.split("&") if pair and not _is_tracking(pair)]
    return urlunsplit((scheme, netloc, parts.path or "/", "&".join(kept), ""))


def _is_tracking(pair: str) -> bool:
    name = unquote(pair.split("=", 1)[0]).lower()
    return name in TRACKING_PARAMS or name.startswith(TRACKING_PREFIXES)


def item_id(url: str) -> str:
    """A stable id from the canonical URL: the first 32 hex digits of its SHA-256."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:32]


def plain_text(markup: str | None) -> str:
    """Markup to one line of plain text: tags removed by nh3, entities decoded, whitespace collapsed."""
    if not markup:
        return ""
    if "<" in markup:
        # Block elements end words; without a space "<p>One</p><p>Two</p>" would read "OneTwo".
        markup = nh3.clean(_BLOCK_TAG.sub(" <", markup), tags=set())
    return " ".join(html.unescape(markup).split())


def shorten(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters on a word boundary, with an ellipsis if cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(_ENDING_PUNCTUATION) + "…"


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


def published_at(published, updated, first_seen: datetime) -> str:
    """When the item was published, in UTC as RFC 3339 with ``Z``.

    ``published`` and ``updated`` are feedparser's UTC ``struct_time`` values
    (or ``None``); the first usable one wins, else ``first_seen``. A date more
    than a day ahead of ``first_seen`` is not believed.
    """
    for parsed in (published, updated):
        if not parsed:
            continue
        try:
            moment = datetime(*parsed[:6], tzinfo=timezone.utc)
        except (TypeError, ValueError):
            continue
        if moment - first_seen > FUTURE_TOLERANCE:
            break
        return format_time(moment)
    return format_time(first_seen)


def normalise_entry(
    entry, default_tag: str, rules: Sequence[tuple[str, str]], base: str | None, first_seen: datetime
) -> Item | None:
    """One feedparser entry as an :class:`Item`, or ``None`` when it has no usable link."""
    # dict.get, not FeedParserDict.get: the keys read here are the canonical ones, and
    # FeedParserDict's alias lookup is a measurable share of the time per entry.
    get = functools.partial(dict.get, entry)
    url = canonical_url(get("link"), base)
    if url is None:
        return None
    summary_markup = get("summary")
    if not summary_markup and get("content"):
        summary_markup = get("content")[0].get("value")
    full_summary = plain_text(summary_markup)
    title = plain_text(get("title")) or shorten(full_summary, TITLE_LIMIT) or url
    categories = [tag.get("term") or "" for tag in get("tags") or ()]
    return Item(
        id=item_id(url),
        url=url,
        title=title,
        summary=shorten(full_summary),
        tag=classify(rules, default_tag, title, full_summary, categories),
        published_at=published_at(get("published_parsed"), get("updated_parsed"), first_seen),
    )
