"""The news ingest's decisions, without a network or a database: plain rows and configs in, decisions out."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from qsite.config import SourceConfig
from qsite.db.model import format_time
from qsite.pipeline.news import policy
from qsite.pipeline.store.records import Item, StoredItem, item_id

STARTED = datetime(2025, 3, 10, 12, 0, tzinfo=timezone.utc)
NOW = format_time(STARTED)


def source(**changes) -> SourceConfig:
    fields = {"name": "Lab", "url": "https://lab.example/feed", "tag": "Science", "rules": []}
    return SourceConfig(**{**fields, **changes})


def row(**changes) -> dict:
    """A ``sources`` row as the store returns it: a fresh source, never fetched."""
    fields = {
        "name": "Lab", "url": "https://lab.example/feed", "tag": "Science", "etag": None, "last_modified": None,
        "content_hash": None, "last_fetch_at": None, "last_status": None, "last_error": None,
        "consecutive_failures": 0, "next_fetch_at": None, "disabled": 0,
    }
    return {**fields, **changes}


def item(n: int, title: str = "Title", tag: str = "Science", published: str = "2025-03-09T08:00:00Z", url: str | None = None, **fields) -> Item:
    fields = {"dated": True, "legacy_id": None, **fields}
    return Item(f"key{n}", url or f"https://lab.example/{n}", f"{title} {n}", f"Summary {n}", tag, published, **fields)


def stored(n: int, source: str = "Lab", key: str | None = "same", **fields) -> StoredItem:
    """A stored item; ``key="same"`` gives it the key of :func:`item` ``n``."""
    values = {"title": f"Title {n}", "summary": f"Summary {n}", "tag": "Science", "published_at": "2025-03-09T08:00:00Z",
              "first_seen_at": "2025-03-09T09:00:00Z", **fields}
    return StoredItem(f"id{n}", source, f"key{n}" if key == "same" else key, **values)


def known(*rows: StoredItem, urls: dict | None = None) -> policy.Known:
    return policy.Known({row.entry_key: row for row in rows if row.entry_key}, {row.id: row for row in rows}, urls or {})


def test_the_settings_fingerprint_follows_url_tag_and_rules_only():
    base = policy.settings_fingerprint(source())
    assert policy.settings_fingerprint(source(name="Renamed")) == base
    others = {
        policy.settings_fingerprint(source(url="https://lab.example/other")),
        policy.settings_fingerprint(source(tag="Industry")),
        policy.settings_fingerprint(source(rules=[{"match": "funding", "tag": "Investing"}])),
    }
    assert base not in others and len(others) == 3
    assert policy.content_key(source(), "abc") == f"{base}:abc"


def test_source_change_new_moved_retagged_or_none():
    assert policy.source_change(source(), None) == policy.NEW
    assert policy.source_change(source(url="https://elsewhere.example/feed"), row()) == policy.MOVED
    assert policy.source_change(source(tag="Industry"), row()) == policy.RETAGGED
    stored = row(content_hash=policy.content_key(source(), "abc"))
    assert policy.source_change(source(), stored) is None
    # New rules change the fingerprint the stored hash starts with: parse again.
    assert policy.source_change(source(rules=[{"match": "x", "tag": "Industry"}]), stored) == policy.RETAGGED
    assert policy.source_change(source(), row()) is None  # never stored a body: nothing to forget


def test_a_source_is_due_unless_disabled_or_backing_off():
    assert policy.is_due(row(), NOW)
    assert policy.is_due(row(next_fetch_at=NOW), NOW)
    assert policy.is_due(row(next_fetch_at="2025-03-10T11:59:59Z"), NOW)
    assert not policy.is_due(row(next_fetch_at="2025-03-10T12:00:01Z"), NOW)
    assert not policy.is_due(row(disabled=1), NOW)


def test_backoff_doubles_from_the_interval_caps_at_a_day_and_honours_a_longer_retry_after():
    assert [policy.backoff_seconds(n, 600) for n in (0, 1, 2, 3)] == [600, 600, 1200, 2400]
    assert policy.backoff_seconds(20, 600) == policy.MAX_BACKOFF == 86400
    assert policy.backoff_seconds(1, 600, retry_after=3600.2) == 3601
    assert policy.backoff_seconds(1, 600, retry_after=5) == 600


def test_a_failed_fetch_counts_backs_off_and_says_when_the_next_try_is():
    failure = policy.fetch_failure(row(consecutive_failures=2), "HTTP 500", STARTED, 900)
    assert failure.consecutive_failures == 3 and not failure.disabled
    assert failure.next_fetch_at == format_time(STARTED + timedelta(seconds=3600))
    assert failure.error == "HTTP 500"
    assert failure.shown == f"HTTP 500 (failure 3 in a row; next try after {failure.next_fetch_at})"
    slow = policy.fetch_failure(row(), "HTTP 429", STARTED, 900, retry_after=7200)
    assert slow.next_fetch_at == format_time(STARTED + timedelta(hours=2))


def test_410_gone_disables_the_source_with_no_next_try():
    failure = policy.fetch_failure(row(consecutive_failures=1), "HTTP 410", STARTED, 900, gone=True)
    assert failure.disabled and failure.next_fetch_at is None and failure.consecutive_failures == 2
    assert failure.error == failure.shown == "HTTP 410: the feed is gone; source disabled (its items are kept)"


def test_a_database_failure_is_not_the_feeds_fault_no_backoff():
    before = row(consecutive_failures=2, next_fetch_at="2025-03-10T11:00:00Z")
    failure = policy.store_failure(before, "database or disk is full")
    assert (failure.consecutive_failures, failure.next_fetch_at, failure.disabled) == (2, "2025-03-10T11:00:00Z", False)
    assert failure.error == failure.shown == "database or disk is full"


def test_the_retention_cutoff():
    assert policy.retention_cutoff(None, STARTED) is None
    assert policy.retention_cutoff(30, STARTED) == "2025-02-08T12:00:00Z"


def test_merge_items_sorts_new_updated_unchanged_duplicates_repeats_and_too_old():
    lab = [stored(1), stored(2)]  # 1 unchanged; 2's tag changes below
    items = [
        item(1),
        item(2, tag="Industry"),
        item(3),  # another source holds its URL
        item(4),
        item(4),  # twice in one feed
        item(5, published="2024-01-01T00:00:00Z"),  # older than the cutoff: would be pruned at once
    ]
    changes = policy.merge_items(items, known(*lab, urls={"https://lab.example/3": "Other"}), "Lab", cutoff="2025-01-01T00:00:00Z")
    assert changes.new == [(item_id("https://lab.example/4"), item(4))]
    assert changes.updated == [("id2", item(2, tag="Industry"), "2025-03-09T08:00:00Z")]
    # another source's story is a duplicate; an entry listed twice in one feed is repeated
    assert changes.counts == {"new": 1, "updated": 1, "unchanged": 1, "skipped": 1, "duplicates": 1, "repeated": 1}
    assert policy.merge_items([item(5, published="2024-01-01T00:00:00Z")], known(), "Lab", None).new  # no cutoff keeps it


def test_many_entries_on_one_url_are_many_items_with_distinct_ids():
    url = "https://show.example/"
    changes = policy.merge_items([item(1, url=url), item(2, url=url), item(3, url=url)], known(), "Pod", None)
    ids = [new_id for new_id, _ in changes.new]
    assert ids[0] == item_id(url) and len(set(ids)) == 3
    # A URL already taken (by an item of any source) gives the new one an id of URL and key.
    taken = stored(9, source="Pod", key="other", published_at="x")._replace(id=item_id(url))
    changes = policy.merge_items([item(1, url=url)], known(taken), "Pod", None)
    assert changes.new == [(item_id(url, "key1"), item(1, url=url))]


def test_items_stored_under_the_old_rules_are_claimed_once_keeping_id_and_url():
    old = stored(1, key=None)  # no entry key yet
    first = item(1, legacy_id="id1")
    second = item(2, legacy_id="id1", title="Another post on the same page")
    changes = policy.merge_items([first, second], known(old), "Lab", None)
    assert changes.claimed == [("id1", "key1")] and [new for _, new in changes.new] == [second]
    assert changes.counts["unchanged"] == 1 and changes.counts["new"] == 1
    # Claimed by another source's entry: that source's story stays that source's.
    assert policy.merge_items([first], known(stored(1, source="Other", key=None)), "Lab", None).counts["duplicates"] == 1


def test_a_stored_date_never_moves_not_even_a_first_seen_one():
    """(published_at, id) keys the order cursors walk: a date that moved would show its item twice (issue 25)."""
    undated = stored(1, published_at="2025-03-09T09:00:00Z", first_seen_at="2025-03-09T09:00:00Z")
    changes = policy.merge_items([item(1, published="2018-09-24T22:42:40Z")], known(undated), "Lab", None)
    assert not changes.updated and changes.counts["unchanged"] == 1
    changes = policy.merge_items([item(1, title="New", published="2018-09-24T22:42:40Z")], known(undated), "Lab", None)
    assert changes.updated == [("id1", item(1, title="New", published="2018-09-24T22:42:40Z"), "2025-03-09T09:00:00Z")]
    dated = stored(1)
    changes = policy.merge_items([item(1, title="New", published="2018-09-24T22:42:40Z")], known(dated), "Lab", None)
    assert changes.updated[0][2] == "2025-03-09T08:00:00Z"
    still_undated = item(1, published="2025-03-10T00:00:00Z", dated=False)
    assert policy.merge_items([still_undated], known(undated), "Lab", None).counts["unchanged"] == 1


def test_a_first_read_dates_undated_entries_by_the_older_of_their_dated_neighbours():
    """A backlog read for the first time: undated entries never pose as newer than the dated ones around them (issue 23)."""
    now = "2026-11-25T06:00:00Z"
    feed = [
        item(1, published=now, dated=False),  # above the newest: no newer neighbour, takes the one below
        item(2, published="2025-03-09T08:00:00Z"),
        item(3, published=now, dated=False),
        item(4, published=now, dated=False),
        item(5, published="2025-03-01T08:00:00Z"),
        item(6, published=now, dated=False),  # below the oldest: takes it
    ]
    new = dict(policy.merge_items(feed, known(), "Lab", None, first_read=True).new)
    dates = {id_: row.published_at for id_, row in new.items()}
    by_key = {row.key: row.published_at for row in new.values()}
    assert by_key == {"key1": "2025-03-09T08:00:00Z", "key2": "2025-03-09T08:00:00Z", "key3": "2025-03-01T08:00:00Z",
                      "key4": "2025-03-01T08:00:00Z", "key5": "2025-03-01T08:00:00Z", "key6": "2025-03-01T08:00:00Z"}
    assert len(dates) == 6
    # oldest first works the same: the older neighbour bounds it
    assert policy.backdate_undated(feed[::-1])[::-1] == policy.backdate_undated(feed)
    # a later read: a new undated entry appeared since the last read, so the time first seen is its date
    later = dict(policy.merge_items([item(7, published=now, dated=False), feed[1]], known(), "Lab", None).new)
    assert {row.key: row.published_at for row in later.values()}["key7"] == now
    # nothing dated to go by: the time first seen
    undated_only = [item(8, published=now, dated=False), item(9, published=now, dated=False)]
    assert policy.backdate_undated(undated_only) == undated_only
    # backdated past the retention window: skipped like any too-old item
    assert policy.merge_items(feed, known(), "Lab", "2025-03-05T00:00:00Z", first_read=True).counts["skipped"] == 4


def test_entries_first_seen_together_without_dates_keep_the_feeds_order():
    """Each a second older than the one before (feeds list the newest first): ties ordered by id had lost the order."""
    now = "2026-11-25T06:00:00Z"
    undated = [item(n, published=now, dated=False) for n in range(1, 5)]
    new = policy.merge_items(undated, known(), "Lab", None, first_read=True, seen_at=now).new
    assert [row.published_at for _, row in new] == [
        "2026-11-25T06:00:00Z", "2026-11-25T05:59:59Z", "2026-11-25T05:59:58Z", "2026-11-25T05:59:57Z"
    ]
    assert all(not row.dated for _, row in new)
    # a later read: only the new ones, counted among themselves; stored items keep their dates
    feed = [undated[0], item(9, published=now, dated=False), undated[1], item(8, published="2025-03-09T08:00:00Z")]
    changes = policy.merge_items(feed, known(stored(1), stored(2)), "Lab", None, seen_at=now)
    assert [(row.key, row.published_at) for _, row in changes.new] == [("key9", now), ("key8", "2025-03-09T08:00:00Z")]
    # entries dated by their neighbours on a first read are left as they are
    backdated = policy.merge_items([undated[0], item(8), undated[1]], known(), "Lab", None, first_read=True, seen_at=now).new
    assert {row.published_at for _, row in backdated} == {"2025-03-09T08:00:00Z"}


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ({}, None),  # never fetched: due now
        ({"last_fetch_at": "2025-03-10T12:00:00Z"}, "2025-03-10T12:15:00Z"),  # the interval after the last fetch
        ({"last_fetch_at": "2025-03-10T12:00:00Z", "next_fetch_at": "2025-03-10T14:00:00Z"}, "2025-03-10T14:00:00Z"),
        ({"last_fetch_at": "2025-03-10T12:00:00Z", "disabled": 1}, None),  # never again
    ],
)
def test_next_fetch_is_the_later_of_the_interval_and_the_backoff(stored, expected):
    assert policy.next_fetch(row(**stored), 900) == expected


def test_an_entry_keyed_by_its_title_keeps_its_item_when_the_title_is_corrected():
    old = stored(1, key="title-key")  # stored under the key of its old title
    corrected = item(1, title="Corrected", key_from_text=True)
    at_url = {"https://lab.example/1": [old]}
    changes = policy.merge_items([corrected], policy.Known({}, {}, {}, at_url), "Lab", None)
    assert changes.updated == [("id1", corrected, "2025-03-09T08:00:00Z")] and not changes.new
    # Two entries at that URL now: the stored item cannot be told apart, so both are new.
    twin = item(2, title="Twin", url="https://lab.example/1", key_from_text=True)
    changes = policy.merge_items([corrected, twin], policy.Known({}, {}, {}, at_url), "Lab", None)
    assert len(changes.new) == 2 and not changes.updated


def test_a_new_image_or_author_is_an_update_and_the_same_ones_are_not():
    """updated_at moves on a real change only: what merge_items calls updated is what the store stamps."""
    image, authors = "https://lab.example/1.jpg", ("Jane Doe",)
    same = stored(1, image_url=image, authors=authors)
    unchanged = policy.merge_items([item(1, image_url=image, authors=authors)], known(same), "Lab", None)
    assert unchanged.counts["unchanged"] == 1 and not unchanged.updated
    for changed in (item(1, image_url="https://lab.example/2.jpg", authors=authors), item(1, image_url=None, authors=authors),
                    item(1, image_url=image, authors=("Jane Doe", "John Roe")), item(1, image_url=image)):
        assert [row[0] for row in policy.merge_items([changed], known(same), "Lab", None).updated] == ["id1"]


def test_an_entry_whose_guid_changed_is_the_item_at_its_url_with_its_title():
    old = stored(1, key="http-guid")  # stored under the guid before (http://site/?p=1)
    moved = item(1)  # keyed by its new guid (key1), same URL and title
    at_url = {"https://lab.example/1": [old]}
    changes = policy.merge_items([moved], policy.Known({}, {}, {}, at_url), "Lab", None)
    assert not changes.new and not changes.updated and changes.claimed == [("id1", "key1")]
    # edited at once as well: a new title is no proof it is the same story
    changes = policy.merge_items([item(1, title="Other")], policy.Known({}, {}, {}, at_url), "Lab", None)
    assert len(changes.new) == 1
    # the old guid still in the document: that entry is the stored item, this one is new
    still = item(9, url="https://lab.example/1")._replace(key="http-guid", title="Title 1")
    changes = policy.merge_items([moved, still], policy.Known({"http-guid": old}, {}, {}, at_url), "Lab", None)
    assert [item.key for _, item in changes.new] == ["key1"] and not changes.claimed
    # two entries sharing the link in one document (podcast episodes) stay apart: neither takes it
    twin = item(2, url="https://lab.example/1")._replace(title="Title 1")
    changes = policy.merge_items([moved, twin], policy.Known({}, {}, {}, at_url), "Lab", None)
    assert len(changes.new) == 2 and not changes.claimed


def test_an_undated_entry_retention_removed_stays_removed_unless_dated_inside_the_window():
    cutoff = "2025-03-01T00:00:00Z"
    removed = frozenset({item_id("https://lab.example/1")})
    undated = item(1, published="2025-03-09T08:00:00Z", dated=False)  # stamped with the time seen: inside the window
    changes = policy.merge_items([undated], policy.Known({}, {}, {}, {}, removed), "Lab", cutoff)
    assert not changes.new and changes.counts["skipped"] == 1
    dated = item(1, published="2025-03-09T08:00:00Z")
    changes = policy.merge_items([dated], policy.Known({}, {}, {}, {}, removed), "Lab", cutoff)
    assert [id_ for id_, _ in changes.new] == [item_id("https://lab.example/1")]
    # no retention now: still only a date of the publisher's brings it back
    changes = policy.merge_items([undated], policy.Known({}, {}, {}, {}, removed), "Lab", None)
    assert not changes.new
def test_a_back_off_yields_to_a_file_modified_after_the_failed_try_or_to_the_operator():
    row = {"disabled": 0, "next_fetch_at": "2026-01-01T12:10:00Z", "last_fetch_at": "2026-01-01T12:00:00Z"}
    now = "2026-01-01T12:05:00Z"
    assert not policy.is_due(row, now)
    assert not policy.is_due(row, now, modified_at="2026-01-01T11:59:59Z")  # the file that failed, unchanged
    assert not policy.is_due(row, now, modified_at="2026-01-01T12:00:00Z")
    assert policy.is_due(row, now, modified_at="2026-01-01T12:00:01Z")
    assert policy.is_due(row, now, now_asked=True)
    assert not policy.is_due({**row, "disabled": 1}, now, modified_at="2026-01-01T12:04:00Z", now_asked=True)  # 410 Gone
