"""Kinds of parameter value: each turns raw text into the canonical value, or refuses it.

A :class:`Kind` promises four things for one kind of value: :meth:`~Kind.parse` gives the
canonical value (what cache keys and canned queries use) or raises :class:`ValueError`;
:attr:`~Kind.detail` says in words what is accepted (the 400's detail); :attr:`~Kind.schema`
is its OpenAPI schema; :meth:`~Kind.text` writes a canonical value back into a link, so that
parsing it again gives the same value. A kind with a reason of its own for a refusal raises
:class:`Refused` with that reason.

Relies on :mod:`qsite.db.model` for the stored form of times and item ids, and on
:mod:`qsite.service.api.cursors` for cursors. What must not change: canonical values are
what cached answers are keyed by, so a new spelling of a value may be accepted, but the
canonical value of one already accepted must stay the same. The search language of ``q``
is its own module, :mod:`qsite.service.api.search_language`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from urllib.parse import unquote

from qsite.db.model import ITEM_ID_DIGITS, format_time, is_stored_time

from qsite.service.api.cursors import ITEM_ID, Position, decode_cursor, encode_cursor

#: ASCII digits only (``\d`` alone takes any script's), the whole value (``$`` alone allows a line end after it).
_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII
)


class Refused(ValueError):
    """A value a kind refuses for a reason of its own: ``detail`` is the 400's, not the kind's general one."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail



class Kind:
    """A kind of parameter value. ``detail`` says what is accepted; ``schema`` is its OpenAPI schema."""

    detail: str
    schema: dict

    def parse(self, text: str):
        raise NotImplementedError

    def text(self, value) -> str:
        """``value`` (canonical) as it is written in a link."""
        return str(value)

    def check(self, value) -> str | None:
        """For a path parameter, after routing: ``None`` when ``value`` is fine, else the 400's detail."""
        return None


#: What a JSON Schema (ECMA-262) pattern must escape; no other character may be (``\-`` is an error in unicode mode).
_PATTERN_SYNTAX = frozenset("^$\\.*+?()[]{}|/")


def any_case_pattern(values: tuple[str, ...]) -> str:
    """A pattern matching exactly ``values`` in any letter case: ``[Ss][Cc]...``, JSON Schema having no ``(?i)``."""

    def letters(value: str) -> str:
        return "".join(
            f"[{char.upper()}{char.lower()}]" if char.upper() != char.lower() else ("\\" + char if char in _PATTERN_SYNTAX else char)
            for char in value
        )

    return "^(?:" + "|".join(letters(value) for value in values) + ")$"


class OneOf(Kind):
    """One of ``values``, matched ignoring letter case; the canonical value is as listed.

    :param component: the name of its enum in the OpenAPI document's schemas, defined once there
        (:mod:`qsite.service.describe.schemas` defines it from :attr:`enum`) and referred to wherever the
        value appears, so generated clients get one type for it.
    :param hints: values other APIs take here, each with what to say of it after :attr:`detail`
        (matched ignoring letter case): a client written for another API learns why, not only what.

    Any letter case is accepted rather than redirected or refused: a hand-typed ``?tag=science``
    keeps working without a round trip, and the canonical value keys the response cache, so every
    spelling shares one cached answer. The schema says so exactly: the enum (what answers carry and
    generated clients offer) or the same words in any letter case.
    """

    def __init__(self, values: tuple[str, ...], component: str, hints: dict[str, str] | None = None):
        self.values = {value.casefold(): value for value in values}
        self.component = component
        self.detail = "must be one of " + ", ".join(values) + " (any letter case)"
        self.hints = {value.casefold(): f"{self.detail}; {hint}" for value, hint in (hints or {}).items()}
        self.enum = {"type": "string", "enum": list(values)}
        self.schema = {
            "anyOf": [{"$ref": f"#/components/schemas/{component}"}, {"type": "string", "pattern": any_case_pattern(values)}]
        }

    def parse(self, text: str) -> str:
        try:
            return self.values[text.casefold()]
        except KeyError:
            hint = self.hints.get(text.casefold())
            raise (ValueError(text) if hint is None else Refused(hint)) from None


class Integer(Kind):
    """A decimal integer from ``minimum`` to ``maximum``."""

    def __init__(self, minimum: int, maximum: int):
        self.minimum, self.maximum = minimum, maximum
        self.detail = f"must be an integer from {minimum} to {maximum}"
        self.schema = {"type": "integer", "minimum": minimum, "maximum": maximum}

    def parse(self, text: str) -> int:
        if not (text.isascii() and text.isdigit() and len(text) <= 6):
            raise ValueError(text)
        number = int(text)
        if not self.minimum <= number <= self.maximum:
            raise ValueError(text)
        return number


#: The last second a stored time can hold: rounding up stops there (there is no next second to count to).
_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)


def _unspaced(value: str) -> str:
    """``value`` with the ``+`` of its offset back where it arrived unencoded, as a space."""
    return re.sub(r" (\d{2}:\d{2})$", r"+\1", value)


def parse_since(value: str, round_up: bool = False) -> str | None:
    """An RFC 3339 time as the stored form (UTC, whole seconds, ``Z``), or None.

    Fractions are dropped: stored times are whole seconds, so "after 08:00:00.5"
    and "after 08:00:00" select the same items. With ``round_up`` a fraction
    counts the time up to the next second instead, for an exclusive upper end:
    "before 08:00:00.5" holds an item of 08:00:00, so it is "before 08:00:01".
    A ``+`` that arrived unencoded (and so as a space) before the offset is
    taken as the ``+`` it was.
    """
    if is_stored_time(value):  # already canonical, as next links and most clients write it
        return value
    match = _RFC3339.fullmatch(_unspaced(value))
    if not match:
        return None
    date, time_of_day, fraction, zulu, sign, hours, minutes = match.groups()
    offset = "+00:00" if zulu else f"{sign}{hours}:{minutes}"
    try:
        moment = datetime.fromisoformat(f"{date}T{time_of_day}{offset}").astimezone(timezone.utc)
    except (ValueError, OverflowError):  # no such date, or one that leaves year 1..9999 in UTC
        return None
    if round_up and fraction and fraction.strip(".0") and moment < _LAST_SECOND:
        moment += timedelta(seconds=1)
    return format_time(moment)


def exact_time(value: str) -> tuple[str, str] | None:
    """The instant an RFC 3339 time names, to its last digit, as a pair that sorts as the instants do.

    Its whole second in the stored form (:func:`parse_since`) and the nine digits of its
    fraction: what the stored forms of two times cannot tell apart (``until`` counts a
    fraction up, ``since`` drops it), this does. None when it is not such a time.
    """
    second = parse_since(value)
    if second is None:
        return None
    fraction = "" if second == value else _RFC3339.fullmatch(_unspaced(value)).group(3) or ""
    return second, fraction[1:].ljust(9, "0")


#: The start of the 400's detail for a date-time parameter: :attr:`DateTime.detail`, or how to
#: write a near miss of one (:func:`_near_miss`).
ZONE_NEEDED = "must be an RFC 3339 date-time with a time zone"

#: What people write for a time that RFC 3339 does not take as one: a date alone (``2025-03-01``),
#: or a date and time with no zone (``2025-03-01T08:00:00``, a space for the ``T`` too).
_ZONELESS = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?))?", re.ASCII)


def _near_miss(text: str) -> Refused | None:
    """The 400's detail for a time that lacks only its time of day or its zone: how to write it.

    Not read as UTC midnight or as UTC: a date's day begins at another instant in each zone, and a
    client in one gets items of the day before or after. The 400 writes out the UTC reading for
    the client to send; its date and time are the text's own digits (never more than 29 characters).
    """
    match = _ZONELESS.fullmatch(text)
    if match is None:
        return None
    date, time_of_day = match.groups()
    if time_of_day is not None and len(time_of_day) == 5:  # hours and minutes
        time_of_day += ":00"
    in_utc = f"{date}T{time_of_day or '00:00:00'}Z"
    if parse_since(in_utc) is None:  # no such date or time (2025-13-01): nothing to suggest
        return None
    if time_of_day is None:
        return Refused(f"{ZONE_NEEDED}; a date alone is not one: its start in UTC is {in_utc}")
    return Refused(f"{ZONE_NEEDED}; add one: in UTC, {in_utc}")


class DateTime(Kind):
    """An RFC 3339 date-time with a time zone; canonical: the stored form (:func:`parse_since`).

    :param round_up: a fraction of a second counts up, not down (an exclusive upper end, ``until``).
    """

    detail = f"{ZONE_NEEDED}, such as 2026-11-20T08:00:00Z"
    schema = {"type": "string", "format": "date-time"}

    def __init__(self, round_up: bool = False):
        self.round_up = round_up

    def parse(self, text: str) -> str:
        value = parse_since(text, self.round_up)
        if value is None:
            raise _near_miss(text) or ValueError(text)
        return value


class Cursor(Kind):
    """A keyset position as given in ``next``; canonical: :func:`decode_cursor`'s :class:`~qsite.service.api.cursors.Position`."""

    detail = "must be a cursor exactly as given in next"
    schema = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}

    def parse(self, text: str) -> Position:
        value = decode_cursor(text)
        if value is None:
            raise ValueError(text)
        return value

    def text(self, value: Position) -> str:
        return encode_cursor(*value)


class Name(Kind):
    """A name given exactly (letter case, spaces and commas are part of it), 1 to ``max_length`` characters."""

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.detail = f"must be a name of 1 to {max_length} characters"
        self.schema = {"type": "string", "minLength": 1, "maxLength": max_length}

    def parse(self, text: str) -> str:
        if not 1 <= len(text) <= self.max_length:
            raise ValueError(text)
        return text


class Segment(Kind):
    """One non-empty path segment, percent-decoded as UTF-8."""

    detail = "must be one non-empty path segment"
    schema = {"type": "string", "minLength": 1}
    #: What percent-decoding does with bytes that are not UTF-8 (``unquote``'s ``errors``):
    #: ``strict`` raises UnicodeDecodeError, a ValueError, so the path routes nowhere (a 404).
    undecodable = "strict"

    def parse(self, text: str) -> str:
        if not text or "/" in text:
            raise ValueError(text)
        return unquote(text, errors=self.undecodable)


class ItemId(Segment):
    """A news item's id in a path: any one segment routes, :meth:`check` says whether it is an id.

    Routing takes any segment, so a malformed id is a 400 naming ``id`` (the
    client wrote something that cannot be an id) while a well-formed id that no
    item has is a 404: the two mistakes get two answers.
    """

    detail = f"must be a news item id: {ITEM_ID_DIGITS} lower-case hex digits, as in the id of an item"
    # bytes that are not UTF-8 are a malformed id too: they route, and check() refuses them
    undecodable = "replace"
    schema = {"type": "string", "pattern": f"^[0-9a-f]{{{ITEM_ID_DIGITS}}}$"}

    def check(self, value: str) -> str | None:
        """``None`` when ``value`` is an id as the pipeline makes them, else what is wrong."""
        return None if ITEM_ID.fullmatch(value) else self.detail
