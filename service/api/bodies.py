"""The JSON body of each data endpoint, built from the rows of its canned queries.

One function per endpoint, named in its row of :data:`service.api.endpoints.ENDPOINTS`.
Each gets a :class:`Build`: the canonical parameter values asked for and one
read snapshot (connection, canned SQL and the ``data_versions`` it saw), and
returns ``(payload, extra_headers)``. Pure and synchronous; the SQL itself is
in ``metadata.yml``.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from dataclasses import dataclass

import orjson

from db.urls import public_location

from service.api.cursors import Position, count_seal, keyset
from service.api.data_versions import Versions, updated_at
from service.api.parameters import WORD, echo, parse_search
from service.http.problems import API_PREFIX


#: A search (``q``) of the news counts its matches up to here: past it, ``count``
#: is this and ``count_exact`` false, as search engines say "1,000+"; so do a
#: sync walk (``updated_since``) and the removed items, whose ranges may hold every item. Counting
#: every match of a word most items hold read hundreds of thousands of index
#: entries (26 ms at a million items); counting to 10,000 took 1.2 ms, more
#: than the rest of the search, and to 1,000 0.15 ms.
SEARCH_COUNT_MAX = 1_000


class NoData(Exception):
    """The dataset behind the response has never been ingested (503)."""


class Missing(Exception):
    """The requested item does not exist (404)."""


class Invalid(Exception):
    """A parameter is well-formed but does not go with the others, or with the data (400 naming ``parameter``).

    :param details: what is wrong, one error of the 400 each (a ``source`` of several unknown names).
    """

    def __init__(self, parameter: str, *details: str):
        super().__init__(details[0])
        self.parameter, self.details = parameter, details


@dataclass(frozen=True)
class Build:
    """One body to build: what was asked, and the snapshot to build it from.

    :param endpoint: its :class:`~service.api.endpoints.Endpoint` (canned queries, datasets, next links).
    :param values: the canonical value of each of its query parameters.
    :param arg: the value of its path parameter, if it has one.
    :param cursor_key: the key counts are sealed with in ``next`` links
        (:mod:`service.api.cursors`); without one, none is carried and every page counts.
    """

    endpoint: object
    values: dict
    arg: str | None
    conn: sqlite3.Connection
    sql: dict[str, str]
    versions: Versions
    cursor_key: bytes = b""

    def rows(self, query: str, params: dict) -> list[dict]:
        """The rows of one of the endpoint's canned queries, as dicts, with bound ``params``."""
        if query not in self.endpoint.queries:
            raise KeyError(f"{self.endpoint.name} does not list the canned query {query!r}")
        cursor = self.conn.execute(self.sql[query], params)
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, row)) for row in cursor.fetchall()]

    def count(self, query: str, params: dict) -> int:
        """What the count query ``query`` answers with ``params``: the count the cursor carries when
        its seal says it was read with the same query and parameters from the same data, else read now."""
        cursor = self.values.get("cursor")
        if cursor is not None and cursor.count is not None and self.cursor_key:
            if cursor.seal == self._seal(query, params, cursor.count):
                return cursor.count
        return self.rows(query, params)[0]["count"]

    def after(self, at: str, item_id: str, oldest_first: bool, query: str, params: dict, count: int) -> Position:
        """The cursor's value for the page after the item ``(at, item_id)``, with the listing's ``count``
        (what ``query`` answered with ``params``) sealed in when there is a key."""
        if not self.cursor_key:
            return Position(at, item_id, oldest_first)
        return Position(at, item_id, oldest_first, count, self._seal(query, params, count))

    def _seal(self, query: str, params: dict, count: int) -> str:
        versions = [self.versions.get(dataset) for dataset in self.endpoint.datasets]
        return count_seal(self.cursor_key, query, params, versions, count)

    @property
    def updated_at(self) -> str:
        return updated_at(self.versions, self.endpoint.datasets)

    def listing(self, results: list, changed_at: str | None = None) -> dict:
        """A whole collection: how many, when it last changed, and every item.

        :param changed_at: a later change of the body that no ``data_versions`` row records
            (a feed's last good fetch, on /sources), in the stored form; it is then ``updated_at``.
        """
        return {"count": len(results), "updated_at": max(self.updated_at, changed_at or ""), "results": results}


@functools.lru_cache(maxsize=1024)
def fts_query(q: str | None) -> str:
    """A search (glossary, news), canonical as :class:`~service.api.parameters.Words` makes it, as an FTS5 query.

    Every word is quoted, so it is a word whatever it spells (``NEAR``, ``AND``, a column's
    name), and the only operators are those written here: a group's terms joined by ``OR``,
    the groups by ``AND``, and the excluded terms after one ``NOT`` (FTS5's ``NOT`` is binary:
    ``(included) NOT (excluded OR ...)``). A search of words alone is written as it always was
    (``"a" "b"``), so its SQL, plan and sealed counts are unchanged. A search with no words at
    all becomes an empty phrase that matches nothing, never a syntax error. ``None`` is no
    search (the canned query's empty ``:q``).
    """
    # Not sqlite-utils' Database.quote_fts: it quotes raw text's space-separated bits, and a
    # bit such as ``foo_bar`` is then a phrase against the index (tests/test_news_search.py);
    # Words has already split ``q`` into the index's own words, so quoting each is all that is left.
    if q is None:
        return ""
    search = parse_search(q)  # canonical already: it cannot be refused again
    if not search.groups:
        return '""'
    if not search.excluded and all(len(group) == 1 for group in search.groups):
        return " ".join(f'"{word}"' for ((word,),) in search.groups)

    def term(words: tuple[str, ...]) -> str:  # a phrase of several words is what detail=column refuses
        return f'"{words[0]}"' if len(words) == 1 else "(" + " AND ".join(f'"{word}"' for word in words) + ")"

    included = " AND ".join(term(terms[0]) if len(terms) == 1 else "(" + " OR ".join(map(term, terms)) + ")"
                            for terms in search.groups)
    if not search.excluded:
        return included
    return f"({included}) NOT ({' OR '.join(map(term, search.excluded))})"


def courses(build: Build):
    courses = build.rows("courses", {})
    sections: dict[str, list] = {}
    for section in build.rows("sections", {"course": ""}):
        sections.setdefault(section.pop("course_id"), []).append(section)
    results = [{**course, "sections": sections.get(course["id"], [])} for course in courses]
    return build.listing(results), ()


def _glossary_entries(build: Build, entry_id: str, q: str | None) -> list[dict]:
    return [
        {
            "id": row["id"],
            "term": row["term"],
            "definition": row["definition"],
            "lesson": {"title": row["lesson_title"], "url": row["lesson_url"]},
        }
        for row in build.rows("glossary", {"id": entry_id, "q": fts_query(q)})
    ]


def glossary(build: Build):
    return build.listing(_glossary_entries(build, "", build.values["q"])), ()


def glossary_entry(build: Build):
    found = _glossary_entries(build, build.arg, None)
    if not found:
        raise Missing(f"no glossary entry with id {echo(build.arg)!r}")
    return found[0], ()


def news_filters(values: dict) -> dict:
    """The canned news queries' filter parameters; ``''`` is no filter.

    ``sources`` is a JSON array of names (the query reads it with ``json_each``),
    so a name with a comma in it stays one name.
    """
    return {
        "tag": values["tag"] or "",
        "since": values["since"] or "",
        "until": values["until"] or "",
        "sources": sources_param(values),
        "q": fts_query(values["q"]),
    }


def sources_param(values: dict) -> str:
    """The names ``source`` asks for as the canned queries take them: a JSON array, ``''`` for none."""
    return json.dumps(list(values["source"]), ensure_ascii=False) if values["source"] else ""


#: What a 400 on an unknown ``source`` points to: where every publisher's exact name is.
SOURCES_LIST = f"{API_PREFIX}/sources"
#: At most this many names are suggested for one unknown name; more is no longer a suggestion.
SUGGESTIONS_MAX = 3
#: Only the first this many unknown names get suggestions: 20 names each with three suggestions
#: of 64 characters made a 400 of 6 KB, past the 4 KB every error body keeps within.
SUGGESTED_NAMES_MAX = 3


def _name_words(name: str) -> tuple[str, ...]:
    """A publisher's name as words, letter case aside: ``lab-notes`` and ``Lab Notes`` are both ``lab notes``."""
    return tuple(WORD.findall(name.casefold()))  # words as a search reads them: letters and digits


def _spaced(words: tuple[str, ...]) -> str:
    """``words`` written so that one run of words stands in another's text only as whole words: `` lab notes ``."""
    return " " + " ".join(words) + " "


class Publishers:
    """Every publisher's name, as a ``source`` no publisher has is compared with them: read once per 400.

    :param names: the publishers' names, exact.
    """

    def __init__(self, names: list[str]):
        self.known = set(names)
        #: Each name, in the forms :meth:`meant` compares: letter case folded, its words in order, its words sorted.
        self.compared = [
            (name, name.casefold(), _spaced(words), sorted(words)) for name in names for words in [_name_words(name)]
        ]
        #: The most pieces between commas one name has: a longer run of pieces is no name.
        self.pieces = 1 + max((name.count(",") for name in names), default=0)

    def meant(self, name: str) -> list[str]:
        """The publishers ``name`` probably meant, at most :data:`SUGGESTIONS_MAX` of them.

        Closest first, the first rule that finds any deciding: the same name in another letter case;
        the same words with other separators or in another order (``quantum-lab-notes``, a slug as
        other APIs' source ids are; ``Notes Quantum Lab``); the name's words side by side within a
        publisher's, or a publisher's within the name's (``lab-notes``; ``Quantum Lab Notes RSS``).
        No edit distance: a 200-character name against every publisher would cost the event loop
        milliseconds, and these rules find the misses the 400 is for (letter case, slugs, part of a name).
        """
        words = _name_words(name)
        folded, spaced, ordered = name.casefold(), _spaced(words), sorted(words)
        for rule in (
            lambda their_folded, _, __: their_folded == folded,
            lambda _, __, their_ordered: bool(words) and their_ordered == ordered,
            # a run of whole words within the other's (substring search of the spaced forms: C speed)
            lambda _, their_spaced, __: bool(words) and their_spaced.strip() != "" and (spaced in their_spaced or their_spaced in spaced),
        ):
            found = [publisher for publisher, *forms in self.compared if rule(*forms)]
            if found:
                return found if len(found) <= SUGGESTIONS_MAX else []
        return []

    def listed(self, name: str) -> bool:
        """Whether ``name`` is several publishers' names joined by commas (spaces around them aside).

        A name may hold commas itself (``Smith, Jones & Co``), so runs of the pieces between
        commas are tried as names, each no longer than :attr:`pieces`: linear in the pieces.
        """
        pieces = name.split(",")
        # whole[i]: the first i pieces are whole names
        whole = [True] + [False] * len(pieces)
        for end in range(1, len(pieces) + 1):
            whole[end] = any(
                whole[start] and ",".join(pieces[start:end]).strip() in self.known
                for start in range(max(0, end - self.pieces), end)
            )
        return len(pieces) > 1 and whole[-1]

    def unknown(self, name: str, suggest: bool = True) -> str:
        """The 400's detail for ``name``, no publisher's: what was probably meant (when ``suggest``), and where the names are."""
        said = f"no publisher is named {echo(name)!r}"
        if self.listed(name):
            # a comma-separated list, as NewsAPI's sources= takes: names are never split (they may hold commas)
            return f"{said}, though each name between its commas is one; write source= once per publisher"
        guesses = self.meant(name) if suggest else []
        if guesses:
            said += " (did you mean " + " or ".join(repr(echo(guess)) for guess in guesses) + "?)"
        return f"{said}; {SOURCES_LIST} lists them"


def check_sources(build: Build) -> None:
    """:class:`Invalid` on ``source`` when a name asked is no publisher's: one error per such name.

    Called only when an answer with sources came out empty (a count of 0, a feed of no
    items), so an answer with items pays nothing for it, and an empty one one small query
    (``api_source_names``). A name no publisher has matches nothing, now or later (rows of
    ``sources`` are never deleted), so an empty 200 would hide the client's mistake.
    Names stay exact (letter case is part of one): a near miss is only suggested.
    """
    asked = build.values["source"]
    if not asked:
        return
    names = [row["name"] for row in build.rows("source_names", {"sources": sources_param(build.values)})]
    # Compared here, not by the query's asked: SQLite's text ends at a NUL, which Python's does not,
    # and a name it cannot tell apart is no name to call unknown (nor to suggest as itself).
    known = set(names)
    unknown = [name for name in asked if name not in known]
    if unknown:
        publishers = Publishers(names)
        raise Invalid("source", *(publishers.unknown(name, n < SUGGESTED_NAMES_MAX) for n, name in enumerate(unknown)))


def with_count_limit(filters: dict) -> dict:
    """A count query's parameters: its filters and where a count stops (:data:`SEARCH_COUNT_MAX`); what a seal covers."""
    return {**filters, "count_limit": SEARCH_COUNT_MAX + 1}


def served_item(row: dict) -> dict:
    """One ``news`` row as served: its authors, stored as a JSON array, as a list; its change key is not served.

    The row itself, changed in place: each row is read for one body only, and a
    page makes a hundred of them. orjson reads the array: the standard decoder
    was a tenth of an uncached page's Python.
    """
    row["authors"] = orjson.loads(row["authors"] or "[]")
    row.pop("change_key", None)
    return row


def _page(build: Build, query: str, params: dict, position) -> tuple[list[dict], str | None, int, bool]:
    """A page of an oldest-first walk (news changes, removals): its rows, next link, count and whether it is exact.

    ``position`` gives the cursor of a row: the keyset the walk is ordered by.
    """
    limit = build.values["limit"]
    cursor = build.values["cursor"]
    if cursor is not None and (cursor.oldest_first or not cursor.in_change_order):
        # /news wrote it: a position in another listing's order
        raise Invalid("cursor", "was given in next of /api/v1/news; keep each cursor to the listing it came from")
    after, after_id = keyset(cursor)
    page = build.rows(query, {**params, "after": after, "after_id": after_id, "limit": limit + 1})
    count_params = with_count_limit(params)
    count = build.count(query + "_count", count_params)
    link = None
    if len(page) > limit:
        page = page[:limit]
        last = build.after(*position(page[-1]), False, query + "_count", count_params, count)
        link = build.endpoint.next_link(build.values, last)
    return page, link, min(count, SEARCH_COUNT_MAX), count <= SEARCH_COUNT_MAX


def _news_changes(build: Build):
    """/news?updated_since=: a sync walk, oldest change first (``api_news_changes``)."""
    values = build.values
    filters = news_filters(values)
    params = {"updated_since": values["updated_since"], "tag": filters["tag"], "sources": filters["sources"]}
    page, link, count, exact = _page(build, "news_changes", params, lambda row: (row["change_key"], row["id"]))
    if count == 0:
        check_sources(build)
    payload = {
        "count": count,
        "count_exact": exact,
        "tag": values["tag"],
        "limit": values["limit"],
        "next": link,
        "updated_at": build.updated_at,
        "results": [served_item(row) for row in page],
    }
    return payload, ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()


def news_removed(build: Build):
    """/news/removed: what left the view asked, oldest first, so a mirror of that view drops what left it.

    Without ``tag`` or ``source``, the tombstones (``api_news_removed``); with them, the tombstones of
    that view and the items that left it by a change of tag or source (``api_news_removed_filtered``).
    """
    values = build.values
    since = values["since"] or ""
    tag, sources = values["tag"] or "", sources_param(values)
    if tag or sources:
        params = {"since": since, "tag": tag, "sources": sources}
        page, link, count, exact = _page(build, "news_removed_filtered", params, lambda row: (row["change_key"], row["id"]))
        if count == 0:
            check_sources(build)
    else:
        page, link, count, exact = _page(build, "news_removed", {"since": since}, lambda row: (row["change_key"], row["id"]))
    payload = {
        "count": count,
        "count_exact": exact,
        "limit": build.values["limit"],
        "next": link,
        "updated_at": build.updated_at,
        "results": [{"id": row["id"], "removed_at": row["removed_at"]} for row in page],
    }
    return payload, ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()


def news(build: Build):
    values = build.values
    if values["updated_since"] is not None:
        return _news_changes(build)
    limit = values["limit"]
    oldest_first = values["sort"] == "published_at"
    cursor = values["cursor"]
    position, position_id = keyset(cursor)
    if cursor is not None and cursor.oldest_first != oldest_first:
        raise Invalid("cursor", "was given in next of a listing in the other order; keep the sort it came with, or start without a cursor")
    if cursor is not None and cursor.in_change_order:
        raise Invalid("cursor", "was given in next of a walk in change order (updated_since, /news/removed); keep each cursor to the listing it came from")
    filters = news_filters(values)
    count_params = with_count_limit(filters)
    # Each of the two queries is skipped when the other one's answer already says what it would
    # return. A search whose words and filters seldom meet reads both index lists to their end
    # (20 ms at a million items for ``tag=Science&q=raises``, which meet nowhere), and did it twice.
    count = None
    if cursor is not None:
        # A later page: nothing in the whole range means nothing on this page either. Its count is
        # usually the one the first page read, carried in the cursor (Build.count).
        count = build.count("news_count", count_params)
    if count == 0:
        page = []
    elif oldest_first:
        page = build.rows("news_oldest", {**filters, "after": position, "after_id": position_id, "limit": limit + 1})
    else:
        page = build.rows("news", {**filters, "before": position, "before_id": position_id, "limit": limit + 1})
    if count is None:
        # The first page: when it is not full, it holds every match, so it is the count.
        if len(page) <= limit:
            count = len(page)
        else:
            count = build.count("news_count", count_params)
    if count == 0:
        check_sources(build)
    exact = values["q"] is None or count <= SEARCH_COUNT_MAX
    link = None
    if len(page) > limit:
        page = page[:limit]
        last = build.after(page[-1]["published_at"], page[-1]["id"], oldest_first, "news_count", count_params, count)
        link = build.endpoint.next_link(values, last)
    payload = {
        "count": count if exact else SEARCH_COUNT_MAX,
        "count_exact": exact,
        "tag": values["tag"],
        "limit": limit,
        "next": link,
        "updated_at": build.updated_at,
        "results": [served_item(row) for row in page],
    }
    headers = ((b"link", f'<{link}>; rel="next"'.encode()),) if link else ()
    return payload, headers


def news_item(build: Build):
    """One item by its id (checked by :class:`~service.api.parameters.ItemId` before this is called)."""
    found = build.rows("news_item", {"item_id": build.arg})
    if not found:
        raise Missing(f"no news item with id {build.arg!r}")
    return served_item(found[0]), ()


def sources(build: Build):
    """Every publisher; feed addresses only in their public form (:func:`db.urls.public_location`)."""
    results = [
        {
            "name": row["name"],
            "tag": row["tag"],
            "feed_url": public_location(row["url"]),
            "item_count": row["item_count"],
            "last_success_at": row["last_success_at"],
        }
        for row in build.rows("sources", {})
    ]
    # a fetch that changed no item still changes last_success_at: the body's updated_at says so
    newest_fetch = max((source["last_success_at"] for source in results if source["last_success_at"]), default=None)
    return build.listing(results, newest_fetch), ()


def stats(build: Build):
    rows = build.rows("stats", {})
    if not rows:
        raise NoData()
    return {**rows[0], "updated_at": build.updated_at}, ()
