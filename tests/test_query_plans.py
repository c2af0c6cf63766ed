"""The canned queries read only what they answer with, however many news items there are.

Not timed. Every canned query in ``metadata.yml`` runs with every combination
of its parameters set and unset, on real databases, and two things are checked:

- its plan (EXPLAIN QUERY PLAN): ``news``, ``news_counts`` and ``news_totals`` are only ever
  SEARCHed through an index, never SCANned (a scan reads every row, or every
  entry of an index), and a full-text search goes through the FTS index;
- its work (SQLite virtual machine steps, counted by a progress handler) on a
  database of four times the news over four times the days, at the same
  density, with its times as far from the newest item, or from the oldest
  (which is four times as far from the newest): a query that reads only what
  it answers with does about the same work on both. That holds for a news
  search (``q``) too: a page reads ``news_search`` newest first from its
  cursor, within the minutes of its range, and a count stops at
  ``count_limit``, both checked in the plan as a rowid range the FTS index
  itself applies (its own work is not virtual machine steps); a tag's own
  table (no range: the tag's entries alone) is read to a limit. A search
  whose filter matches a few times opens only that filter's index, which the
  trace of FTS5's look-ups shows.

And each is compiled once, its prepared statement reused by every run after,
under a newer SQLite too (sqlean.py's 3.50, built with STAT4).

A query whose parameter has no test values here fails, so a new filter cannot
arrive unchecked.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from qsite.db.model import TAGS, format_time
from qsite.pipeline.store.records import Item
from qsite.pipeline.store import open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.service.datasette.metadata import QUERY_PREFIX, configured_queries
from tests.support.known_data import SOURCES, seed_catalog

NEWEST = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
#: One item every this often, so both databases hold the same number of items a day.
EVERY = timedelta(minutes=37)
SMALL = 1500


def newer(**delta):
    """A time that far before the newest item."""
    return lambda oldest: format_time(NEWEST - timedelta(**delta))


def older(**delta):
    """A time that far after the oldest item: four times as far from the newest in the big database."""
    return lambda oldest: format_time(oldest + timedelta(**delta))


#: Test values of each canned-query parameter: unset ('' in every canned query) and set; times
#: near the newest items and near the oldest (a callable of the oldest item's time).
#: Parameters that only make sense together are one entry.
VALUES = {
    ("tag",): [("",), ("Science",)],
    ("since",): [("",), (newer(days=9, minutes=5),), (older(days=2, minutes=5),)],
    ("until",): [("",), (newer(days=2, minutes=11),), (older(days=6, minutes=11),)],
    ("sources",): [("",), (f'["{SOURCES["Science"]}", "{SOURCES["Investing"]}"]',)],
    ("before", "before_id"): [("", ""), (newer(days=5), "item-zzz"), (older(days=4), "item-zzz")],
    ("after", "after_id"): [("", ""), (newer(days=5), "item-zzz"), (older(days=4), "item-zzz"), (newer(days=5), "item-00100")],
    ("limit",): [("",), (21,)],
    # a word; either of two; either less a third (photon: every news item but the qubit ones), as fts_query writes them
    ("q",): [("",), ('"qubit"',), ('("qubit" OR "laser")',), ('(("qubit" OR "about")) NOT ("photon")',)],
    # below the matches of "qubit" in both databases (300 and 1,200): a count that stops
    ("count_limit",): [(101,)],
    # a sync walk: every item changed at or after it (all are, in these databases), and its cursor
    ("updated_since",): [("",), (newer(days=1),)],
    ("id",): [("",), ("qubit",)],
    ("item_id",): [("item-00007",)],
    ("course",): [("",), ("quantum-basics",)],
}
#: The tables that grow with the news: never read whole.
BIG = ("news", "news_counts", "news_totals")
SCAN = re.compile(rf"^SCAN ({'|'.join(BIG)})\b")
SEARCH = re.compile(rf"^SEARCH ({'|'.join(BIG)})\b")
#: The plan step of an FTS5 MATCH.
FTS_MATCH = re.compile(r"^SCAN (\w+_fts|news_search|news_search_by_source|news_search_(science|industry|investing)) VIRTUAL TABLE INDEX \d+:M")
#: ... of a tag's own table (keyed by item, no range to apply: the tag's entries alone, to a limit).
TAG_TABLE_MATCH = re.compile(r"^SCAN news_search_(science|industry|investing) VIRTUAL TABLE INDEX \d+:M")
#: ... of news_search (or news_search_by_source: a source's range), with its rowid range (``>`` and ``<``)
#: applied by the index itself.
SEARCH_IN_RANGE = re.compile(r"^SCAN news_search(_by_source)? VIRTUAL TABLE INDEX \d+:M\d*(><|<>)")

QUERIES = {
    name.removeprefix(QUERY_PREFIX): query["sql"]
    for name, query in configured_queries().items()
}


def news_database(path, count: int):
    """The known catalog and ``count`` items, one every :data:`EVERY` back from :data:`NEWEST`."""
    db = open_database(path)
    seed_catalog(db)
    by_source: dict[str, list[tuple[str, Item]]] = {}
    for n in range(count):
        tag = TAGS[n % 3] if n % 7 else "Investing"
        source = SOURCES[TAGS[n % 3]]
        words = "qubit" if n % 5 == 0 else "photon"
        url = f"https://news.example/{n}"
        item = Item(f"key-{n:05d}", url, f"Headline {n}", f"About a {words}", tag, format_time(NEWEST - n * EVERY), True)
        by_source.setdefault(source, []).append((f"item-{n:05d}", item))
    with transaction(db):
        db["sources"].insert_all([{"name": name, "url": f"https://{tag}.example/feed", "tag": tag} for tag, name in SOURCES.items()])
        for source, items in by_source.items():
            news_store.insert_items(db, source, items, format_time(NEWEST))
        # Retention takes the oldest fiftieth, leaving tombstones for /news/removed (db/news_sync.py).
        news_store.delete_published_before(db, format_time(NEWEST - (count - count // 50) * EVERY))
        # Every fourth item kept is re-tagged (its source's tags stay its own: Investing, or its source's tag),
        # leaving rows in news_left for /news/removed with a tag or source, more than a count's cap even here.
        kept = [(id_, item) for items in by_source.values() for id_, item in items
                if item.published_at >= format_time(NEWEST - (count - count // 50) * EVERY)]
        retagged = {"Investing": "Science", "Science": "Investing", "Industry": "Investing"}
        news_store.update_items(db, [(id_, item._replace(tag=retagged[item.tag]), item.published_at) for id_, item in kept[::4]])
    return db


@pytest.fixture(scope="module")
def databases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    small, big = news_database(folder / "small.db", SMALL), news_database(folder / "big.db", 4 * SMALL)
    yield small.conn, big.conn
    small.close()
    big.close()


def parameters(sql: str) -> list[tuple[str, ...]]:
    named = set(re.findall(r"(?<!:):(\w+)", sql))
    groups = [group for group in VALUES if named.intersection(group)]
    missing = named.difference(itertools.chain.from_iterable(groups))
    assert not missing, f"no test values for {sorted(missing)}: add them to VALUES"
    return groups


def combinations(sql: str):
    """Every combination of test values, as a function of the oldest item's time."""
    groups = parameters(sql)
    for values in itertools.product(*(VALUES[group] for group in groups)):
        yield lambda oldest, values=values: {
            name: value(oldest) if callable(value) else value
            for group, chosen in zip(groups, values)
            for name, value in zip(group, chosen)
        }


def oldest(conn) -> datetime:
    (first,) = conn.execute("SELECT min(published_at) FROM news").fetchone()
    return datetime.fromisoformat(first.replace("Z", "+00:00"))


def plan(conn, sql: str, params: dict) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def steps(conn, sql: str, params: dict) -> tuple[int, list]:
    """Virtual machine steps (in hundreds) that running ``sql`` takes, and its rows."""
    counted = [0]

    def count() -> int:
        counted[0] += 1
        return 0

    conn.set_progress_handler(count, 100)
    try:
        rows = conn.execute(sql, params).fetchall()
    finally:
        conn.set_progress_handler(None, 100)
    return counted[0], rows


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_no_canned_query_scans_a_growing_table(databases, name):
    conn, _ = databases
    sql = QUERIES[name]
    for make in combinations(sql):
        params = make(oldest(conn))
        found = plan(conn, sql, params)
        # a table named in the SQL, not a word of a comment or a string (the health query's kind = 'news')
        if re.search(rf"\b({'|'.join(BIG)})\b", re.sub(r"'[^']*'", "''", re.sub(r"--[^\n]*", "", sql))):
            assert not [step for step in found if SCAN.search(step)], f"api_{name} with {params} scans: {found}"
            assert any(SEARCH.search(step) for step in found), found
        if params.get("q"):
            assert any(FTS_MATCH.search(step) for step in found), f"api_{name} with {params} skips FTS: {found}"
        if params.get("q") and "news_search" in sql:
            matches = [step for step in found if step.startswith("SCAN news_search")]
            unranged = [step for step in matches if not SEARCH_IN_RANGE.search(step) and not TAG_TABLE_MATCH.search(step)]
            # the count of a search with neither since nor until has no range to apply: one scan of each index
            # (news_search_by_source with no filter, news_search with a tag)
            allowed = 2 if name == "news_count" else 0
            assert len(matches) > len(unranged) and len(unranged) <= allowed, found


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_canned_queries_do_the_same_work_on_four_times_the_news(databases, name):
    small, big = databases
    sql = QUERIES[name]
    for make in combinations(sql):
        params, big_params = make(oldest(small)), make(oldest(big))
        (on_small, rows), (on_big, _) = steps(small, sql, params), steps(big, sql, big_params)
        # source_names answers nothing for no names: its work with many publishers is tested below
        assert rows or name in ("news", "news_oldest", "health", "source_names"), f"api_{name} with {params} answered nothing: no test at all"
        assert on_big <= 1.5 * on_small + 20, f"api_{name} with {params}: {on_small}00 steps, then {on_big}00"


def compiled_again(conn, sql: str, params: dict) -> bool:
    """Whether running ``sql`` a second time with ``params`` compiled it again.

    SQLite calls the authorizer while it compiles a statement, and only then.
    It is set before the first run: setting one expires every prepared statement.
    """
    compiled = []
    conn.set_authorizer(lambda *action: compiled.append(action) or 0)
    try:
        conn.execute(sql, params).fetchall()
        compiled.clear()
        conn.execute(sql, params).fetchall()
    finally:
        conn.set_authorizer(None)
    return bool(compiled)


@pytest.fixture(scope="module")
def newer_sqlite(databases):
    """The small database on a connection of sqlean.py's SQLite (3.50, built with STAT4), read-only."""
    import sqlean.dbapi2 as sqlean  # the test extra's

    (path,) = [file for _, name, file in databases[0].execute("PRAGMA database_list") if name == "main"]
    conn = sqlean.connect(f"file:{path}?mode=ro", uri=True)
    yield conn
    conn.close()


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_each_canned_query_is_compiled_once_on_a_newer_sqlite(newer_sqlite, name):
    """A request reuses its query's prepared statement, on SQLite 3.50 and 3.51 as sqlean.py and pysqlite3 build them too.

    There, binding a parameter that stands bare as a ``LIMIT`` made SQLite
    compile the statement again every time: at a million items a search's
    count took 0.4 to 0.8 ms more than its 0.06 ms, and the bench's searches'
    SQL a mean of 0.44 ms against 0.23 to 0.24. Python's ``sqlite3`` here (3.40) never
    did; Datasette uses pysqlite3 when it is installed, and newer systems link
    a newer SQLite.
    """
    sql = QUERIES[name]
    for make in combinations(sql):
        params = make(oldest(newer_sqlite))
        assert not compiled_again(newer_sqlite, sql, params), f"api_{name} with {params} is compiled on every run"


def test_the_compile_check_would_catch_a_bare_limit(newer_sqlite):
    """The check above, on what it exists for: ``limit :n`` compiles again on each run there, ``limit +:n`` does not."""
    assert compiled_again(newer_sqlite, "select count(*) from (select 1 from news limit :n)", {"n": 5})
    assert not compiled_again(newer_sqlite, "select count(*) from (select 1 from news limit +:n)", {"n": 5})


def test_the_checks_would_catch_a_scan(databases):
    """What an OR of an empty parameter does: the reason the news queries avoid it."""
    small, big = databases
    sql = "select count(*) from news where (:tag = '' or tag = :tag)"
    assert any(SCAN.search(step) for step in plan(small, sql, {"tag": "Science"}))
    assert steps(big, sql, {"tag": "Science"})[0] > 3 * steps(small, sql, {"tag": "Science"})[0]


#: The index each sync query must walk, in its own order: per arm for the changes (no filter, a tag,
#: sources alone, sources and a tag), one for the tombstones.
SYNC_WALKS = {
    "news_changes": [
        "SEARCH news USING INDEX news_updated ((change_key,id)>(?,?))",
        "SEARCH news USING INDEX news_tag_updated (tag=? AND (change_key,id)>(?,?))",
        "SEARCH news USING COVERING INDEX news_source_updated (source=? AND (change_key,id)>(?,?))",
        "SEARCH news USING COVERING INDEX news_source_tag_updated (source=? AND tag=? AND (change_key,id)>(?,?))",
    ],
    "news_changes_count": [
        "SEARCH news USING COVERING INDEX news_updated (change_key>?)",
        "SEARCH news USING COVERING INDEX news_tag_updated (tag=? AND change_key>?)",
        "SEARCH news USING COVERING INDEX news_source_updated (source=? AND change_key>?)",
        "SEARCH news USING COVERING INDEX news_source_tag_updated (source=? AND tag=? AND change_key>?)",
    ],
    "news_removed": ["SEARCH news_removed USING INDEX news_removed_at ((change_key,id)>(?,?))"],
    "news_removed_count": ["SEARCH news_removed USING COVERING INDEX news_removed_at (change_key>?)"],
    # with tag or source: one arm per way in (none, a tag, sources alone, sources and a tag), as the changes
    "news_removed_filtered": [
        "SEARCH news_left USING INDEX news_left_at ((change_key,id)>(?,?))",
        "SEARCH news_left USING COVERING INDEX news_left_tag (tag=? AND (change_key,id)>(?,?))",
        "SEARCH news_left USING COVERING INDEX news_left_source (source=? AND tag_only=? AND (change_key,id)>(?,?))",
        "SEARCH news_left USING COVERING INDEX news_left_source_tag (source=? AND tag=? AND (change_key,id)>(?,?))",
    ],
    "news_removed_filtered_count": [
        "SEARCH news_left USING COVERING INDEX news_left_at (change_key>?)",
        "SEARCH news_left USING COVERING INDEX news_left_tag (tag=? AND change_key>?)",
        "SEARCH news_left USING COVERING INDEX news_left_source (source=? AND tag_only=? AND change_key>?)",
        "SEARCH news_left USING COVERING INDEX news_left_source_tag (source=? AND tag=? AND change_key>?)",
    ],
}
#: Sorts a sync query may have: each of at most a page (one arm's, before the merge), never of an index range.
PAGE_SORTS = {"news_changes": 1, "news_removed_filtered": 4}


@pytest.mark.parametrize("name", sorted(SYNC_WALKS))
def test_sync_walks_read_their_index_in_order(databases, name):
    """updated_since and /news/removed read from their position in (time, id) order and stop at the page's end.

    Whatever the size of the table: at a million items, a sync asking for the
    last hour's changes reads the last hour's index entries only.
    """
    conn, _ = databases
    sql = QUERIES[name]
    for make in combinations(sql):
        params = make(oldest(conn))
        found = plan(conn, sql, params)
        for walk in SYNC_WALKS[name]:
            assert walk in found, f"api_{name} with {params}: {found}"
        # a sort only of the sources' pages (at most limit rows each), never of an index range
        sorts = [step for step in found if "TEMP B-TREE" in step]
        assert len(sorts) <= PAGE_SORTS.get(name, 0), f"api_{name} with {params} sorts: {found}"


def test_a_sync_walk_with_a_tag_and_a_source_that_never_meet_reads_nothing_more(databases):
    """tag=Industry with a Science publisher matches nothing; filtering news_updated read every entry to find that."""
    small, big = databases
    params = {"updated_since": "", "tag": "Industry", "sources": json.dumps([SOURCES["Science"]]), "after": "",
              "after_id": "", "limit": 21, "count_limit": 101}
    for name in ("news_changes", "news_changes_count", "news_removed_filtered", "news_removed_filtered_count"):
        named = {**params, "since": ""}
        (on_small, rows), (on_big, _) = steps(small, QUERIES[name], named), steps(big, QUERIES[name], named)
        assert rows in ([], [(0,)]) and on_big <= on_small + 2, (name, on_small, on_big)


def test_the_health_query_reads_the_latest_runs_not_the_history(tmp_path):
    """/api/v1/health is never cached and probes ask it every few seconds, while ingest_runs grows with every run."""

    def history(path, days: int):
        db = open_database(path)
        db["sources"].insert_all([{"name": name, "url": f"https://{tag}.example/feed", "tag": tag} for tag, name in SOURCES.items()])
        runs = []
        for hour in range(days * 24):
            stamp = format_time(NEWEST - timedelta(hours=days * 24 - hour))
            runs += [("news", name, stamp, stamp, "ok") for name in SOURCES.values()] + [("site", "export.json", stamp, stamp, "ok")]
        db.conn.executemany("INSERT INTO ingest_runs (kind, source, started_at, finished_at, status) VALUES (?, ?, ?, ?, ?)", runs)
        db.conn.commit()
        return db

    short, long = history(tmp_path / "short.db", 30), history(tmp_path / "long.db", 120)
    (on_short, rows), (on_long, same) = steps(short.conn, QUERIES["health"], {}), steps(long.conn, QUERIES["health"], {})
    assert [row[0] for row in rows] == ["news", "site"] and [row[4] for row in rows] == [len(SOURCES), 1]
    assert [row[1:] for row in rows] == [row[1:] for row in same]  # the same latest runs, four times the history
    assert on_long <= on_short + 2, (on_short, on_long)


#: How the count's sums read their rows, per way (db/news_queries.py, COUNT_WAYS): no source asked
#: (no filter or a tag: one way) ``news_totals`` by its key, since's and until's months and days;
#: sources ``news_counts`` by ``news_counts_source``. Nothing else reads either table.
COUNT_SUMS = {
    "SEARCH news_totals USING PRIMARY KEY (tag=? AND span=? AND period>?)",
    "SEARCH news_totals USING PRIMARY KEY (tag=? AND span=? AND period>? AND period<?)",
    "SEARCH news_counts USING COVERING INDEX news_counts_source (source=? AND span=? AND period>?)",
    "SEARCH news_counts USING COVERING INDEX news_counts_source (source=? AND span=? AND period>? AND period<?)",
}


#: The indexes the count's range counts within one day read, one per way (no filter, a tag, sources,
#: sources and a tag), each holding all that its term reads (no row of ``news`` looked up).
COUNT_DAYS = {"news_newest", "news_tag_newest", "news_source_newest", "news_source_tag_newest"}


def test_counts_read_the_totals_unless_sources_are_asked(databases):
    conn, _ = databases
    sql = QUERIES["news_count"]
    for make in combinations(sql):
        params = make(oldest(conn))
        found = plan(conn, sql, params)
        sums = [step for step in found if re.match(r"SEARCH news_(counts|totals)\b", step)]
        assert sorted(set(sums)) == sorted(COUNT_SUMS) and len(sums) == 8, f"api_news_count with {params}: {sums}"
        days = [step for step in found if step.startswith("SEARCH news USING") and "(rowid=?)" not in step]  # not a search's rows
        assert all(step.startswith("SEARCH news USING COVERING INDEX") for step in days), f"api_news_count with {params}: {days}"
        assert {step.split()[5] for step in days} == COUNT_DAYS and len(days) == 8, days


def spread_database(path, sources: int):
    """:data:`SMALL` items at :data:`EVERY`, the same times and words, over ``sources`` publishers and every tag."""
    db = open_database(path)
    names = [f"Publisher {n}" for n in range(sources)]
    db["sources"].insert_all([{"name": name, "url": f"https://{n}.example/feed", "tag": "Science"} for n, name in enumerate(names)])
    by_source: dict[str, list[tuple[str, Item]]] = {}
    for n in range(SMALL):
        item = Item(f"key-{n:05d}", f"https://news.example/{n}", f"Headline {n}", "About a qubit",
                    TAGS[n % len(TAGS)] if sources > 1 else "Science", format_time(NEWEST - n * EVERY), True)
        by_source.setdefault(names[n // len(TAGS) % sources], []).append((f"item-{n:05d}", item))
    with transaction(db):
        for source, made in by_source.items():
            news_store.insert_items(db, source, made, format_time(NEWEST))
    return db


def test_a_count_reads_one_row_a_period_however_many_sources_and_tags(tmp_path):
    """The same items, from one publisher under one tag or from twelve under three: the same work to count them.

    ``news_counts`` holds a row per period, tag and source: summed for a count
    with no source asked, its rows grew with the sources and tags (at a million
    items, 1,029 months for the whole table, 21 rows a month). ``news_totals``
    (migration 11) holds one row per period for every tag and one per tag.
    """
    one, twelve = spread_database(tmp_path / "one.db", 1), spread_database(tmp_path / "twelve.db", 12)
    assert twelve.execute("SELECT count(DISTINCT tag || source) FROM news").fetchone()[0] == 36
    sql = QUERIES["news_count"]
    for tag in ("", "Science"):
        for since in ("", format_time(NEWEST - timedelta(days=33, hours=5))):  # a month and more back, in its month
            params = {"tag": tag, "since": since, "until": "", "sources": "", "q": "", "count_limit": 101}
            (on_one, (count_one,)), (on_twelve, (count_twelve,)) = steps(one.conn, sql, params), steps(twelve.conn, sql, params)
            assert count_twelve[0] > 0 and count_one[0] >= count_twelve[0], params
            assert on_twelve <= on_one + 1, f"api_news_count with {params}: {on_one}00 steps, then {on_twelve}00"
    one.close()
    twelve.close()


def test_the_publisher_look_up_reads_only_the_names_asked_while_each_is_a_publishers(tmp_path):
    """api_source_names, run when an answer with sources comes out empty: while every name asked is a
    publisher's, one look-up by the primary key each, whatever the number of publishers; only with a
    name that is not, every publisher's name, to suggest the one meant from."""
    sql = QUERIES["source_names"]
    work = []
    for count in (50, 5000):
        db = open_database(tmp_path / f"publishers-{count}.db")
        with transaction(db):
            db["sources"].insert_all({"name": f"Publisher {n}", "url": "https://p.example/feed", "tag": "Science"} for n in range(count))
        asked = {"sources": json.dumps(["Publisher 7", "Publisher 42"])}
        taken, rows = steps(db.conn, sql, asked)
        assert sorted(rows) == [("Publisher 42", 1), ("Publisher 7", 1)]
        work.append(taken)
        _, rows = steps(db.conn, sql, {"sources": json.dumps(["Publisher 7", "nobody"])})
        assert len(rows) == count and sum(asked for _, asked in rows) == 1
        db.close()
    assert work[1] <= work[0] + 1, work


#: The filters whose own index a search with few matches reads (its page sorted from them), and that index.
FEW_MATCH_FILTERS = {
    "sources": ({"tag": "", "sources": f'["{SOURCES["Science"]}", "{SOURCES["Investing"]}"]'}, "news_search_by_source_idx"),
    "a tag": ({"tag": "Science", "sources": ""}, "news_search_science_idx"),
}


@pytest.mark.parametrize("name", ["news", "news_oldest", "news_count"])
@pytest.mark.parametrize("filtered", sorted(FEW_MATCH_FILTERS))
def test_a_filtered_search_with_few_matches_reads_only_its_filters_index(databases, name, filtered):
    """Words that never meet (qubit, photon) with sources, or a tag: the page and count open only the filter's index.

    Its matches in the filter are few (none), so the page is sorted from them and
    ``news_search`` is not opened: there, FTS5 walked both words' lists to their ends, newest
    first, to meet the sources' terms or the tag's column. The trace lists the look-ups FTS5
    makes of each index's terms (``*_idx``); the virtual machine's work is the same on four
    times the news.
    """
    filters, index = FEW_MATCH_FILTERS[filtered]
    params = {"q": '"qubit" "photon"', "since": "", "until": "", "before": "", "before_id": "",
              "after": "", "after_id": "", "limit": 21, "count_limit": 101, **filters}
    work = []
    for conn in databases:
        looked_up: list[str] = []
        conn.set_trace_callback(looked_up.append)
        try:
            counted, rows = steps(conn, QUERIES[name], params)
        finally:
            conn.set_trace_callback(None)
        assert rows in ([], [(0,)])
        assert not any("news_search_idx" in s for s in looked_up), looked_up
        assert any(index in s for s in looked_up), looked_up
        work.append(counted)
    assert work[1] <= 1.5 * work[0] + 20, work
