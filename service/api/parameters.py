"""Query parameters: what one is, and checking a request's query string against an endpoint's.

Promises: :func:`parse_params` gives every parameter of an endpoint its canonical value
(its default when absent) and one error per bad parameter, never raising on any query
string; unknown and repeated parameters are errors, so a typo never silently returns
unfiltered data; :func:`invalid_parameters` turns those errors into the 400, whose size is
bounded (:data:`ECHO_MAX`, :data:`MAX_ERRORS`) whatever the query string holds.

A :class:`Param` is one documented query (or path) parameter; its kind of value is a
:class:`~qsite.service.api.kinds.Kind` (:mod:`qsite.service.api.kinds`, and ``q``'s in
:mod:`qsite.service.api.search_language`). Which endpoint takes which parameter is the table in
:mod:`qsite.service.api.parameter_table`. What must not change: errors come in the order of the
endpoint's parameters, unknown names last, so a 400 reads the same for the same query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote_to_bytes

from qsite.service.api.kinds import Kind, Refused, exact_time
from qsite.service.http.problems import problem_response

#: A name echoed back in an error is cut to this many characters (plus an ellipsis),
#: and a 400 lists at most ``MAX_ERRORS`` parameters, so a hostile query string
#: cannot make the error body larger than a few KB.
ECHO_MAX = 64
MAX_ERRORS = 20


def echo(text: str) -> str:
    """``text`` as it may be quoted back to the client: at most ``ECHO_MAX`` characters and "…"."""
    return text if len(text) <= ECHO_MAX else text[:ECHO_MAX] + "\u2026"


@dataclass(frozen=True)
class Param:
    """One parameter: its name, the kind of value, its documentation and the endpoints that take it.

    :param on: the names of the endpoints (:data:`qsite.service.api.endpoints.ENDPOINTS`) that take it.
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
