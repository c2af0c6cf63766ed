"""Building a body: what one build is given, its failures, and the bodies of the catalog and glossary.

Each data endpoint names a builder in its row of :data:`qsite.service.api.endpoints.ENDPOINTS`.
A builder gets a :class:`Build` (the canonical parameter values asked for and one read
snapshot: connection, canned SQL and the ``data_versions`` it saw) and returns
``(payload, extra_headers)``, or raises :class:`NoData` (503), :class:`Missing` (404) or
:class:`Invalid` (400). Builders are pure and synchronous: they read only through
:meth:`Build.rows`, and only the canned queries their endpoint lists (the SQL is in
``datasette.yaml``), so a cached body depends on nothing but its key and the snapshot.
The news bodies are in :mod:`qsite.service.api.news_bodies`, the check of ``source`` in
:mod:`qsite.service.api.publishers`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from qsite.service.api.cursors import Position, count_seal
from qsite.service.api.data_versions import Versions, updated_at
from qsite.service.api.parameters import echo
from qsite.service.api.search_language import fts_query


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

    :param endpoint: its :class:`~qsite.service.api.endpoints.Endpoint` (canned queries, datasets, next links).
    :param values: the canonical value of each of its query parameters.
    :param arg: the value of its path parameter, if it has one.
    :param cursor_key: the key counts are sealed with in ``next`` links
        (:mod:`qsite.service.api.cursors`); without one, none is carried and every page counts.
    """

    endpoint: object
    values: dict
    arg: str | None
    conn: sqlite3.Connection
    sql: dict[str, str]
    versions: Versions
    cursor_key: bytes = b""

    def rows(self, query: str, params: dict, way: str | None = None) -> list[dict]:
        """The rows of one of the endpoint's canned queries, as dicts, with bound ``params``.

        :param way: the way into a page query ``params`` take (:func:`qsite.db.news_arms.way_in`):
            only that way's arms are run when they are known (``news.search``), the whole query otherwise.
        """
        if query not in self.endpoint.queries:
            raise KeyError(f"{self.endpoint.name} does not list the canned query {query!r}")
        sql = self.sql.get(f"{query}.{way}") if way is not None else None
        cursor = self.conn.execute(sql or self.sql[query], params)
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


def stats(build: Build):
    rows = build.rows("stats", {})
    if not rows:
        raise NoData()
    return {**rows[0], "updated_at": build.updated_at}, ()
