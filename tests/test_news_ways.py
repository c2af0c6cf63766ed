"""A page read by its way's arms alone is the page the whole canned query reads (docs/invariants.md).

``api_news`` and ``api_news_oldest`` hold arms for each way in (no filter, a tag, sources, a
search with a tag or sources, a search), each behind its ways' constant conditions; the API runs
only the arms of the way a page's parameters take (:func:`qsite.db.news_arms.way_in`), which
saves setting up the others on every request. ``TestWaysReadTheWholeQuerysPage`` holds the two together over random
sequences of writes (items added in bursts that share words, re-tagged, moved to another
source, deleted) and random pages of every shape, in both orders.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from qsite.db.model import TAGS
from qsite.db.news_arms import WAYS, way_in
from qsite.db.news_queries import DIRECTIONS, SORTED_BY_CALLER, by_way, in_page_order, render
from qsite.pipeline.store import open_database
from qsite.service.api.bodies import Build
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.news_bodies import news
from qsite.service.api.parameters import parse_params
from qsite.service.api.search_language import fts_query
from qsite.service.datasette.metadata import configured_queries, query_sql
from tests.support.known_data import news_items, seed_news

PAGE_QUERIES = [name for name in DIRECTIONS if DIRECTIONS[name]]
SOURCE_NAMES = ("Lab Notes", "Industry Wire", "Capital Brief", "Cold Atoms")
#: Few words, so that searches match often (past FEW_MATCHES in a filter) and seldom alike.
WORDS = ("qubit", "photon", "ion", "funding", "error", "chip")
TIMES = [f"2026-11-{day:02d}T{hour:02d}:{minute:02d}:00Z" for day in (18, 19, 20) for hour in (3, 9) for minute in (0, 30)]


def page(conn: sqlite3.Connection, sql: str, params: dict) -> list[dict]:
    cursor = conn.execute(sql, params)
    columns = [column[0] for column in cursor.description]
    return [dict(zip(columns, row)) for row in cursor]


@settings(max_examples=25, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
class TestWaysReadTheWholeQuerysPage(RuleBasedStateMachine):
    @initialize()
    def database(self):
        self.folder = tempfile.TemporaryDirectory(prefix="qsite-ways-")
        db = open_database(Path(self.folder.name) / "site.db")
        seed_news(db, [])
        db["sources"].insert({"name": SOURCE_NAMES[3], "url": "https://atoms.example/feed", "tag": "Science"})
        self.db = db
        self.whole = {name: render(name) for name in PAGE_QUERIES}
        self.ways = {name: {way: render(name, way) for way in WAYS} for name in PAGE_QUERIES}
        self.next_id = 0
        # never empty, and from the start a word matching past FEW_MATCHES (50) in a source and a tag
        for number, (tag, source) in enumerate(zip(TAGS, SOURCE_NAMES)):
            self.add_a_burst(30 + 15 * number, list(WORDS[number:number + 3]), tag, source, TIMES[number::3])

    def teardown(self):
        if hasattr(self, "db"):
            self.db.conn.close()
            self.folder.cleanup()

    @rule(count=st.integers(1, 40), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
          tag=st.sampled_from(TAGS), source=st.sampled_from(SOURCE_NAMES), times=st.lists(st.sampled_from(TIMES), min_size=1, max_size=4))
    def add_a_burst(self, count, words, tag, source, times):
        """``count`` items sharing words, a tag and a source, at a few times (ties included)."""
        items = []
        for i in range(count):
            self.next_id += 1
            items.append({
                "id": f"{self.next_id:040x}", "url": f"https://news.example/{self.next_id}",
                "title": " ".join(words) + f" {i}", "summary": f"About {words[i % len(words)]}",
                "source": source, "tag": tag, "published_at": times[i % len(times)],
                "first_seen_at": times[0], "updated_at": times[0], "authors": json.dumps(["A"]),
                "change_key": f"{times[0]}#{self.next_id:09d}",
            })
        with self.db.conn:
            self.db["news"].insert_all(items)

    @rule(data=st.data())
    def retag_or_move_or_delete(self, data):
        ids = [row[0] for row in self.db.conn.execute("select id from news")]
        if not ids:
            return
        chosen = data.draw(st.lists(st.sampled_from(ids), max_size=10, unique=True))
        what = data.draw(st.sampled_from(["tag", "source", "delete"]))
        with self.db.conn:
            for item_id in chosen:
                if what == "delete":
                    self.db.conn.execute("delete from news where id = ?", [item_id])
                elif what == "tag":
                    self.db.conn.execute("update news set tag = ? where id = ?", [data.draw(st.sampled_from(TAGS)), item_id])
                else:
                    self.db.conn.execute("update news set source = ? where id = ?", [data.draw(st.sampled_from(SOURCE_NAMES)), item_id])

    @rule(data=st.data())
    def read_a_page(self, data):
        """A page of any shape: its way's arms read exactly what the whole query reads."""
        conn = self.db.conn
        positions = conn.execute("select published_at, id from news").fetchall()
        at, at_id = data.draw(st.one_of(st.just(("", "")), st.sampled_from(positions)) if positions else st.just(("", "")))
        names = data.draw(st.lists(st.sampled_from([*SOURCE_NAMES, "No Such Source"]), max_size=2, unique=True))
        params = {
            "tag": data.draw(st.one_of(st.just(""), st.sampled_from([*TAGS, "science", "Nope"]))),  # a tag's name in any case; none
            "sources": json.dumps(names) if names else "",
            "q": fts_query(data.draw(st.sampled_from([None, "qubit", "photon ion", "funding OR chip", "error -chip", "absent"]))),
            "since": data.draw(st.one_of(st.just(""), st.sampled_from(TIMES))),
            "until": data.draw(st.one_of(st.just(""), st.sampled_from(TIMES))),
            "limit": data.draw(st.integers(1, 25)),
        }
        name = data.draw(st.sampled_from(PAGE_QUERIES))
        keys = ("before", "before_id") if name == "api_news" else ("after", "after_id")
        params |= dict(zip(keys, (at, at_id)))
        way = way_in(params)
        whole = page(conn, self.whole[name], params)
        rows = page(conn, self.ways[name][way], params)
        if way in SORTED_BY_CALLER:  # as the API reads them (news_bodies.page_rows)
            rows = in_page_order(rows, name == "api_news_oldest", params["limit"])
        assert rows == whole, (name, way, params)

    @invariant()
    def the_whole_query_is_the_canned_one(self):
        # what the ways are checked against is what researchers read in datasette.yaml
        if hasattr(self, "whole"):
            served = query_sql(configured_queries())
            assert self.whole == {name: served[name.removeprefix("api_")] for name in PAGE_QUERIES}


TestWaysReadTheWholeQuerysPage = TestWaysReadTheWholeQuerysPage.TestCase


def test_each_way_is_the_whole_query_less_the_other_ways_arms():
    for name in PAGE_QUERIES:
        whole = render(name)
        for way in WAYS:
            arms = render(name, way)
            # the whole query's lines, some left out (the other ways' arms), none changed or added
            lines = iter(whole.split("\n"))
            assert all(line in lines for line in arms.split("\n"))
            assert len(arms) < len(whole)
            order = whole[whole.rindex("\norder by"):]
            # the page's order and limit, or none where the API sorts the few rows read itself
            assert arms.endswith(order) != (way in SORTED_BY_CALLER)
            assert order.count("\n") == 2


def test_a_canned_query_edited_in_datasette_yaml_runs_whole():
    queries = configured_queries()
    assert {f"news.{way}" for way in WAYS} <= set(query_sql(queries))
    queries["api_news"]["sql"] += "\n-- edited"
    found = query_sql(queries)
    assert not any(name.startswith("news.") for name in found)
    assert {f"news_oldest.{way}" for way in WAYS} <= set(found)
    assert by_way("api_news_count", render("api_news_count")) == {}


@pytest.mark.parametrize(("query", "way"), [
    ("", "plain"), ("tag=Science", "tag"), ("source=Lab%20Notes&tag=Science", "sources"),
    ("q=headline&source=Lab%20Notes", "filtered_search"),
    ("q=headline", "search"), ("q=headline&tag=Science&sort=published_at", "filtered_search"), ("sort=published_at&tag=Industry", "tag"),
])
def test_the_api_runs_only_the_arms_of_its_way(tmp_path, query, way):
    db = open_database(tmp_path / "site.db")
    seed_news(db, news_items(30))
    db.conn.close()
    ran = []

    class Recording(sqlite3.Connection):
        def execute(self, sql, *args):
            ran.append(sql)
            return super().execute(sql, *args)

    conn = sqlite3.connect(tmp_path / "site.db", factory=Recording)
    endpoint = ENDPOINTS["news"]
    values, errors = parse_params(endpoint.params, query.encode())
    assert not errors
    sql = query_sql(configured_queries())
    payload, _ = news(Build(endpoint, values, None, conn, sql, read_versions(conn)))
    assert payload["results"]
    name = "api_news_oldest" if "sort=" in query else "api_news"
    assert [statement for statement in ran if statement.startswith("with bound")] == [render(name, way)]
