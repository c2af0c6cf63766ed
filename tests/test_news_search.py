"""``news_search`` and the news searches the API answers: the same page as an exact sort of every match.

``api_news`` reads a search's matches newest first by minute from
``news_search`` and sorts exactly only the page's matches and the rest of
their oldest minute (metadata.yml). Here it is compared with the plain
answer, every match of ``news_fts`` sorted by ``(published_at, id)``, on
items crowded into a few minutes (many share a minute, some a second), for
random searches, tags, sources, ranges, cursors and page sizes, before and
after the pipeline changes and deletes items; and ``api_news_count`` with
its ``count_limit`` against ``count(*)``. Then the API's ``count_exact``.
"""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlite_utils

from qsite.db.news_derived import SEARCH_ROWID_MASK
from qsite.db.news_queries import page_search
from qsite.db.news_search_filters import FEW_MATCHES
from qsite.db.model import NEWS, TAGS, format_time
from qsite.pipeline.store.records import Item
from qsite.pipeline.store import bump_version, open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import sources as sources_store
from qsite.service.api.news_bodies import SEARCH_COUNT_MAX
from qsite.service.api.parameter_table import Q_MAX
from qsite.service.api.search_language import Words, fts_query
from qsite.service.datasette.metadata import configured_queries
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import database_before, seed_catalog

SQL = {name: q["sql"] for name, q in configured_queries().items()}
SOURCES = ("Lab Notes", "Industry Wire", "Capital Brief", "Smith, Jones & Co")
START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
WORDS = ("qubit", "photon", "laser", "fridge", "anyon")
#: The searches drawn, as a client writes them: words, a word excluded, OR (binding before the words' AND),
#: a hyphenated term (both words) in an OR or excluded.
SEARCHES = ("{a}", "{a} {b}", "{a} -{b}", "{a} OR {b}", "{a} OR {b} -{c}", "{a} -{b} -{c}", "{a} {b} OR {c}",
            "{a}-{b} OR {c}", "{a} -{b}-{c}", "-{c} {a} OR {b} OR {c}")
MATCHES = """FROM news_fts JOIN news ON news.rowid = news_fts.rowid
    WHERE news_fts MATCH :q AND (:tag = '' OR tag = :tag) AND published_at > :since
      AND (:until = '' OR published_at < :until)
      AND (:sources = '' OR source IN (SELECT value FROM json_each(:sources)))"""


def items(count: int, seed: int, prefix: str = "i") -> list[tuple[str, str, Item]]:
    """``(source, id, item)`` in 12 minutes: many share a minute, some a second."""
    rng = random.Random(seed)
    made = []
    for n in range(count):
        moment = START + timedelta(minutes=rng.randrange(12), seconds=rng.choice((0, 0, 59, rng.randrange(60))))
        words = " ".join(rng.sample(WORDS, rng.choice((1, 2, 3))))
        item = Item(f"key-{prefix}-{n}", f"https://news.example/{prefix}/{n}", f"Headline {n}", words, rng.choice(TAGS), format_time(moment), True)
        made.append((rng.choice(SOURCES), f"{prefix}-{n:04d}", item))
    return made


def new_database(path):
    db = open_database(path)
    with transaction(db):
        for name in SOURCES:
            sources_store.add_source(db, name, "https://feeds.example/" + name.replace(" ", ""), "Science")
    return db


def insert(db, rows) -> None:
    with transaction(db):
        for source in SOURCES:
            news_store.insert_items(db, source, [(id_, item) for s, id_, item in rows if s == source], "2026-03-02T00:00:00Z")


@pytest.fixture
def db(tmp_path):
    db = new_database(tmp_path / "site.db")
    yield db
    db.close()


def fts(q: str) -> str:
    """``q`` as the API reads it and runs it: canonical (:class:`Words`), then an FTS5 query."""
    return fts_query(Words(Q_MAX).parse(q))


def random_params(db, rng: random.Random) -> dict:
    times = [t for (t,) in db.execute("SELECT published_at FROM news")]
    positions = db.execute("SELECT published_at, id FROM news").fetchall()

    def moment() -> str:
        base = datetime.fromisoformat(rng.choice(times).replace("Z", "+00:00"))
        return format_time(base + timedelta(seconds=rng.choice((-61, -1, 0, 0, 1, 60))))

    before, before_id = rng.choice(positions) if rng.random() < 0.5 else ("", "")
    named = rng.sample(SOURCES + ("Nobody",), rng.choice((1, 2)))
    return {
        "q": fts(rng.choice(SEARCHES).format(**dict(zip("abc", rng.sample(WORDS, 3))))),
        "tag": rng.choice(("", *TAGS)),
        "since": moment() if rng.random() < 0.4 else "",
        "until": moment() if rng.random() < 0.3 else "",
        "sources": json.dumps(named) if rng.random() < 0.4 else "",
        "before": before,
        "before_id": before_id,
        "limit": rng.choice((1, 2, 5, 21)),
        "count_limit": rng.choice((1, 4, 30, SEARCH_COUNT_MAX + 1)),
    }


def assert_searches_match(db, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(rounds):
        params = random_params(db, rng)
        expected = db.execute(
            f"""SELECT news.id, news.title, url, source, news.summary, tag, published_at, image_url, authors, updated_at {MATCHES}
                AND (:before = '' OR (published_at, news.id) < (:before, :before_id))
                ORDER BY published_at DESC, news.id DESC LIMIT :limit""",
            params,
        ).fetchall()
        assert db.execute(SQL["api_news"], params).fetchall() == expected, params
        (total,) = db.execute(f"SELECT count(*) {MATCHES}", params).fetchone()
        assert db.execute(SQL["api_news_count"], params).fetchone()[0] == min(total, params["count_limit"]), params


def test_search_pages_are_an_exact_sort_of_every_match(db):
    insert(db, items(400, seed=1))
    assert db.execute("SELECT count(*) FROM news_search").fetchone()[0] == 400
    assert_searches_match(db, rounds=600, seed=2)


def test_search_follows_changes_and_deletions(db):
    rows = items(300, seed=3)
    insert(db, rows)
    changed = [(id_, item._replace(tag=TAGS[(TAGS.index(item.tag) + 1) % 3], summary="retitled anyon"), item.published_at)
               for _, id_, item in rows[:60]]
    changed += [(id_, item, format_time(START + timedelta(minutes=30, seconds=n % 3))) for n, (_, id_, item) in enumerate(rows[60:90])]
    with transaction(db):
        news_store.update_items(db, changed, "2026-03-03T00:00:00Z")
        news_store.delete_published_before(db, format_time(START + timedelta(minutes=3)))
    assert_searches_match(db, rounds=300, seed=4)
    # a contentless index keeps no text: what it holds is what the triggers put and took out
    mask = SEARCH_ROWID_MASK
    held = db.execute(f"SELECT rowid & {mask} FROM news_search WHERE news_search MATCH '- facets: retitled' ORDER BY 1").fetchall()
    assert held == db.execute("SELECT rowid FROM news WHERE summary = 'retitled anyon' ORDER BY 1").fetchall() != []


def items_over_months(count: int, seed: int) -> list[tuple[str, str, Item]]:
    """``(source, id, item)`` over seven months, most in the first and last minutes of a month, where a range's months change."""
    rng = random.Random(seed)
    made = []
    for n, (source, id_, item) in enumerate(items(count, seed, prefix="m")):
        month_start = datetime(2026, 5 + rng.randrange(7), 1, tzinfo=UTC)
        moment = month_start + timedelta(seconds=rng.choice((0, 59, 3600 * 24 * 14)) - rng.choice((0, 0, 1, 60)))
        made.append((source, id_, item._replace(published_at=format_time(moment))))
    return made


def test_searches_over_months_find_every_match_when_their_months_join_them(db):
    """A ``since`` in the last :data:`~qsite.db.news_queries.MONTHS_MAX` months of its range ANDs those months'
    terms (``m202611``) into a page's search of words ANDed: the same pages (and counts) as the whole index,
    ranges across a month's end, items moved to another month and removed."""
    rows = items_over_months(400, seed=21)
    insert(db, rows)
    assert_searches_match(db, rounds=400, seed=22)
    moved = [(id_, item, format_time(datetime.fromisoformat(item.published_at) + timedelta(days=n % 3 * 20)))
             for n, (_, id_, item) in enumerate(rows[:80])]
    with transaction(db):
        news_store.update_items(db, moved, "2026-12-01T00:00:00Z")
        news_store.delete_published_before(db, "2026-06-01T00:00:00Z")
    assert_searches_match(db, rounds=400, seed=23)
    # a contentless index keeps no text: each item's month is the term the triggers put there
    by_month = db.execute("SELECT strftime('m%Y%m', published_at), count(*) FROM news GROUP BY 1").fetchall()
    assert [(month, db.execute("SELECT count(*) FROM news_search WHERE news_search MATCH ?", [f"facets: {month}"]).fetchone()[0])
            for month, _ in by_month] == by_month


@pytest.mark.parametrize(
    ("since", "until", "months"),
    [
        ("2026-11-28T10:00:00Z", "", "m202611"),
        ("2026-09-01T00:00:00Z", "", "m202609 OR m202610 OR m202611"),
        ("2026-08-31T23:59:59Z", "", None),  # four months: the walk past the range costs less than their lists
        ("2025-01-10T00:00:00Z", "2025-02-03T00:00:00Z", "m202501 OR m202502"),
        ("2026-09-01T00:00:00Z", "2026-09-01T00:00:00Z", "m202609"),
        ("", "2026-11-01T00:00:00Z", None),
    ],
)
def test_a_search_since_the_newest_months_reads_their_terms(db, since, until, months):
    """The months a page's search of words ANDed, or of a word less another, is ANDed with: from ``since``'s to
    ``until``'s, or to the newest item's."""
    insert(db, [("Lab Notes", "newest", items(1, seed=24)[0][2]._replace(published_at="2026-11-29T08:00:00Z"))])
    search = page_search()
    in_months = f" AND facets: ({months})" if months else ""
    for q in ('"qubit" "laser"', '"qubit" AND ("laser" OR "photon")'):
        (expr,) = db.execute(search, {"q": q, "tag": "", "sources": "", "since": since, "until": until}).fetchone()
        assert expr == f"- facets: ({q})" + in_months
    # a NOT walks its included words to their first match before an AND around it seeks: the months go inside
    for included, excluded in (('"qubit" AND "laser"', '"photon"'), ('"qubit"', '"laser"'), ('("qubit" OR "laser")', '"photon" OR "anyon"')):
        q = f"({included}) NOT ({excluded})"
        (expr,) = db.execute(search, {"q": q, "tag": "", "sources": "", "since": since, "until": until}).fetchone()
        assert expr == (f"(- facets: ({included}){in_months}) NOT - facets: ({excluded})" if months else f"- facets: ({q})")
        (expr,) = db.execute(search, {"q": q, "tag": "Science", "sources": '["Lab Notes"]', "since": since, "until": until}).fetchone()
        (source,) = db.execute("SELECT rowid FROM sources WHERE name = 'Lab Notes'").fetchone()
        in_source = f" AND facets: (t{source}science)"
        assert expr == (f"({{science}}: ({included}){in_source}{in_months}) NOT {{science}}: ({excluded})" if months
                        else f"{{science}}: ({q}){in_source}")
    # a word alone, or words joined by OR, match at every entry of their lists: FTS5 stops at the range's end
    for q in ('"qubit"', '("qubit" OR "laser")'):
        (expr,) = db.execute(search, {"q": q, "tag": "", "sources": "", "since": since, "until": until}).fetchone()
        assert expr == f"- facets: ({q})"


def test_a_published_snapshot_searches_the_same(db, tmp_path):
    """``qsite publish`` copies with VACUUM INTO, which keeps rowids: the keys still point at their items."""
    rows = items(300, seed=10)
    insert(db, rows)
    with transaction(db):
        db.execute("DELETE FROM news WHERE rowid % 3 = 0")  # gaps, as retention leaves them
    db.execute("VACUUM INTO ?", [str(tmp_path / "snapshot.db")])
    copy = sqlite_utils.Database(tmp_path / "snapshot.db")
    assert_searches_match(copy, rounds=150, seed=11)
    copy.close()


def test_a_time_the_index_cannot_order_is_refused_and_nothing_is_lost(db):
    insert(db, items(5, seed=5))
    bad = Item("key-bad", "https://news.example/bad", "Bad", "qubit", "Science", "yesterday", True)
    with pytest.raises(sqlite3.IntegrityError, match="published_at must be a time such as"):
        insert(db, [("Lab Notes", "bad", bad)])
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] == 5
    assert db.execute("SELECT count(*) FROM news_search").fetchone()[0] == 5


def test_bulk_insert_indexes_what_row_by_row_inserts_index(db, tmp_path):
    with transaction(db):
        news_store.bulk_insert_items(db, items(200, seed=6), "2026-03-02T00:00:00Z", batch=64)
    row_by_row = new_database(tmp_path / "row-by-row.db")
    insert(row_by_row, items(200, seed=6))
    found = f"SELECT id FROM news WHERE rowid IN (SELECT rowid & {SEARCH_ROWID_MASK} FROM news_search WHERE news_search MATCH ?) ORDER BY id"
    for match in ("- facets: qubit", "- facets: (photon laser)", "science: photon", "investing: (qubit laser)", "facets: s2", "facets: t2industry"):
        assert db.execute(found, [match]).fetchall() == row_by_row.execute(found, [match]).fetchall() != []
    assert_searches_match(db, rounds=100, seed=7)
    row_by_row.close()


def test_migration_indexes_the_items_already_stored(tmp_path):
    path = tmp_path / "old.db"
    database_before(path, "m006_news_search", SOURCES, items(150, seed=8))
    assert "news_search" not in sqlite_utils.Database(path).table_names()
    db = open_database(path)
    assert_searches_match(db, rounds=150, seed=9)
    db.close()


def test_migration_8_indexes_by_tag_what_migration_6_indexed(tmp_path):
    """Items stored under m006's index (words and a tag term) are found by tag after m008 rebuilds it."""
    path = tmp_path / "old.db"
    database_before(path, "m008_news_search_by_tag", SOURCES, items(150, seed=10))
    assert [row[1] for row in sqlite_utils.Database(path).execute("PRAGMA table_info(news_search)").fetchall()] == ["words", "facets"]
    db = open_database(path)
    assert [row[1] for row in db.execute("PRAGMA table_info(news_search)").fetchall()] == ["science", "industry", "investing", "facets"]
    assert_searches_match(db, rounds=150, seed=11)
    db.close()


def test_migration_17_indexes_the_months_of_the_items_already_stored(tmp_path):
    """Items stored under m008's index (no months) are each under their month's term after m017 rebuilds it,
    and its insert trigger puts a new item under its own."""
    path = tmp_path / "old.db"
    database_before(path, "m017_news_search_months", SOURCES, items_over_months(150, seed=25))
    month = "SELECT count(*) FROM news_search WHERE news_search MATCH 'facets: m202611'"
    assert sqlite_utils.Database(path).execute(month).fetchone()[0] == 0
    db = open_database(path)
    held = db.execute("SELECT strftime('m%Y%m', published_at), count(*) FROM news GROUP BY 1").fetchall()
    assert [(m, db.execute("SELECT count(*) FROM news_search WHERE news_search MATCH ?", [f"facets: {m}"]).fetchone()[0])
            for m, _ in held] == held and len(held) > 5
    assert_searches_match(db, rounds=150, seed=26)
    insert(db, [("Lab Notes", "later", items(1, seed=28)[0][2]._replace(published_at="2026-12-02T00:00:00Z"))])
    assert db.execute("SELECT count(*) FROM news_search WHERE news_search MATCH 'facets: m202612'").fetchone()[0] == 1
    db.close()


def test_the_api_says_when_a_search_count_stops(make_config, tmp_path):
    db = new_database(tmp_path / "site.db")
    seed_catalog(db)
    many = [("Lab Notes", f"m-{n:05d}", Item(f"k-{n}", f"https://news.example/m/{n}", f"Item {n}", "qubit" if n else "qubit rare",
                                             "Science", format_time(START - timedelta(seconds=n)), True))
            for n in range(SEARCH_COUNT_MAX + 5)]
    with transaction(db):
        news_store.bulk_insert_items(db, many, "2026-03-02T00:00:00Z")
        bump_version(db, NEWS, "2026-03-02T00:00:00Z")
    db.close()
    with ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"}))) as client:
        capped = client.get("/api/v1/news?q=qubit&limit=3").json()
        assert (capped["count"], capped["count_exact"]) == (SEARCH_COUNT_MAX, False)
        assert [item["id"] for item in capped["results"]] == ["m-00000", "m-00001", "m-00002"]
        rare = client.get("/api/v1/news?q=rare").json()
        assert (rare["count"], rare["count_exact"]) == (1, True)
        narrowed = client.get("/api/v1/news?q=qubit&since=" + format_time(START - timedelta(seconds=100))).json()
        assert (narrowed["count"], narrowed["count_exact"]) == (100, True)
        everything = client.get("/api/v1/news").json()  # counts without a search are always exact
        assert (everything["count"], everything["count_exact"]) == (SEARCH_COUNT_MAX + 5, True)


def test_words_the_index_splits_are_searched_not_refused(make_config, tmp_path):
    """An underscore separates words in the index; a letter whose casefold is a letter and a combining mark does not.

    Searched as one word each would be a phrase, which the ``detail=column``
    index refuses (``fts5: phrase queries are not supported``): that was a 503.
    A letter SQLite's older Unicode tables take for a separator is a 400 naming q.
    """
    db = new_database(tmp_path / "site.db")
    seed_catalog(db)
    rows = [("Lab Notes", "w-1", Item("k-1", "https://news.example/w/1", "Literal error in a compiler", "qubit", "Science",
                                      format_time(START), True)),
            ("Lab Notes", "w-2", Item("k-2", "https://news.example/w/2", "Υπολογιστές", "κβαντικοί υπολογιστές", "Science",
                                      format_time(START - timedelta(seconds=1)), True))]
    with transaction(db):
        news_store.bulk_insert_items(db, rows, "2026-03-02T00:00:00Z")
        bump_version(db, NEWS, "2026-03-02T00:00:00Z")
    db.close()
    with ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"}))) as client:
        underscore = client.get("/api/v1/news?q=literal_error")
        assert underscore.status_code == 200
        assert [item["id"] for item in underscore.json()["results"]] == ["w-1"]
        greek = client.get("/api/v1/news?q=ὐπολογιστές")  # casefolds to υ + U+0313, which the index does not do
        assert greek.status_code == 200, greek.text
        older_tables = client.get("/api/v1/news?q=a%E1%A6%B0b")  # U+19B0: a letter to Python, a separator to SQLite 3.40
        assert older_tables.status_code in (200, 400), older_tables.text
        if older_tables.status_code == 400:
            assert older_tables.json()["errors"] == [{"parameter": "q", "detail": "holds characters the search cannot take"}]


def test_a_page_that_already_gives_the_count_runs_one_query(db):
    """A first page that is not full is every match: no count query. A later page of nothing: no page query.

    A search whose words and filters seldom meet reads both index lists to their end (tens of
    milliseconds at a million items); running one query where two were run halves that.
    """
    from qsite.service.api.bodies import Build
    from qsite.service.api.cursors import Position
    from qsite.service.api.endpoints import ENDPOINTS
    from qsite.service.api.news_bodies import news
    from qsite.service.api.parameters import parse_params

    insert(db, items(120, seed=12))
    api_sql = {name.removeprefix("api_"): sql for name, sql in SQL.items()}
    endpoint = ENDPOINTS["news"]
    ran: list[str] = []
    starts = (SQL["api_news"][:30], SQL["api_news_count"][:30])  # before the first parameter
    conn = sqlite3.connect(db.conn.execute("PRAGMA database_list").fetchone()[2])
    conn.set_trace_callback(ran.append)
    last = Position(*db.execute("SELECT published_at, id FROM news ORDER BY published_at, id LIMIT 1").fetchone())

    def answer(query: str, cursor=None) -> tuple[dict, int]:
        values, errors = parse_params(endpoint.params, query.encode())
        assert not errors, errors
        values["cursor"] = cursor  # these test items' ids are not the pipeline's hex, which a cursor must hold
        ran.clear()
        payload, _ = news(Build(endpoint, values, None, conn, api_sql, {"news": (1, "2026-03-02T00:00:00Z")}))
        # The trace also lists the statements FTS5 runs inside a query: only ours are counted.
        return payload, sum(statement.startswith(ours) for statement in ran for ours in starts)

    expected = db.execute(f"SELECT count(*) {MATCHES}", {"q": fts_query("qubit photon laser"), "tag": "", "since": "",
                                                           "until": "", "sources": ""}).fetchone()[0]
    assert 0 < expected <= 20
    short, queries = answer("q=qubit+photon+laser")
    assert (short["count"], short["count_exact"], len(short["results"]), queries) == (expected, True, expected, 1)
    full, queries = answer("q=qubit&limit=5")
    assert len(full["results"]) == 5 and full["count"] > 5 and queries == 2
    after_last, queries = answer("q=qubit", cursor=last)
    assert after_last["count"] > 0 and after_last["results"] == [] and queries == 2
    nothing, queries = answer("q=qubit+absentword", cursor=last)
    assert (nothing["count"], nothing["results"], queries) == (0, [], 1)
    conn.close()


def test_a_dated_search_count_and_a_page_not_full_read_their_terms_once(db):
    """A count with since and until opens the index's lists as one without: no MATCH of their own for their minutes.

    And a page of fewer matches than its limit has them all: no MATCH for the rest of its last minute.

    FTS5 bounds an AND by its matches, not by a rowid range: a MATCH over since's
    or until's own minute, as the count once ran for each, walked both lists of a
    word no item of a source has to their ends (4 to 6 ms at a million items
    where the count's own scan took 2). The trace lists the statements FTS5 runs
    inside a query: a look-up in ``news_search_idx`` for each term it opens, in
    each segment of the index.
    """
    rows = items(200, seed=13)
    insert(db, rows)
    conn = sqlite3.connect(db.conn.execute("PRAGMA database_list").fetchone()[2])
    looked_up: list[str] = []
    conn.set_trace_callback(looked_up.append)
    times = sorted(item.published_at for _, _, item in rows)

    def count(params: dict) -> tuple[int, int, int]:
        looked_up.clear()
        (found,) = conn.execute(SQL["api_news_count"], {"count_limit": SEARCH_COUNT_MAX + 1, **params}).fetchone()
        assert found == db.execute(f"SELECT count(*) {MATCHES}", params).fetchone()[0] > 0, params
        return (found, sum("news_search_idx" in statement for statement in looked_up),
                sum("news_search_by_source_idx" in statement or "news_search_science_idx" in statement
                    for statement in looked_up))

    searches = ("qubit", "qubit -photon", "qubit OR laser", "qubit OR laser -photon")
    for q, (tag, sources) in itertools.product(searches, (("", ""), ("Science", ""), ("Science", json.dumps(["Lab Notes", "Industry Wire"])))):
        search = {"q": fts_query(Words(Q_MAX).parse(q)), "tag": tag, "sources": sources}
        undated, undated_reads, by_source = count({**search, "since": "", "until": ""})
        # no range: the count reads news_search_by_source (each source's range of it, or all of it with no
        # filter), or with a tag alone the tag's own table, not news_search
        assert undated_reads == 0 and by_source > 0
        dated, reads, _ = count({**search, "since": times[20], "until": times[-20]})
        # a page not full is every match: its minute's rest is not read again, one MATCH as the dated count
        page = {**search, "since": "", "until": "", "before": "", "before_id": "", "limit": undated + 1}
        looked_up.clear()
        assert len(conn.execute(SQL["api_news"], page).fetchall()) == undated
        once = sum("news_search_idx" in statement for statement in looked_up)
        if (sources or tag) and undated <= FEW_MATCHES:  # a few matches in the filter: the page is sorted from them all
            index = "news_search_by_source_idx" if sources else "news_search_science_idx"
            assert once == 0 and sum(index in statement for statement in looked_up) > 0
        else:
            assert reads == once
        assert dated < undated and reads > 0
    conn.close()


def test_a_count_by_source_reads_its_own_index_and_follows_every_change(db):
    """news_search_by_source counts what the table holds for each source, after inserts, changes and deletes.

    Its triggers keep it in step with ``news`` as ``news_search``'s do: an item whose
    title, tag or source changes is found under its new ones only, a deleted item nowhere.
    """
    rows = items(150, seed=21)
    insert(db, rows)
    with transaction(db):
        db.execute("UPDATE news SET source = ?, title = title || ' anyon' WHERE rowid % 7 = 0", [SOURCES[1]])
        db.execute("UPDATE news SET tag = 'Investing' WHERE rowid % 5 = 0")
        db.execute("DELETE FROM news WHERE rowid % 11 = 0")
    for q, tag, names in itertools.product(("qubit", "anyon", "qubit -photon", "laser OR fridge"), ("", *TAGS),
                                           ([SOURCES[0]], [SOURCES[1], SOURCES[2]], ["No Such Publisher"])):
        params = {"q": fts_query(Words(Q_MAX).parse(q)), "tag": tag, "sources": json.dumps(names), "since": "", "until": ""}
        (counted,) = db.execute(SQL["api_news_count"], {**params, "count_limit": SEARCH_COUNT_MAX + 1}).fetchone()
        assert counted == db.execute(f"SELECT count(*) {MATCHES}", params).fetchone()[0], params


def test_a_filtered_search_pages_the_same_with_few_matches_or_many(db):
    """Both ways of a page with sources, or a tag alone, either order: all of a few matches sorted, or the newest of many.

    A search whose matches in the sources or tag asked are at most :data:`~qsite.db.news_search_filters.FEW_MATCHES`
    is sorted from all of them (``news_search_by_source``, or the tag's table); with more, its page is
    the newest (or oldest) of ``news_search``. Both are compared with the plain answer, newest and
    oldest first, with ranges and cursors, for searches on either side of the bound.
    """
    insert(db, items(900, seed=31))
    rng = random.Random(32)
    few = many = 0
    for _ in range(150):
        params = random_params(db, rng)
        if rng.random() < 0.5:  # sources, with or without a tag
            params["sources"] = json.dumps(rng.sample(SOURCES, rng.choice((1, 2))))
        else:  # a tag and no source
            params["sources"], params["tag"] = "", rng.choice(TAGS)
        params["q"] = fts(rng.choice(("{a}", "{a} {b}", "{a} -{b}", "{a} OR {b}")).format(**dict(zip("ab", rng.sample(WORDS, 2)))))
        (in_sources,) = db.execute(f"SELECT count(*) {MATCHES}", {**params, "since": "", "until": "", "tag": params["tag"]}).fetchone()
        few, many = few + (in_sources <= FEW_MATCHES), many + (in_sources > FEW_MATCHES)
        columns = "news.id, news.title, url, source, news.summary, tag, published_at, image_url, authors, updated_at"
        newest = db.execute(
            f"""SELECT {columns} {MATCHES} AND (:before = '' OR (published_at, news.id) < (:before, :before_id))
                ORDER BY published_at DESC, news.id DESC LIMIT :limit""", params).fetchall()
        assert db.execute(SQL["api_news"], params).fetchall() == newest, params
        oldest = {**params, "after": params["before"], "after_id": params["before_id"]}
        expected = db.execute(
            f"""SELECT {columns} {MATCHES} AND (:after = '' OR (published_at, news.id) > (:after, :after_id))
                ORDER BY published_at, news.id LIMIT :limit""", oldest).fetchall()
        assert db.execute(SQL["api_news_oldest"], oldest).fetchall() == expected, oldest
    assert few > 20 and many > 20, (few, many)


def tag_table_matches(db, tag: str, q: str) -> set[str]:
    """The ids of the items ``news_search_<tag>`` finds for ``q`` (an FTS5 query)."""
    table = f"news_search_{tag.lower()}"
    return {id_ for (id_,) in db.execute(f"SELECT id FROM news WHERE rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)", [q])}


def plain_tag_matches(db, tag: str, q: str) -> set[str]:
    return {id_ for (id_,) in db.execute(f"SELECT news.id {MATCHES}", {"q": q, "tag": tag, "since": "", "until": "", "sources": ""})}


def test_migration_15_indexes_each_tag_and_its_triggers_follow_every_change(tmp_path):
    """Items stored before m015 are in their tag's table once it runs, and in no other; then each insert,
    change of tag or words, and delete moves them, so the tables always find what ``news_fts`` does by tag."""
    path = tmp_path / "old.db"
    database_before(path, "m015_news_search_tags", SOURCES, items(200, seed=41))
    assert "news_search_science" not in sqlite_utils.Database(path).table_names()
    db = open_database(path)
    searches = [fts(q) for q in ("qubit", "qubit laser", "qubit -photon", "fridge OR anyon")]
    for tag, q in itertools.product(TAGS, searches):
        assert tag_table_matches(db, tag, q) == plain_tag_matches(db, tag, q), (tag, q)
    insert(db, items(60, seed=42, prefix="j"))
    with transaction(db):
        db.execute("UPDATE news SET tag = 'Investing' WHERE rowid % 5 = 0 AND tag <> 'Investing'")
        db.execute("UPDATE news SET summary = summary || ' anyon' WHERE rowid % 7 = 0")
        db.execute("DELETE FROM news WHERE rowid % 11 = 0")
    for tag, q in itertools.product(TAGS, searches):
        assert tag_table_matches(db, tag, q) == plain_tag_matches(db, tag, q), (tag, q)
    assert_searches_match(db, rounds=150, seed=43)
    db.close()


def test_bulk_insert_fills_each_tag_table(tmp_path):
    """The bulk insert builds the tags' tables at once, as row-by-row inserts do through the triggers."""
    db = new_database(tmp_path / "bulk.db")
    with transaction(db):
        news_store.bulk_insert_items(db, items(120, seed=44), "2026-03-02T00:00:00Z")
    for tag, q in itertools.product(TAGS, (fts("qubit"), fts("laser -fridge"))):
        assert tag_table_matches(db, tag, q) == plain_tag_matches(db, tag, q), (tag, q)
    db.close()
