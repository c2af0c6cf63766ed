"""What the news tables hold, as the pipeline passes it around: an item, a stored item, and an item's id.

The types the storage layer (:mod:`qsite.pipeline.store.news`) reads and writes and
the news path (:mod:`qsite.pipeline.news.ingest`) builds and decides on; here, below both,
so that storage never imports the news path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

from qsite.db.model import ITEM_ID_DIGITS


class Item(NamedTuple):
    """One entry, normalised: what the ``news`` table stores of it, and how to recognise it.

    A named tuple: it crosses from parser processes cheaply. The item's ``id``
    is given when it is first stored (:func:`qsite.pipeline.news.policy.merge_items`).
    """

    #: The entry's identity within its source (:func:`entry_key`), 32 hex digits.
    key: str
    url: str
    title: str
    summary: str
    tag: str
    published_at: str
    #: Whether ``published_at`` is the feed's date (else it is the time first seen).
    dated: bool
    #: The id this entry had under the rules before migration 3, to recognise its stored item.
    legacy_id: str | None = None
    #: Whether :attr:`key` rests on the entry's link alone or its text (it has no guid and no enclosure):
    #: a stored item at its url may be this entry under another key (a title edited while the link was
    #: shared, or the rules before, which keyed by link and title); :func:`qsite.pipeline.news.policy.merge_items`
    #: allows for it.
    key_from_text: bool = False
    #: The entry's own image (:func:`qsite.pipeline.news.media.entry_image`), canonical, or ``None``.
    image_url: str | None = None
    #: Its authors' names, cleaned (:func:`qsite.pipeline.news.people.entry_authors`).
    authors: tuple[str, ...] = ()


class StoredItem(NamedTuple):
    """What :func:`merge_items` needs of an item already in ``news``."""

    id: str
    source: str
    #: ``None`` for an item stored before migration 3 that no entry has claimed yet.
    entry_key: str | None
    title: str
    summary: str
    tag: str
    published_at: str
    first_seen_at: str
    image_url: str | None = None
    authors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Known:
    """What the database holds that a feed's items may be: read by :func:`qsite.pipeline.store.news.known_items`."""

    #: This source's items, by entry key.
    by_key: Mapping[str, StoredItem]
    #: Items of any source whose id is a legacy id or a would-be new id of the feed's items.
    by_id: Mapping[str, StoredItem]
    #: Which other source holds each of the feed's URLs.
    url_sources: Mapping[str, str]
    #: This source's items at each of the feed's URLs.
    at_url: Mapping[str, Sequence[StoredItem]] = field(default_factory=dict)
    #: The ids the feed's items have or would have that retention removed (tombstones in ``news_removed``).
    removed: frozenset[str] = frozenset()


def item_id(url: str, key: str | None = None) -> str:
    """An id for a new item: the first :data:`~qsite.db.model.ITEM_ID_DIGITS` hex digits of the SHA-256 of its URL (and, if given, its key)."""
    text = url if key is None else f"{url}\n{key}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ITEM_ID_DIGITS]
