"""What the news ingest decides, with no SQL and no I/O.

Given a source's stored row (a plain dict from :mod:`qsite.pipeline.store.sources`),
its configuration and the time, these functions decide: whether the source
is due, whether its configuration changed enough to forget its validators,
how long it backs off after a failure, which items are new or changed, and
what the retention window keeps. :mod:`qsite.pipeline.news.ingest` fetches and writes
what they decide, so each rule here is tested without a network or a
database (``tests/test_news_policy.py``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from collections import Counter
from typing import Iterable, Mapping

from qsite.config import SourceConfig
from qsite.db.model import format_time

from qsite.pipeline.news.normalise import RULES_VERSION, parse_time
from qsite.pipeline.store.records import Item, Known, item_id

#: Longest wait between tries of a failing source; it is retried for ever.
MAX_BACKOFF = 24 * 3600

#: How a configured source differs from its stored row (:func:`source_change`).
NEW, MOVED, RETAGGED = "new", "moved", "retagged"


def settings_fingerprint(source: SourceConfig) -> str:
    """A short hash of what decides a source's items besides its bytes: URL, tag, rules, and our own rules.

    It prefixes the stored ``content_hash`` (:func:`content_key`), so changing
    any of them makes the next run parse the feed again even though its bytes
    did not change; so does a new :data:`qsite.pipeline.news.normalise.RULES_VERSION`,
    so that items stored under older rules are read again under the new ones.
    """
    settings = json.dumps([source.url, source.tag, [[rule.match, rule.tag] for rule in source.rules], RULES_VERSION])
    return hashlib.sha256(settings.encode("utf-8")).hexdigest()[:12]


def content_key(source: SourceConfig, body_hash: str) -> str:
    """What ``sources.content_hash`` holds for a body: the settings fingerprint, then the body's hash.

    A fetched body whose key equals the stored one would give the same items: it is not parsed.
    """
    return f"{settings_fingerprint(source)}:{body_hash}"


def source_change(source: SourceConfig, row: Mapping | None) -> str | None:
    """How ``source`` as configured differs from its stored ``row``: :data:`NEW`, :data:`MOVED`, :data:`RETAGGED` or ``None``.

    A moved source (new URL) starts afresh: validators, failures and the
    disabled flag are cleared. A retagged one (tag or rules changed) has its
    validators cleared, so it is fetched and parsed again.
    """
    if row is None:
        return NEW
    if row["url"] != source.public_url:  # stored as it may be shown (db/redact.py)
        return MOVED
    stored = row["content_hash"]
    if row["tag"] != source.tag or (stored and not stored.startswith(settings_fingerprint(source) + ":")):
        return RETAGGED
    return None


def is_due(row: Mapping, now: str, modified_at: str | None = None, now_asked: bool = False) -> bool:
    """Whether a source is fetched by the run starting at ``now``: enabled, and not backing off.

    The back-off yields when what it waits out may be over: the source's file was modified
    (``modified_at``, a stored-format time) after the failed try, or the operator asked for every
    source now (``now_asked``: ``qsite ingest news --now``). A disabled source (410 Gone) stays so.
    """
    if row["disabled"]:
        return False
    if now_asked or row["next_fetch_at"] is None or row["next_fetch_at"] <= now:
        return True
    return bool(modified_at and row["last_fetch_at"] and modified_at > row["last_fetch_at"])


def backoff_seconds(failures: int, every: int, retry_after: float | None = None) -> int:
    """How long a source that failed ``failures`` times in a row waits before its next try.

    ``every`` (the news interval) doubled per failure, capped at a day; a
    server's ``Retry-After`` is honoured when longer, within the same cap.
    """
    delay = min(MAX_BACKOFF, every * 2 ** max(0, failures - 1))
    if retry_after:
        delay = max(delay, min(MAX_BACKOFF, int(retry_after + 0.999)))
    return int(delay)


@dataclass(frozen=True)
class Failure:
    """A source's state after a failed try, and the text its report shows."""

    #: Stored as ``sources.last_error`` and the run's error.
    error: str
    consecutive_failures: int
    next_fetch_at: str | None
    disabled: bool
    #: The report's error: :attr:`error` and, while retrying, when the next try comes.
    shown: str


def fetch_failure(
    row: Mapping, error: str, started: datetime, every: int, *, gone: bool = False, retry_after: float | None = None
) -> Failure:
    """A failed fetch or parse: one more failure in a row, and a backoff; 410 Gone disables the source."""
    failures = row["consecutive_failures"] + 1
    if gone:
        error = f"{error}: the feed is gone; source disabled (its items are kept)"
        return Failure(error, failures, None, True, error)
    next_fetch = format_time(started + timedelta(seconds=backoff_seconds(failures, every, retry_after)))
    shown = f"{error} (failure {failures} in a row; next try after {next_fetch})"
    return Failure(error, failures, next_fetch, bool(row["disabled"]), shown)


def store_failure(row: Mapping, error: str) -> Failure:
    """The database refused a source's outcome: reported as failed, but no backoff.

    The feed did nothing wrong (the disk is full, say), so the source's failure
    count and next try stay as they were and it is tried again on the next run.
    """
    return Failure(error, row["consecutive_failures"], row["next_fetch_at"], bool(row["disabled"]), error)


def retention_cutoff(retention_days: int | None, started: datetime) -> str | None:
    """Items published before this time are not kept (``news.retention_days``); ``None`` keeps all."""
    return format_time(started - timedelta(days=retention_days)) if retention_days else None


@dataclass
class ItemChanges:
    """What one source's items change in ``news``: rows to insert and update, and the counts reported."""

    #: ``(id, item)`` of items to insert.
    new: list[tuple[str, Item]] = field(default_factory=list)
    #: ``(id, item, published_at)`` of stored items whose text, tag, image, authors or date changes (their entry key is set too).
    updated: list[tuple[str, Item, str]] = field(default_factory=list)
    #: ``(id, entry_key)`` of items stored under the old rules that an unchanged entry claims.
    claimed: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def backdate_undated(items: list[Item]) -> list[Item]:
    """A feed's first read: its undated entries dated by their dated neighbours, never as new.

    Entries that were in a feed before qsite first read it are a backlog of
    unknown age: stamped with the time of that read they would pose as the
    newest news, above every dated item. Each undated entry takes the
    older of the dates of its nearest dated entries before and after it in the
    document (the feed's order bounds it, newest-first or oldest-first), so it
    sorts no newer than the dated entries around it. A feed with no dated entry
    at all has nothing to go by: its entries keep the time first seen, a second
    apart in the feed's order (:func:`keep_feed_order`).
    """
    dated = [i for i, item in enumerate(items) if item.dated]
    if not dated or len(dated) == len(items):
        return items
    result = list(items)
    for i, item in enumerate(items):
        if item.dated:
            continue
        before = max((d for d in dated if d < i), default=None)
        after = min((d for d in dated if d > i), default=None)
        around = [items[d].published_at for d in (before, after) if d is not None]
        result[i] = item._replace(published_at=min(around))
    return result


def keep_feed_order(new: list[tuple[str, Item]], seen_at: str) -> list[tuple[str, Item]]:
    """New items stamped with the time first seen (``seen_at``), each a second older than the one before, in feed order.

    Entries with no date of their own that are first seen by one read all carry
    that read's time, and /api/v1/news orders such ties by id, a hash of the
    URL: a feed with no dates at all (heise online's RSS 0.90) was served
    shuffled. Feeds list the newest first, so the n-th of them (from 0) is
    dated ``seen_at`` minus n seconds: they keep the feed's order, the first
    keeps the time first seen, and a read of 1,000 entries (the most read)
    reaches back under 17 minutes. Items dated by their neighbours
    (:func:`backdate_undated`) or by the feed, and items already stored, are
    left as they are.
    """
    start, position, result = parse_time(seen_at), 0, []
    for id_, item in new:
        if not item.dated and item.published_at == seen_at:
            item = item._replace(published_at=format_time(start - timedelta(seconds=position)))
            position += 1
        result.append((id_, item))
    return result


def merge_items(
    items: Iterable[Item],
    known: Known,
    source: str,
    cutoff: str | None,
    first_read: bool = False,
    seen_at: str | None = None,
) -> ItemChanges:
    """Decide what ``source``'s freshly read ``items`` change: new, updated, claimed, skipped, duplicates.

    :param known: what is stored already (:class:`Known`).
    :param cutoff: the retention cutoff (:func:`retention_cutoff`); an older new item
        is skipped, since it would be pruned at once.
    :param first_read: nothing of ``source`` is stored yet: its undated entries are a backlog,
        dated by their neighbours (:func:`backdate_undated`).
    :param seen_at: the time this read first sees its entries, which undated ones carry: new items
        stamped with it keep the feed's order, a second apart (:func:`keep_feed_order`).

    Promises: an entry is the stored item of this source with its entry key; else the item stored
    under the old rules with its legacy id (first read under these rules); else the unclaimed item
    of this source at its URL that its title picks out; else, if another source holds its URL, a
    duplicate; else new, with id :func:`qsite.pipeline.store.records.item_id` of its URL (of URL and key
    when that id is taken). The matching rules in full are in docs/ingestion.md, "Matching entries
    to stored items". A key repeated within the feed counts once (``repeated``); a new undated entry
    whose item retention removed (:attr:`Known.removed`) is skipped.

    Must not change: an update changes title, summary, tag, image and authors; ``published_at`` and
    ``first_seen_at`` never move once stored, not even when an entry stored undated later shows a
    date, since /api/v1/news pages are keyed on (published_at, id) and a moved key would show the
    item twice to a client walking the pages.
    """
    changes = ItemChanges(counts={"new": 0, "updated": 0, "unchanged": 0, "skipped": 0, "duplicates": 0, "repeated": 0})
    counts, seen, claimed, taken = changes.counts, set(), set(), set()
    items = list(items)
    if first_read:
        items = backdate_undated(items)
    keys, per_url = {item.key for item in items}, Counter(item.url for item in items)
    for item in items:
        if item.key in seen:
            counts["repeated"] += 1  # the feed lists one entry twice (or gives two posts one guid)
            continue
        seen.add(item.key)
        old = known.by_key.get(item.key)
        legacy = known.by_id.get(item.legacy_id) if old is None and item.legacy_id else None
        if legacy is not None and legacy.entry_key is None and legacy.id not in claimed:
            if legacy.source != source:
                counts["duplicates"] += 1  # another source's story, stored under the old rules
                continue
            old = legacy
            claimed.add(legacy.id)
        if old is None and item.key_from_text:
            others = [row for row in known.at_url.get(item.url, ()) if row.entry_key not in keys and row.id not in claimed]
            titled = [row for row in others if row.title == item.title]
            if len(titled) == 1:  # the same entry under another key
                old = titled[0]
            elif per_url[item.url] == 1 and len(others) == 1:  # the same entry, its title edited
                old = others[0]
            if old is not None:
                claimed.add(old.id)
        if old is None and not item.key_from_text and per_url[item.url] == 1:
            # its guid changed: the one unclaimed item at its URL with its title is this entry
            titled = [row for row in known.at_url.get(item.url, ())
                      if row.title == item.title and row.entry_key not in keys and row.id not in claimed]
            if len(titled) == 1:
                old = titled[0]
                claimed.add(old.id)
        if old is None:
            if known.url_sources.get(item.url, source) != source:
                counts["duplicates"] += 1
            elif cutoff and item.published_at < cutoff:
                counts["skipped"] += 1
            elif not item.dated and _was_removed(item, known, per_url):
                counts["skipped"] += 1  # retention removed it: only a date of the publisher's can bring it back
            else:
                new_id = item_id(item.url)
                if new_id in known.by_id or new_id in taken:
                    new_id = item_id(item.url, item.key)
                taken.add(new_id)
                changes.new.append((new_id, item))
            continue
        served = (old.title, old.summary, old.tag, old.image_url, old.authors)
        if served != (item.title, item.summary, item.tag, item.image_url, item.authors):
            changes.updated.append((old.id, item, old.published_at))  # never moves: see above
            continue
        if old.entry_key != item.key:
            changes.claimed.append((old.id, item.key))
        counts["unchanged"] += 1
    if seen_at is not None:
        changes.new = keep_feed_order(changes.new, seen_at)
    counts["new"], counts["updated"] = len(changes.new), len(changes.updated)
    return changes


def _was_removed(item: Item, known: Known, per_url: Counter) -> bool:
    """Whether retention removed ``item``'s stored item: a tombstone under the id it was stored with.

    That id is its URL's (:func:`item_id`), or its URL's and key's when the URL was taken; the URL's
    alone is this entry's only when no other entry of the document shares the URL.
    """
    return item_id(item.url, item.key) in known.removed or (per_url[item.url] == 1 and item_id(item.url) in known.removed)


def next_fetch(source: Mapping, every: int) -> str | None:
    """When the news ingest will next fetch ``source``: ``every`` after its last fetch, or later.

    ``sources.next_fetch_at`` is only the floor a failure sets (the backoff or a
    server's ``Retry-After``) and is cleared by a success, so the regular
    interval has to be added here. A disabled source is never fetched (``None``),
    nor is one never fetched yet given a time (it is due now).
    """
    if source["disabled"]:
        return None
    times = [source["next_fetch_at"]]
    try:
        last = parse_time(source["last_fetch_at"] or "")
    except ValueError:
        pass  # never fetched
    else:
        times.append(format_time(last + timedelta(seconds=every)))
    # RFC 3339 UTC strings of one fixed width order as the times do.
    return max((time for time in times if time), default=None)
