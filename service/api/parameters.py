"""Query parameters: the kinds of value they take, and checking a request's against an endpoint.

A :class:`Param` is one documented query (or path) parameter; its *kind*
(:class:`OneOf`, :class:`Integer`, :class:`DateTime`, :class:`Cursor`,
:class:`Words`, :class:`Segment`) turns the raw text into the canonical value
the cache keys and canned queries use, says in words what it accepts, gives
its OpenAPI schema and writes a value back into a link. Which endpoint takes
which parameter is the table in :mod:`service.api.endpoints`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import NamedTuple
from urllib.parse import unquote, unquote_to_bytes

from db.model import ITEM_ID_DIGITS, format_time, is_stored_time

from service.api.cursors import ITEM_ID, Position, decode_cursor, encode_cursor
from service.http.problems import problem_response

#: A name echoed back in an error is cut to this many characters (plus an ellipsis),
#: and a 400 lists at most ``MAX_ERRORS`` parameters, so a hostile query string
#: cannot make the error body larger than a few KB.
ECHO_MAX = 64
MAX_ERRORS = 20

#: ASCII digits only (``\d`` alone takes any script's), the whole value (``$`` alone allows a line end after it).
_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII
)
#: What a search matches on: words, as the FTS tokenizer sees them.
#: A word as the full-text index's tokenizer (unicode61) reads one: letters and digits. Not ``\w``:
#: an underscore separates words there, so ``literal_error`` would be a phrase, which a
#: ``detail=column`` index cannot search.
WORD = re.compile(r"[^\W_]+")
#: A term of a search as written: a ``-`` that excludes it (only at the start or after a space, so
#: ``Wi-Fi`` keeps its hyphen as a separator), then a run in double quotes or a run of anything but
#: spaces and quotes. A quote left without its pair matches nothing here, and is passed over.
_TERM = re.compile(r'(?:(?<!\S)(-))?(?:"([^"]*)"|([^\s"]+))')


class Refused(ValueError):
    """A value a kind refuses for a reason of its own: ``detail`` is the 400's, not the kind's general one."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


def echo(text: str) -> str:
    """``text`` as it may be quoted back to the client: at most ``ECHO_MAX`` characters and "…"."""
    return text if len(text) <= ECHO_MAX else text[:ECHO_MAX] + "\u2026"


# -- kinds of value: parse raises ValueError on a bad value ------------------------


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
        (:mod:`service.describe.schemas` defines it from :attr:`enum`) and referred to wherever the
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


class DateTime(Kind):
    """An RFC 3339 date-time with a time zone; canonical: the stored form (:func:`parse_since`).

    :param round_up: a fraction of a second counts up, not down (an exclusive upper end, ``until``).
    """

    detail = "must be an RFC 3339 date-time with a time zone, such as 2026-11-20T08:00:00Z"
    schema = {"type": "string", "format": "date-time"}

    def __init__(self, round_up: bool = False):
        self.round_up = round_up

    def parse(self, text: str) -> str:
        value = parse_since(text, self.round_up)
        if value is None:
            raise ValueError(text)
        return value


class Cursor(Kind):
    """A keyset position as given in ``next``; canonical: :func:`decode_cursor`'s :class:`~service.api.cursors.Position`."""

    detail = "must be a cursor exactly as given in next"
    schema = {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}

    def parse(self, text: str) -> Position:
        value = decode_cursor(text)
        if value is None:
            raise ValueError(text)
        return value

    def text(self, value: Position) -> str:
        return encode_cursor(*value)


class Search(NamedTuple):
    """A search as :class:`Words` reads it: every group must match, and no excluded term.

    A term is a tuple of words, all of which must occur (a word, or words written as one:
    ``Wi-Fi``, ``"quantum computing"``). A group is its terms joined by ``OR``, any one of which
    must match; a group of one term is one word (a term of several words alone is as many
    groups: all its words must occur either way).
    """

    groups: tuple[tuple[tuple[str, ...], ...], ...]
    excluded: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        """The canonical text: the groups, then the excluded terms; a term of several words in an
        ``OR`` or excluded is written with hyphens (``-wi-fi``), which reads back as one term.

        No words at all is ``""``, two quotes: an empty text would read back as no search, and a
        feed's self link of ``q=!!!`` was the unfiltered feed.
        """
        if not self.groups:
            return '""'
        groups = [" OR ".join("-".join(term) for term in group) for group in self.groups]
        return " ".join(groups + ["-" + "-".join(term) for term in self.excluded])


#: The 400s of a search whose operators leave it nothing to match.
NOTHING_INCLUDED = "needs at least one word to include: a word after - is only excluded"
MISPLACED_OR = "OR (in upper case) needs a word to include on each side; write or to search for the word"


def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``, each lowercased where that keeps it one word.

    The index's tokenizer folds letter case one letter to one letter, as lower() does, never as
    casefold() does (``ß`` to ``ss``: ``Straße`` could not be found), and lower() can make a
    combining mark (``İ`` is ``i`` and U+0307), which the tokenizer takes as a separator.
    """
    return tuple(lower if WORD.fullmatch(lower := word.lower()) else word for word in WORD.findall(text))


@functools.lru_cache(maxsize=1024)
def parse_search(text: str) -> Search:
    """The :class:`Search` ``text`` asks for; :class:`Refused` when its operators leave it nothing to match.

    Kept for the last 1,024 texts: a request reads its ``q`` here once as given and once more as the
    FTS5 query of its canonical text (:func:`service.api.bodies.fts_query`), most often the same text.

    Terms are split at spaces (and quoted runs), a term's words as the index splits them; a
    term with no words (punctuation only) is passed over. A term that starts with ``-`` is
    excluded; ``OR``, upper case and alone, joins the terms on each side into a group, which
    binds tighter than the implicit AND between groups (as web search engines read it:
    ``quantum funding OR investment -series`` is quantum AND (funding OR investment) NOT series).
    Every other word is a word, lowercased: ``or``, ``and``, ``not``, ``NEAR`` and ``AND`` too.
    """
    groups: list[list[tuple[str, ...]] | None] = []
    excluded: list[tuple[str, ...]] = []
    # joining: an OR was read since the last term, and the next term to include joins the last group
    joining = False
    for minus, quoted, bare in _TERM.findall(text):
        if bare == "OR" and not minus:
            if joining or not groups or groups[-1] is None:
                raise Refused(MISPLACED_OR)
            joining = True
            continue
        words = _words(quoted or bare)
        if not words:
            continue
        if minus:
            if joining:
                raise Refused(MISPLACED_OR)
            excluded.append(words)
            groups.append(None)  # an excluded term between two others: neither is an OR's neighbour
        elif joining:
            groups[-1].append(words)
            joining = False
        else:
            groups.append([words])
    if joining:
        raise Refused(MISPLACED_OR)
    included = [group for group in groups if group is not None]
    if excluded and not included:
        raise Refused(NOTHING_INCLUDED)
    flat: list[tuple[tuple[str, ...], ...]] = []
    for group in included:
        if len(group) > 1:
            flat.append(tuple(group))
        else:  # a term of several words alone is as many groups of one word: the same search, one text
            flat.extend(((word,),) for word in group[0])
    return Search(tuple(flat), tuple(excluded))


class Words(Kind):
    """A full-text search of at most ``max_length`` characters; canonical: :meth:`Search.text` (:func:`parse_search`).

    Blank is no filter (``None``); only punctuation is no words, so nothing matches (``'""'``).
    The canonical text is never longer than the text it was read from (``'""'`` aside), so
    links keep within ``max_length``.
    """

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.detail = f"must be at most {max_length} characters"
        self.schema = {"type": "string", "maxLength": max_length}

    def parse(self, text: str) -> str | None:
        if len(text) > self.max_length:
            raise ValueError(text)
        if not text.strip():
            return None
        return parse_search(text).text()


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


@dataclass(frozen=True)
class Param:
    """One parameter: its name, the kind of value, its documentation and the endpoints that take it.

    :param on: the names of the endpoints (:data:`service.api.endpoints.ENDPOINTS`) that take it.
    :param default: the canonical value when it is not given (also documented).
    :param example: a value shown in the OpenAPI document, if any.
    :param where: ``"query"``, or ``"path"`` for the ``{name}`` in an endpoint's path.
    :param component: its key under ``components/parameters`` in the OpenAPI document, by
        default its name; two parameters of one name (on different endpoints) need two.
    :param repeat: how many times it may be given (its values form a set); 0: once.
    :param excludes: the names of parameters it cannot be given with (a 400 names it).
    :param before: the name of a date-time parameter this one (a date-time too) must be before
        when both are given, else a 400 names it: both ends exclusive, so at or after it no item
        is in the range, and a client that swapped them learns so instead of getting nothing.
    :param peers: what other news APIs call it (NewsAPI, GNews, the Guardian, Mediastack,
        NewsData): an endpoint that takes it answers a name of these with ``hint``.
    :param hint: what the 400 of an unknown parameter named in ``peers`` says after
        "unknown parameter; ". Left out: "qsite calls this" and its name.
    """

    name: str
    kind: Kind
    on: tuple[str, ...]
    description: str = ""
    default: object = None
    example: str | list[str] | None = None
    where: str = "query"
    component: str = ""
    repeat: int = 0
    excludes: tuple[str, ...] = ()
    before: str = ""
    peers: tuple[str, ...] = ()
    hint: str = ""

    @property
    def ref(self) -> str:
        return self.component or self.name

    @property
    def schema(self) -> dict:
        if self.repeat:
            return {"type": "array", "items": self.kind.schema, "minItems": 1, "maxItems": self.repeat}
        return self.kind.schema if self.default is None else {**self.kind.schema, "default": self.default}

    def link_pairs(self, value) -> list[tuple[str, str]]:
        """``(name, text)`` pairs that write its canonical ``value`` into a link (one per value if repeated)."""
        return [(self.name, self.kind.text(one)) for one in (value if self.repeat else (value,))]


# -- a request's parameters --------------------------------------------------------


def split_query(query: bytes) -> list[tuple[bytes, bytes]]:
    """``(name, value)`` byte pairs of a query string, percent-decoded, ``+`` as space.

    Bytes, not text: a value that is not UTF-8 becomes a 400 naming its
    parameter rather than an exception.
    """
    pairs = []
    for part in query.split(b"&"):
        if part:
            name, _, value = part.partition(b"=")
            if b"%" in part or b"+" in part:  # else there is nothing to decode
                name, value = unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" "))
            pairs.append((name, value))
    return pairs


#: What other news APIs call their key (NewsAPI, GNews, Mediastack, NewsData, the Guardian), and
#: what every endpoint says of one: qsite has none to give.
KEY_NAMES = ("apiKey", "apikey", "api_key", "access_key", "token")
KEY_HINT = "qsite needs no key: leave it out"


#: What other news APIs page by (a page number, an offset), and what an endpoint with a cursor says of them.
CURSOR_PEERS = ("page", "offset")
CURSOR_HINT = "qsite pages by cursor: follow the next link or the Link header"


def peer_key(name: str) -> str:
    """``name`` as peer names are compared: letter case, ``-`` and ``_`` aside (``page-size`` is ``pageSize``)."""
    return name.casefold().replace("-", "").replace("_", "")


class _Table(NamedTuple):
    """What :func:`parse_params` needs of one endpoint's parameters, worked out once."""

    params: tuple[Param, ...]
    by_name: dict[str, Param]
    #: Each parameter's canonical value when it is not given, in table order.
    defaults: dict[str, object]
    #: Where each name stands in the table: errors are listed in that order.
    order: dict[str, int]
    #: The 400's detail for a name the endpoint does not take.
    unknown: str
    #: The parameters that cannot be given with some others.
    excluding: tuple[Param, ...]
    #: The parameters that must be before another.
    ordered: tuple[Param, ...]
    #: The 400's detail for the names other APIs give parameters (by :func:`peer_key`).
    hints: dict[str, str]


#: ``id(params) -> _Table``; each table holds its tuple, so the id cannot be another's while it is kept.
_TABLES: dict[int, _Table] = {}


def _table(params: tuple[Param, ...]) -> _Table:
    table = _TABLES.get(id(params))
    if table is not None and table.params is params:
        return table
    by_name = {param.name: param for param in params}
    takes = ", ".join(by_name)
    hints = {peer_key(name): KEY_HINT for name in KEY_NAMES}
    for param in params:
        hints.update(dict.fromkeys(map(peer_key, param.peers), param.hint or f"qsite calls this {param.name}"))
    table = _Table(
        params,
        by_name,
        {param.name: param.default for param in params},
        {name: i for i, name in enumerate(by_name)},
        f"unknown parameter; this endpoint takes {takes}" if takes else "unknown parameter; this endpoint takes none",
        tuple(param for param in params if param.excludes),
        tuple(param for param in params if param.before),
        {key: "unknown parameter; " + hint for key, hint in hints.items()},
    )
    if len(_TABLES) < 1024:  # the endpoint table's tuples, and a test's few
        _TABLES[id(params)] = table
    return table


def parse_params(params: tuple[Param, ...], query: bytes) -> tuple[dict, list[dict]]:
    """Every one of ``params``, canonical (its default when absent), and one error per bad one.

    Unknown and repeated parameters are errors: a typo must never silently
    return unfiltered data. A parameter that may be repeated (:attr:`Param.repeat`)
    is the exception: its canonical value is the sorted tuple of its distinct
    values. Errors come in the order of ``params``, unknown names last.
    """
    table = _table(params)
    by_name = table.by_name
    errors: list[dict] = []
    seen: dict[str, int] = {}
    raw_values: dict[str, list[str]] = {}
    for raw_name, raw_value in split_query(query):
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            errors.append({"parameter": echo(raw_name.decode("utf-8", "replace")), "detail": "unknown parameter"})
            continue
        seen[name] = seen.get(name, 0) + 1
        param = by_name.get(name)
        allowed = param.repeat if param is not None and param.repeat else 1
        if seen[name] == allowed + 1:
            detail = "given more than once" if allowed == 1 else f"given more than {allowed} times"
            errors.append({"parameter": echo(name), "detail": detail})
        if seen[name] > allowed:
            continue
        if param is None:
            errors.append({"parameter": echo(name), "detail": table.hints.get(peer_key(name), table.unknown)})
            continue
        try:
            raw_values.setdefault(name, []).append(raw_value.decode("utf-8"))
        except UnicodeDecodeError:
            errors.append({"parameter": name, "detail": "must be UTF-8 text"})
    values = dict(table.defaults)
    # Only the parameters given; in table order, as their errors are listed.
    for name in sorted(raw_values, key=table.order.__getitem__) if len(raw_values) > 1 else raw_values:
        param, texts = by_name[name], raw_values[name]
        if not texts or seen[name] > (param.repeat or 1):  # none was UTF-8, or given too often
            continue
        try:
            parsed = [param.kind.parse(text) for text in texts]
        except Refused as refused:
            errors.append({"parameter": name, "detail": refused.detail})
            continue
        except ValueError:
            errors.append({"parameter": name, "detail": param.kind.detail})
            continue
        values[name] = tuple(sorted(set(parsed))) if param.repeat else parsed[0]
    for param in table.excluding:
        # Given, and not as its default: a sync walk given sort=published_at would silently ignore it,
        # while clients generated from the OpenAPI document send every default (sort=-published_at).
        clashing = [name for name in param.excludes
                    if values[param.name] is not None and name in raw_values and values[name] not in (None, table.defaults[name])]
        if clashing:
            errors.append({"parameter": param.name, "detail": "cannot be combined with " + ", ".join(clashing)})
    for param in table.ordered:
        # Compared as written, to the last digit of a fraction: the stored forms round since down and until up.
        if values[param.name] is not None and values.get(param.before) is not None:
            if exact_time(raw_values[param.name][0]) >= exact_time(raw_values[param.before][0]):
                errors.append({"parameter": param.name, "detail": f"must be before {param.before}"})
    if len(errors) > 1:
        order = table.order
        errors.sort(key=lambda error: order.get(error["parameter"], len(order)))
    return values, errors


def invalid_parameters(errors: list[dict]) -> tuple[int, list, bytes]:
    """The 400 naming the bad parameters: the first ``MAX_ERRORS`` of them, and how many more."""
    shown = errors[:MAX_ERRORS]
    names = ", ".join(dict.fromkeys(error["parameter"] for error in shown))
    detail = f"invalid query parameters: {names}"
    if len(errors) > len(shown):
        detail += f" and {len(errors) - len(shown)} more not listed"
    return problem_response("invalid-parameters", detail, shown)
