"""A small catalog and news the API tests know by heart, written straight into a real database.

The rows go into a database made by :func:`qsite.pipeline.store.open_database`, with
``data_versions`` bumped as the pipeline does, so the tests know every value
they assert without running an ingest.
"""

from __future__ import annotations

import atexit
import json
import shutil
import sqlite3
import tempfile
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlite_utils

from qsite.db.migrations import migrations
from qsite.db.model import TAGS
from qsite.pipeline.store.records import item_id
from qsite.pipeline.store import bump_version, bump_versions, open_database

CATALOG_AT = "2026-11-20T08:00:00Z"
NEWS_AT = "2026-11-20T09:30:00Z"
NEWS_START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
SOURCES = {"Science": "Lab Notes", "Industry": "Industry Wire", "Investing": "Capital Brief"}

COURSES = [
    {
        "id": "quantum-basics",
        "position": 1,
        "title": "Quantum Basics",
        "summary": "Qubits and what they do.",
        "level": "beginner",
        "url": "https://academy.example/courses/quantum-basics",
        "section_count": 2,
        "slide_count": 14,
    },
    {
        "id": "algorithms",
        "position": 2,
        "title": "Algorithms",
        "summary": "Grover and Shor.",
        "level": None,
        "url": "https://academy.example/courses/algorithms",
        "section_count": 1,
        "slide_count": 6,
    },
]
SECTIONS = [
    {"course_id": "quantum-basics", "id": "qubits", "position": 1, "title": "Qubits", "url": "https://academy.example/q/qubits", "slide_count": 9},
    {"course_id": "quantum-basics", "id": "gates", "position": 2, "title": "Gates", "url": None, "slide_count": 5},
    {"course_id": "algorithms", "id": "grover", "position": 1, "title": "Grover", "url": "https://academy.example/a/grover", "slide_count": 6},
]
GLOSSARY = [
    {"id": "superposition", "term": "Superposition", "definition": "A qubit holding a blend of 0 and 1 until measured."},
    {"id": "bloch-sphere", "term": "bloch sphere", "definition": "A picture of one qubit's state as a point on a sphere."},
    {"id": "entanglement", "term": "Entanglement", "definition": "Qubits whose measurement outcomes stay correlated."},
    {"id": "amplitude", "term": "Amplitude", "definition": "The complex number whose square gives a probability."},
    {"id": "qubit", "term": "Qubit", "definition": "The quantum bit: two states and every superposition of them."},
]
TOTALS = {"id": 1, "site_name": "Academy", "site_base_url": "https://academy.example", "exported_at": CATALOG_AT,
          "courses": 2, "slides": 20, "quizzes": 3, "question_bank_size": 42, "glossary_terms": 5}


def news_id(i: int, prefix: str = "item") -> str:
    """The id of item ``i`` of :func:`news_items`: made from its URL, as the pipeline makes ids."""
    return item_id(f"https://news.example/{prefix}/{i}")


def news_items(count: int, start: datetime = NEWS_START, prefix: str = "item") -> list[dict]:
    """``count`` items an hour apart, newest first, tags in turn; items 3 and 4 share a time."""
    items = []
    for i in range(count):
        published = start - timedelta(hours=i if i != 4 else 3)
        tag = TAGS[i % 3]
        items.append(
            {
                "id": news_id(i, prefix),
                "url": f"https://news.example/{prefix}/{i}",
                "title": f"Headline {i} é",
                "summary": f"Summary of {prefix} {i}",
                "source": SOURCES[tag],
                "tag": tag,
                "published_at": published.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "first_seen_at": NEWS_AT,
                "updated_at": NEWS_AT,
            }
        )
    return items


def seed_catalog(db, changed_at: str = CATALOG_AT) -> None:
    """Write :data:`COURSES`, :data:`SECTIONS`, :data:`GLOSSARY` and :data:`TOTALS`; bump their datasets."""
    db["courses"].insert_all(COURSES)
    db["sections"].insert_all(SECTIONS)
    db["glossary"].insert_all(
        [{**entry, "lesson_title": "Qubits", "lesson_url": "https://academy.example/q/qubits",
          "course_id": "quantum-basics", "section_id": "qubits"} for entry in GLOSSARY]
    )
    db["site_totals"].insert(TOTALS)
    bump_versions(db, ("catalog", "glossary", "totals"), changed_at)


def seed_news(db, items: list[dict], changed_at: str = NEWS_AT) -> None:
    """Write the three :data:`SOURCES` (once) and ``items``; bump the news dataset."""
    db["sources"].insert_all(
        [{"name": name, "url": f"https://{tag.lower()}.example/feed", "tag": tag} for tag, name in SOURCES.items()],
        ignore=True,
    )
    db["news"].insert_all(items)
    bump_version(db, "news", changed_at)


#: The database :func:`seeded_database` copies, for each number of news items (built on first use).
_TEMPLATES: dict[int, Path] = {}


def seeded_database(path, news: int = 45):
    """A database at ``path`` holding the known catalog and ``news`` items of :func:`news_items`; the caller closes it.

    The rows hold no time of the run, so each test process builds the database
    once for each ``news`` and copies it (SQLite's backup API) for every later
    test: building it (migrations, then the rows) took 80 ms, 250 times a run.
    """
    template = _TEMPLATES.get(news)
    if template is None:
        folder = tempfile.mkdtemp(prefix="qsite-seeded-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = Path(folder) / f"seeded-{news}.db"
        db = open_database(template)
        seed_catalog(db)
        seed_news(db, news_items(news))
        db.close()
        _TEMPLATES[news] = template
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return open_database(path)


def database_before(path, migration: str, sources, rows) -> None:
    """Write a database at ``path`` as an older qsite left it: the migrations before ``migration``, then ``rows``.

    ``sources`` are publisher names; ``rows`` are ``(source, id, Item)`` news
    items, inserted as plain rows (no trigger of a later migration sees them).
    """
    old = sqlite_utils.Database(path)
    migrations.apply(old, stop_before=migration)
    old["sources"].insert_all([{"name": name, "url": "https://x.example/feed", "tag": "Science"} for name in sources])
    old["news"].insert_all(
        {"id": id_, "entry_key": item.key, "url": item.url, "title": item.title, "summary": item.summary, "source": source,
         "tag": item.tag, "published_at": item.published_at, "first_seen_at": "x", "updated_at": "x"}
        for source, id_, item in rows
    )
    old.close()


def seeded_serve_config(folder: Path, api: dict) -> Path:
    """``folder/qsite.yml`` for a ``qsite serve`` over a :func:`seeded_database` at ``folder/site.db``,
    with ``api`` settings (the site export is never fetched by ``serve``)."""
    seeded_database(folder / "site.db").close()
    config = folder / "qsite.yml"
    config.write_text(json.dumps({"database": str(folder / "site.db"), "site_export": {"source": "x.json"}, "api": api}), encoding="utf-8")
    return config
