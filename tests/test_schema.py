"""The schema's foreign keys: declared by the migrations and enforced on every connection the pipeline opens."""

from __future__ import annotations

import sqlite3

import pytest

from qsite.pipeline.store import open_database


def foreign_keys(db, table: str) -> set[tuple]:
    """``(from, to table, to column, on delete)`` for each column of each foreign key of ``table``."""
    return {(row[3], row[2], row[4], row[6]) for row in db.execute(f"PRAGMA foreign_key_list({table})").fetchall()}


@pytest.fixture
def db(tmp_path):
    db = open_database(tmp_path / "site.db")
    yield db
    db.close()


def test_foreign_keys_are_declared(db):
    assert foreign_keys(db, "sections") == {("course_id", "courses", "id", "CASCADE")}
    assert foreign_keys(db, "glossary") == {
        ("course_id", "sections", "course_id", "SET NULL"),
        ("section_id", "sections", "id", "SET NULL"),
    }
    assert foreign_keys(db, "news") == {("source", "sources", "name", "NO ACTION")}


def test_foreign_keys_are_enforced(db):
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        db.execute("INSERT INTO sections (course_id, id, position, title, slide_count) VALUES ('no-such-course', 's', 0, 'S', 1)")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        db.execute(
            """INSERT INTO news (id, url, title, summary, source, tag, published_at, first_seen_at, updated_at)
               VALUES ('n', 'https://x.example/n', 'T', 'S', 'No Such Source', 'Science', '2026-11-20T08:00:00Z', 'a', 'a')"""
        )
    assert db.execute("SELECT count(*) FROM sections").fetchone()[0] == 0


def test_deleting_a_course_takes_its_sections_and_unlinks_its_glossary_terms(db):
    db.execute(
        "INSERT INTO courses (id, position, title, summary, url, section_count, slide_count) VALUES ('c', 0, 'C', '', 'u', 1, 1)"
    )
    db.execute("INSERT INTO sections (course_id, id, position, title, slide_count) VALUES ('c', 's', 0, 'S', 1)")
    db.execute(
        """INSERT INTO glossary (id, term, definition, lesson_title, lesson_url, course_id, section_id)
           VALUES ('g', 'qubit', 'd', 'L', 'u', 'c', 's')"""
    )
    db.execute("DELETE FROM courses WHERE id = 'c'")
    assert db.execute("SELECT count(*) FROM sections").fetchone()[0] == 0
    assert db.execute("SELECT term, course_id, section_id FROM glossary").fetchall() == [("qubit", None, None)]
