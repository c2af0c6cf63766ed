"""The news queries in datasette.yaml are generated from db/news_queries.py: the index layout said once."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from qsite.db import news_queries
from qsite.db.news_derived import SEARCH_ROWID_BITS, SEARCH_ROWID_MASK
from tests.support.paths import ROOT

DATASETTE_YAML = ROOT / "datasette.yaml"


def queries() -> dict:
    return yaml.safe_load(DATASETTE_YAML.read_text(encoding="utf-8"))["databases"]["site"]["queries"]


def test_datasette_yaml_holds_the_generated_queries():
    # make cog writes them; this fails while the file and db/news_queries.py differ
    done = subprocess.run([sys.executable, "-m", "cogapp", "--check", "-I", str(ROOT), str(DATASETTE_YAML)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr + "\nrun: make cog"
    served = queries()
    for name in news_queries.TEMPLATES:
        assert served[name]["sql"] == news_queries.render(name)


def test_the_layout_numbers_appear_only_where_they_are_generated():
    text = DATASETTE_YAML.read_text(encoding="utf-8")
    outside = re.sub(r"\[\[\[cog.*?\[\[\[end\]\]\]", "", text, flags=re.S)
    for number in (SEARCH_ROWID_MASK, SEARCH_ROWID_MASK + 1, 1 << 62):
        assert str(number) not in outside
    assert f"<< {SEARCH_ROWID_BITS}" not in outside


def test_a_changed_layout_changes_every_query(monkeypatch):
    # the templates name the layout: another width of the rowid part reaches each query and the search
    monkeypatch.setitem(news_queries.LAYOUT, "ROWID_BITS", "40")
    monkeypatch.setitem(news_queries.LAYOUT, "TAG_COLUMNS", "'physics'")
    for name in news_queries.TEMPLATES:
        sql = news_queries.render(name)
        assert "<< 40" in sql and f"<< {SEARCH_ROWID_BITS}" not in sql
        assert "in ('physics')" in sql and sql.count("search (expr) as (") == 1
