"""The pure rules of what a news item looks like: URL, id, plain text, tag, date."""

import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.normalise import (
    SUMMARY_LIMIT,
    canonical_url,
    classify,
    item_id,
    normalise_entry,
    plain_text,
    published_at,
    shorten,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "link, base, expected",
    [
        ("https://Example.COM/a/b?id=3#comments", None, "https://example.com/a/b?id=3"),
        ("/news/1?utm_source=rss&utm_medium=feed&page=2", "https://site.example.org/feed.xml", "https://site.example.org/news/1?page=2"),
        ("story.html", "https://site.example.org/stories/feed.atom", "https://site.example.org/stories/story.html"),
        ("https://x.example/p?fbclid=AB&gclid=CD&mc_cid=1&mc_eid=2&keep=yes", None, "https://x.example/p?keep=yes"),
        ("https://x.example/p?UTM_Campaign=a", None, "https://x.example/p"),
        ("http://x.example:80/p", None, "http://x.example/p"),
        ("https://x.example:8443/p", None, "https://x.example:8443/p"),
        ("https://x.example", None, "https://x.example/"),
        ("https://x.example/p?q=a%20b&ref=home", None, "https://x.example/p?q=a%20b&ref=home"),
        ("  https://x.example/p  ", None, "https://x.example/p"),
    ],
)
def test_canonical_url(link, base, expected):
    assert canonical_url(link, base) == expected


@pytest.mark.parametrize("link", [None, "", "   ", "mailto:desk@example.com", "javascript:alert(1)", "/relative-without-base"])
def test_canonical_url_refuses_what_is_not_a_web_link(link):
    assert canonical_url(link) is None


def test_same_story_with_different_tracking_has_one_id():
    a = canonical_url("https://News.Example.org/s/1?utm_source=a#top")
    b = canonical_url("https://news.example.org/s/1?mc_cid=x&mc_eid=y")
    assert a == b
    assert item_id(a) == item_id(b)
    assert len(item_id(a)) == 32 and item_id(a) != item_id(canonical_url("https://news.example.org/s/2"))


def test_plain_text_strips_markup_decodes_entities_and_collapses_space():
    assert plain_text("<p>One &amp; <b>two</b></p><p>Three</p>\n\n  <script>alert(1)</script>") == "One & two Three"
    assert plain_text("Qubits &lt; 100 &mdash; for now") == "Qubits < 100 — for now"
    assert plain_text("T<sub>1</sub> of 1 ms<br>next") == "T1 of 1 ms next"
    assert plain_text(None) == "" and plain_text("") == ""


@given(st.text(max_size=2000))
def test_shorten_never_exceeds_the_limit(text):
    cut = shorten(text)
    assert len(cut) <= SUMMARY_LIMIT
    if len(text) <= SUMMARY_LIMIT:
        assert cut == text


def test_shorten_cuts_on_a_word_boundary_with_an_ellipsis():
    text = " ".join(f"word{i}" for i in range(200))
    cut = shorten(text)
    assert cut.endswith("…") and len(cut) <= SUMMARY_LIMIT
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "


def test_classify_first_matching_rule_wins_else_default():
    rules = [(r"(?i)\b(raises|funding)\b", "Investing"), (r"(?i)\bfab\b", "Industry")]
    assert classify(rules, "Science", "Start-up raises $10m for fab", "", []) == "Investing"
    assert classify(rules, "Science", "New fab opens", "", []) == "Industry"
    assert classify(rules, "Science", "Qubit coherence", "nothing", ["Funding"]) == "Investing"
    assert classify(rules, "Science", "Qubit coherence", "nothing", ["Lab"]) == "Science"
    assert classify([], "Industry", "raises", "", []) == "Industry"


def test_published_at_prefers_published_then_updated_then_first_seen():
    published = time.struct_time((2025, 3, 4, 5, 6, 7, 0, 0, 0))
    updated = time.struct_time((2025, 3, 5, 0, 0, 0, 0, 0, 0))
    assert published_at(published, updated, NOW) == "2025-03-04T05:06:07Z"
    assert published_at(None, updated, NOW) == "2025-03-05T00:00:00Z"
    assert published_at(None, None, NOW) == "2025-06-01T12:00:00Z"


def test_a_date_more_than_a_day_ahead_becomes_first_seen():
    soon = (NOW + timedelta(hours=20)).timetuple()
    far = time.struct_time((2099, 1, 7, 9, 0, 0, 0, 0, 0))
    assert published_at(soon, None, NOW) == "2025-06-02T08:00:00Z"
    assert published_at(far, None, NOW) == "2025-06-01T12:00:00Z"


def test_normalise_entry():
    entry = {
        "link": "/posts/1?utm_source=rss",
        "title": "Cat qubits &amp; <i>bit flips</i>",
        "content": [{"value": "<p>Stabilised <b>cat</b> states.</p>"}],
        "tags": [{"term": "Funding"}],
        "updated_parsed": time.struct_time((2025, 1, 2, 3, 4, 5, 0, 0, 0)),
    }
    item = normalise_entry(entry, "Science", [("(?i)funding", "Investing")], "https://lab.example.org/feed", NOW)
    assert item.url == "https://lab.example.org/posts/1"
    assert item.id == item_id(item.url)
    assert item.title == "Cat qubits & bit flips"
    assert item.summary == "Stabilised cat states."
    assert item.tag == "Investing"
    assert item.published_at == "2025-01-02T03:04:05Z"


def test_entry_without_title_takes_its_summary_and_without_link_is_none():
    item = normalise_entry({"link": "https://x.example/a", "summary": "Only a summary here."}, "Science", [], None, NOW)
    assert item.title == "Only a summary here." and item.published_at == "2025-06-01T12:00:00Z"
    assert normalise_entry({"title": "No link", "summary": "x"}, "Science", [], None, NOW) is None
