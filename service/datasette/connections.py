"""Datasette's own connections, bounded for SQL that anyone may send (``?sql=``, ``_where=``).

``sql_time_limit_ms`` interrupts a query between the steps of SQLite's program;
one step can take much longer than the limit, and much memory, when a function
makes a huge value: ``randomblob(1000000000)`` took 3 GB and held a thread for
16 s, ``printf('%.*c', 1000000000, 'x')`` 4.9 GB and 38 s, and
``_where=randomblob(1000000000)`` on a table page ran for more than 15 minutes.
Every value is capped at :data:`MAX_VALUE_BYTES` and a result at
:data:`MAX_COLUMNS` columns, SQLite's own limits (``sqlite3_limit``), so such a
query fails at once, and Datasette answers it as the 400 of a query that
does not run. No value stored here comes near the cap (the largest at a
million items is an index page of 4 KB).

The database's file path is no one's business but the operator's
(:mod:`qsite.service.datasette.public`): ``pragma_database_list`` answers its ``file``
column as NULL, by SQLite's authorizer.

The same authorizer refuses the SQL functions in :data:`REFUSED_FUNCTIONS`:
``fts3_tokenizer`` answers a pointer into the SQLite library with one argument
(defeating address-space randomisation) and registers a tokenizer from the
caller's bytes with two, on a connection later requests share: the first step
of the published "SELECT code execution" attacks. ``load_extension`` would load
code into the process (Python leaves it disabled; refused here all the same).
A query calling one fails to prepare ("not authorized"), a 400.
"""

from __future__ import annotations

import sqlite3

#: The largest string or blob a query may make or read: a megabyte.
MAX_VALUE_BYTES = 1_000_000
#: The most columns a query's result may have (a table here has at most 12).
MAX_COLUMNS = 100
#: SQL functions no query may call: they expose memory addresses or change the connection's state.
REFUSED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})


def bound(conn: sqlite3.Connection) -> None:
    """Cap ``conn``'s values and columns, hide the file path from its SQL, and refuse :data:`REFUSED_FUNCTIONS`."""
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, MAX_COLUMNS)
    conn.set_authorizer(_authorize)


def _authorize(action: int, table: str | None, column: str | None, _database, _trigger) -> int:
    if action == sqlite3.SQLITE_FUNCTION and column is not None and column.lower() in REFUSED_FUNCTIONS:
        return sqlite3.SQLITE_DENY  # for a function, SQLite gives its name as the second argument
    if action == sqlite3.SQLITE_READ and table == "pragma_database_list" and column == "file":
        return sqlite3.SQLITE_IGNORE  # the column reads as NULL
    return sqlite3.SQLITE_OK
