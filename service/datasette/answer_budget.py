"""A budget for the bytes of one answer to SQL on qsite's database, counted as its rows are fetched.

Each value is capped (:mod:`qsite.service.datasette.connections`), but a query may
return up to Datasette's ``max_returned_rows`` rows of up to 100 such values:
one ``?sql=`` answer could otherwise be gigabytes, all held in memory and then
serialised on the event loop that also serves /api/v1. :func:`count_answers`
gives a connection a row factory that adds up the size of each row as SQLite
hands it over (its text and blob lengths, and :data:`CELL_BYTES` for every
value) and raises :class:`AnswerTooLarge` once one query's rows pass the
budget, so the rest are never fetched: a request holds at most the budget and
one more row (SQLite's own copy of it; the texts of a row are counted as they
are decoded). Datasette's own row factory still makes the rows.

Every query Datasette runs on the connection is counted, its own (table
pages, facets, CSV chunks) as well as the client's (``?sql=``, ``_where=``);
qsite's own pages of its data are far below any budget that makes sense. :func:`problem` is the answer a request gets
when its query passes the budget: a 400 naming the budget and its config key.
"""

from __future__ import annotations

import sqlite3
import weakref

from qsite.service.http.problems import problem_body

#: The config key of the budget, named in the refusal.
CONFIG_KEY = "api.sql_answer_max_bytes"
#: What every value counts for besides its text or bytes: its separators and markup in JSON, CSV or HTML.
CELL_BYTES = 8


class AnswerTooLarge(Exception):
    """One query's rows passed the budget; nothing more of them was fetched."""

    def __init__(self, budget: int):
        super().__init__(answer_detail(budget))
        self.budget = budget


def answer_detail(budget: int) -> str:
    """What a client is told: the budget, its key, and what to change in the query."""
    return (
        f"the answer to this query is larger than the {budget:,} bytes one answer may have ({CONFIG_KEY}); "
        "ask for fewer rows or columns (LIMIT), or shorter values (substr)"
    )


def row_bytes(row: tuple) -> int:
    """The bytes a row counts for: the length of each text or blob, plus :data:`CELL_BYTES` a value."""
    size = CELL_BYTES * len(row)
    for value in row:
        if isinstance(value, (str, bytes)):
            size += len(value)
    return size


def count_answers(conn: sqlite3.Connection, budget: int) -> None:
    """Make ``conn`` raise :class:`AnswerTooLarge` when one query's rows pass ``budget`` bytes.

    Wraps the connection's row factory (Datasette's :class:`sqlite3.Row`, set
    before its ``prepare_connection`` hook runs): each cursor is one query, and
    its count starts at nought. The text factory (Datasette's decoding) counts
    too, so that a row of many large values is refused before its Python copy
    is made whole. A connection is used by one thread at a time.
    """
    make_row, make_text = conn.row_factory, conn.text_factory
    # a weak reference to the cursor being counted, its bytes so far, and the text of the row being made
    counting: list = [None, 0, 0]

    def counted_text(data: bytes):
        counting[2] += len(data)
        if counting[2] > budget:  # one row's text alone past the budget: none of the rest is made
            counting[2] = 0
            raise AnswerTooLarge(budget)
        return make_text(data)

    def counted_row(cursor, row):
        counting[2] = 0
        held = counting[0]
        if held is None or held() is not cursor:
            counting[0], counting[1] = weakref.ref(cursor), 0
        counting[1] += row_bytes(row)
        if counting[1] > budget:
            raise AnswerTooLarge(budget)
        return make_row(cursor, row) if make_row is not None else row

    conn.row_factory = counted_row
    if make_text is str:  # Python's default: text is decoded as it comes, not through a factory
        make_text = _decode
    conn.text_factory = counted_text


def _decode(data: bytes) -> str:
    return data.decode("utf-8")


def problem(exception: AnswerTooLarge) -> dict:
    """The problem document of a refused answer, with Datasette's ``ok`` and ``error`` for its JSON clients."""
    detail = str(exception)
    return {**problem_body("bad-request", detail), "ok": False, "error": detail}
