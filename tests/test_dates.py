"""An entry's date: feedparser's reading checked against the raw text, else dateparser's."""

from datetime import datetime, timezone

import pytest

from qsite.pipeline.news.dates import EARLIEST, DateReader, agrees


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "moment, raw, expected",
    [
        (utc(2020, 11, 1), "2020/1/10 14:33:00", False),  # feedparser's reading of a slash date
        (utc(2020, 11, 1), "2020/1/11 09:05:00", False),  # all three numbers there, in no date's order
        (utc(2020, 1, 11, 9, 5), "2020/1/11 09:05:00", True),
        (utc(2013, 12, 31, 4, 23), "Mon, 30 Dec 2013 23:23:39 EST", True),  # a day later in UTC
        (utc(2005, 12, 31, 16, 33), "2006-01-01T01:33:34+09:00", True),  # even the year differs in UTC
        (utc(2017, 9, 4, 20, 11), "Mon, 04 Sep 17 16:11 EDT", True),
        (utc(2026, 5, 20, 7, 3), "05/20 7:03 am", False),  # no year written: not this year's
        (utc(2021, 3, 4), "03/04/2021", True),
        (utc(2021, 4, 3), "03/04/2021", True),
    ],
)
def test_a_date_agrees_with_its_text_only_if_its_numbers_are_there(moment, raw, expected):
    assert agrees(moment, raw) is expected


def entry(raw: str, parsed=None) -> dict:
    return {"published": raw, "published_parsed": parsed.timetuple() if parsed else None}


def test_feedparser_dates_that_agree_are_kept_and_wrong_ones_replaced():
    reader = DateReader()
    assert reader.read(entry("Tue, 27 Dec 2005 13:30:33 +0900", utc(2005, 12, 27, 4, 30, 33))) == utc(2005, 12, 27, 4, 30, 33)
    assert reader.read(entry("2020/1/10 14:33:00", utc(2020, 11, 1))) == utc(2020, 1, 10, 14, 33)
    # A time without a zone is UTC.
    assert reader.read(entry("2005-5-28 16:05:36")) == utc(2005, 5, 28, 16, 5, 36)
    assert reader.read({"updated": "Mon, 26 Sept 2005 21:46:23+0900"}) == utc(2005, 9, 26, 12, 46, 23)


@pytest.mark.parametrize(
    "raw, parsed, expected",
    [
        # NBC New York's pubDate (tests/data/realfeeds/nbc-new-york.rss): feedparser reads 02:02:33
        ("Sat, Dec 16 2023 02:02:33 PM", utc(2023, 12, 16, 2, 2, 33), utc(2023, 12, 16, 14, 2, 33)),
        ("Sat, 16 Dec 2023 02:02:33 pm +0100", utc(2023, 12, 16, 1, 2, 33), utc(2023, 12, 16, 13, 2, 33)),
        ("Sat, Dec 16 2023 12:30:00 AM", utc(2023, 12, 16, 12, 30), utc(2023, 12, 16, 0, 30)),
        ("12/16/2023 7:03 a.m.", None, utc(2023, 12, 16, 7, 3)),
    ],
)
def test_a_time_on_a_12_hour_clock_is_read_with_its_am_or_pm(raw, parsed, expected):
    assert DateReader("en-us").read(entry(raw, parsed)) == expected


def test_other_languages_are_read_by_the_fallback():
    assert DateReader("pt-br").read(entry("Seg, 24 Set 2018 19:42:40 -0300")) == utc(2018, 9, 24, 22, 42, 40)
    assert DateReader("en").read(entry("พฤ., 03 พ.ย. 2005 21:24:18 +0000")) == utc(2005, 11, 3, 21, 24, 18)


@pytest.mark.parametrize(
    "raw, parsed",
    [
        ("Mon, 01 Jan 0001 00:00:00 GMT", utc(1, 1, 1)),  # .NET's DateTime.MinValue
        ("Mon, 01 Jan 1900 00:00:00 GMT", utc(1900, 1, 1)),
        ("Thu, 01 Jan 1970 00:00:00 GMT", utc(1970, 1, 1)),  # Unix time 0
        ("1980-01-01T00:00:00Z", None),  # read by dateparser: no date either
    ],
)
def test_a_placeholder_date_before_the_web_is_no_date_and_updated_is_read_instead(raw, parsed):
    reader = DateReader("en")
    assert reader.read(entry(raw, parsed)) is None
    assert reader.read({**entry(raw, parsed), "updated": "2005-05-28T16:05:36Z"}) == utc(2005, 5, 28, 16, 5, 36)
    assert reader.read(entry("Tue, 01 Jan 1991 00:00:00 GMT", utc(1991, 1, 1))) == EARLIEST


@pytest.mark.slow  # dateparser tries every locale on each text that is no date
def test_dates_without_a_year_or_not_dates_at_all_are_none():
    reader = DateReader("zh-TW")
    assert reader.read(entry("05/20 7:03 am")) is None
    assert reader.read(entry("no date at all")) is None
    assert reader.read({}) is None


def test_a_feed_of_unreadable_dates_stops_trying_once_its_budget_is_spent():
    reader = DateReader("en")
    reader.budget = 0.0
    assert all(reader.read(entry(f"{n:02d}/20 7:03 am")) is None for n in range(1, 200))
    assert reader.budget == 0.0 and not reader._seen  # never given to dateparser
