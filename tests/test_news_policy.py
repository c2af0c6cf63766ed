"""The news ingest's decisions, without a network or a database: plain rows and configs in, decisions out."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from config import SourceConfig
from db.model import format_time
from pipeline import news_policy as policy
from pipeline.normalise import Item

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


def item(n: int, title: str = "Title", tag: str = "Science", published: str = "2025-03-09T08:00:00Z") -> Item:
    return Item(f"id{n}", f"https://lab.example/{n}", f"{title} {n}", f"Summary {n}", tag, published)


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


def test_merge_items_sorts_new_updated_unchanged_duplicates_and_too_old():
    existing = {
        "id1": ("Lab", "Title 1", "Summary 1", "Science"),  # unchanged
        "id2": ("Lab", "Title 2", "Summary 2", "Science"),  # its tag changes below
        "id3": ("Other", "Title 3", "Summary 3", "Science"),  # another source holds it
    }
    items = [
        item(1),
        item(2, tag="Industry"),
        item(3),
        item(4),
        item(4),  # twice in one feed
        item(5, published="2024-01-01T00:00:00Z"),  # older than the cutoff: would be pruned at once
    ]
    changes = policy.merge_items(items, existing, "Lab", cutoff="2025-01-01T00:00:00Z")
    assert changes.new == [item(4)]
    assert changes.updated == [item(2, tag="Industry")]
    assert changes.counts == {"new": 1, "updated": 1, "unchanged": 1, "skipped": 1, "duplicates": 2}
    assert policy.merge_items([item(5, published="2024-01-01T00:00:00Z")], {}, "Lab", None).new  # no cutoff keeps it


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
