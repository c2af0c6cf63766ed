"""An entry's date: feedparser's reading, checked against the text, else dateparser's.

feedparser reads the date formats feeds are meant to use (RFC 822, RFC 3339
and their usual misspellings), but reads some others wrong without a word
(``2020/1/10 14:33:00`` comes out as 2020-11-01) and gives up on dates
written in another language (``Seg, 24 Set 2018 19:42:40 -0300``). It also
reads a 12-hour clock's time as if it were 24-hour (``02:02:33 PM`` as 02:02:33),
so a time with AM or PM after it is never taken from it. Every other date it
reads is checked against the raw text (:func:`agrees`), and a date
it could not read, or read wrong, is given to `dateparser
<https://dateparser.readthedocs.io/>`_, a multilingual parser, whose answer is
checked the same way. A date neither reads right is no date: the item gets
the time it was first seen. A time written without a zone is UTC.

dateparser is slow when it has to guess the language (tens to hundreds of
milliseconds a date; seconds the first time in a process, when it loads its
language data), so it is imported only when needed, each feed gets one
:class:`DateReader` that remembers the language it found, and a feed whose
unreadable dates have taken :data:`FALLBACK_BUDGET` seconds gets no more tries.
"""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone
from typing import Mapping

#: Seconds one feed's dates that dateparser could not read either may take; past it, the rest stay unread.
FALLBACK_BUDGET = 2.0
#: The earliest date an entry can have. The web went public in 1991 and feeds came years later
#: (RSS in 1999), so an earlier date is a publisher's placeholder for "no date": 0001-01-01
#: (.NET's DateTime.MinValue, Go's zero time), 1900-01-01 (SQL Server, spreadsheets), 1970-01-01
#: (Unix time 0), 1980-01-01 (DOS). It is no date at all: shown, it would be news from the year 1,
#: and it would date the undated entries around it (qsite.pipeline.news.policy.backdate_undated).
EARLIEST = datetime(1991, 1, 1, tzinfo=timezone.utc)
#: Longest raw date text given to dateparser (a date is short; a long text is not one).
MAX_DATE_TEXT = 100

_DIGITS = re.compile(r"\d+")
#: A time on a 12-hour clock: ``2:02 PM``, ``02:02:33pm``, ``7:03 a.m.``.
_TWELVE_HOUR_TIME = re.compile(r"\d:\d\d(?::\d\d)?\s*[ap]\.?m\b\.?", re.IGNORECASE)
_LETTER = re.compile(r"[^\W\d_]")

#: dateparser settings: absolute dates only (never "2 hours ago" or a bare time, which would
#: take today's date), all of day, month and year present, and zone-less times in UTC.
DATEPARSER_SETTINGS = {
    "TIMEZONE": "UTC",
    "TO_TIMEZONE": "UTC",
    "RETURN_AS_TIMEZONE_AWARE": True,
    "REQUIRE_PARTS": ["day", "month", "year"],
    "PARSERS": ["timestamp", "custom-formats", "absolute-time"],
}

#: feedparser's raw and parsed keys, in the order an item's date is taken from them.
DATE_FIELDS = (("published", "published_parsed"), ("updated", "updated_parsed"))


def agrees(moment: datetime, raw: str) -> bool:
    """Whether the date ``moment`` (UTC) can be what ``raw`` says.

    The year and the day of the month must be numbers in ``raw``, each its own
    number, and so must the month unless ``raw`` has letters (a month name, in
    any language). A numeric month must stand where dates put it: year, month,
    day, or day or month first, then the other, then year; so ``2020/1/11``
    is 2020-01-11, never 2020-11-01. The written zone is unknown here, so the
    date may be a day either side of the UTC one (``Mon, 30 Dec 2013 23:23:39
    EST`` is 2013-12-31 in UTC).
    """
    numbers = [(int(run), len(run)) for run in _DIGITS.findall(raw)][:_MAX_NUMBERS]
    named_month = bool(_LETTER.search(raw))
    day = moment.date()
    return any(_written(day + timedelta(days=shift), numbers, named_month) for shift in (0, -1, 1))


#: A date's numbers come first; the rest of a long text (times, zones) is not searched.
_MAX_NUMBERS = 8
#: The orders in which dates write year (y), month (m) and day (d) as numbers.
_ORDERS = frozenset({"ymd", "dmy", "mdy"})


def _written(day: date, numbers: list[tuple[int, int]], named_month: bool) -> bool:
    """Whether ``day``'s year, day and month (or a month name) are distinct ``numbers`` (value, digits), in a date's order."""
    years = [i for i, (value, digits) in enumerate(numbers) if value == day.year or (digits == 2 and value == day.year % 100)]
    days = [i for i, (value, _) in enumerate(numbers) if value == day.day]
    months = [i for i, (value, _) in enumerate(numbers) if value == day.month]
    for y in years:
        for d in days:
            if d == y:
                continue
            if named_month:
                return True
            for m in months:
                if m not in (y, d) and "".join(sorted("ymd", key={"y": y, "m": m, "d": d}.get)) in _ORDERS:
                    return True
    return False


class DateReader:
    """Reads the dates of one feed's entries; remembers what dateparser learnt about the feed.

    :param language: the feed's declared language (``pt-br``), tried first by dateparser.
    """

    def __init__(self, language: str | None = None):
        primary = (language or "").split("-")[0].lower()
        self.languages = [primary] if primary.isalpha() and len(primary) in (2, 3) else []
        self.budget = FALLBACK_BUDGET
        self._parsers: list | None = None
        self._seen: dict[str, datetime | None] = {}

    def read(self, entry: Mapping) -> datetime | None:
        """The entry's date in UTC (published, else updated), or ``None`` when it has none that reads right.

        A date before :data:`EARLIEST` is a placeholder, not a date.
        """
        for raw_key, parsed_key in DATE_FIELDS:
            raw = entry.get(raw_key)
            if not isinstance(raw, str) or not raw.strip():
                continue
            moment = None if _TWELVE_HOUR_TIME.search(raw) else _from_struct(entry.get(parsed_key))
            if moment is not None and agrees(moment, raw):
                if moment < EARLIEST:
                    continue  # read right, as dateparser would read it: a placeholder
                return moment
            moment = self.fallback(raw.strip())
            if moment is not None and moment >= EARLIEST:
                return moment
        return None

    def fallback(self, raw: str) -> datetime | None:
        """dateparser's reading of ``raw`` if it agrees with the text, within the feed's time budget."""
        if raw in self._seen:
            return self._seen[raw]
        if self.budget <= 0 or len(raw) > MAX_DATE_TEXT or not _DIGITS.search(raw):
            return None
        started = time.perf_counter()
        moment = None
        for parser in self._dateparsers():
            try:
                found = parser.get_date_data(raw).date_obj
            except (ValueError, TypeError, OverflowError):  # dateparser's failures are not a documented set
                found = None
            if found is not None:
                found = found.astimezone(timezone.utc)
                moment = found if agrees(found, raw) else None
                break
        if moment is None and self._seen:
            # Only failures count (a date that reads costs milliseconds once its language is known), and
            # not the feed's first try, which may include loading dateparser's language data (seconds, once
            # per process): so whether a feed's dates are read does not depend on how fast the machine is.
            self.budget -= time.perf_counter() - started
        self._seen[raw] = moment
        return moment

    def _dateparsers(self) -> list:
        if self._parsers is None:
            from dateparser.date import DateDataParser  # imported on first need: it costs a quarter second

            # The feed's language first (cheap), then any language, remembering the one that worked.
            self._parsers = [
                DateDataParser(languages=languages, settings=DATEPARSER_SETTINGS, try_previous_locales=True)
                for languages in ([self.languages] if self.languages else []) + [None]
            ]
        return self._parsers


def _from_struct(parsed) -> datetime | None:
    """feedparser's UTC ``struct_time`` as an aware datetime, or ``None``."""
    if not parsed:
        return None
    try:
        return datetime(*parsed[:6], tzinfo=timezone.utc)
    except (TypeError, ValueError):
        return None
