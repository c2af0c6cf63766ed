"""Write the ``sources``, ``news`` and (when there) ``news_removed`` rows of a database as SQL inserts with their column names.

Used once, with the code of the commit named in the file it writes, to keep
the rows an older pipeline stored (``tests/data/legacy/*.sql``): named columns
let the rows load into the schema of any later migration. Run as::

    .venv-test/bin/python -m tests.support.dump_rows DATABASE HEADER > tests/data/legacy/NAME.sql
"""

from __future__ import annotations

import sqlite3
import sys

from tests.support.goldens import REAL


def dump(path: str, header: str) -> str:
    db = sqlite3.connect(path)
    lines = [f"-- {line}" for line in header.splitlines()]
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, order in (("sources", "name"), ("news", "source, url, title, id"), ("news_removed", "id")):
        if table not in tables:
            continue
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        quoted = ", ".join(f"quote({column})" for column in columns)
        for values in db.execute(f"SELECT {quoted} FROM {table} ORDER BY {order}"):
            text = ", ".join(values).replace(str(REAL), "{realfeeds}")
            lines.append(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({text});")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(dump(sys.argv[1], sys.argv[2]))
