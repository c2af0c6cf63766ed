"""`qsite status`: the bookkeeping of a known database, as a table and as stable JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.store import open_database

SAMPLE_EXPORT = Path(__file__).resolve().parent.parent / "pipeline" / "samples" / "site-export.json"


@pytest.fixture
def known_db(tmp_path, make_config):
    """A database with hand-written bookkeeping, and a config listing two sources (one never fetched)."""
    config = make_config(
        news={
            "every": "15m",
            "sources": [
                {"name": "Lab Notes", "url": "https://example.org/lab.xml", "tag": "Science"},
                {"name": "New Feed", "url": "https://example.org/new.xml", "tag": "Industry"},
            ],
        }
    )
    db = open_database(tmp_path / "site.db")
    db["site_totals"].insert(
        {"id": 1, "site_name": "Q", "site_base_url": "https://q.example", "exported_at": "2026-11-20T08:00:00Z",
         "courses": 6, "slides": 412, "quizzes": 38, "question_bank_size": 950, "glossary_terms": 120}
    )
    db["export_state"].insert({"source": "site", "etag": '"e1"', "fetched_at": "2026-11-20T09:00:00Z"})
    db["data_versions"].insert_all(
        [
            {"dataset": "catalog", "version": 2, "changed_at": "2026-11-20T09:00:00Z"},
            {"dataset": "news", "version": 5, "changed_at": "2026-11-21T10:30:00Z"},
        ]
    )
    db["ingest_runs"].insert_all(
        [
            {"kind": "site", "source": "site", "started_at": "2026-11-20T08:59:59Z", "finished_at": "2026-11-20T09:00:00Z",
             "status": "ok", "counts": '{"courses": 6}', "error": None},
            {"kind": "site", "source": "site", "started_at": "2026-11-21T09:00:00Z", "finished_at": "2026-11-21T09:00:01Z",
             "status": "failed", "counts": "{}", "error": "HTTP 500 from https://q.example/export.json"},
            {"kind": "news", "source": "Lab Notes", "started_at": "2026-11-21T10:30:00Z",
             "finished_at": "2026-11-21T10:30:01Z", "status": "ok", "counts": "{}", "error": None},
        ]
    )
    db["sources"].insert_all(
        [
            {"name": "Lab Notes", "url": "https://example.org/lab.xml", "tag": "Science",
             "last_fetch_at": "2026-11-21T10:30:00Z", "last_status": "ok", "consecutive_failures": 0,
             "next_fetch_at": "2026-11-21T10:45:00Z", "disabled": 0},
            {"name": "Old Feed", "url": "https://example.org/old.xml", "tag": "Investing",
             "last_fetch_at": "2026-11-21T10:30:00Z", "last_status": "failed", "last_error": "HTTP 410 Gone",
             "consecutive_failures": 3, "next_fetch_at": None, "disabled": 1},
        ]
    )
    item = {"summary": "s", "tag": "Science", "published_at": "2026-11-21T10:00:00Z",
            "first_seen_at": "2026-11-21T10:30:00Z", "updated_at": "2026-11-21T10:30:00Z"}
    db["news"].insert_all(
        [
            {**item, "id": "a", "url": "https://example.org/a", "title": "A", "source": "Lab Notes"},
            {**item, "id": "b", "url": "https://example.org/b", "title": "B", "source": "Lab Notes"},
            {**item, "id": "c", "url": "https://example.org/c", "title": "C", "source": "Old Feed", "tag": "Investing"},
        ]
    )
    db.close()
    return config


def test_status_json_reports_the_known_database(qsite, known_db, tmp_path):
    result = qsite("status", "--json", "--config", str(known_db))
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    generated = status.pop("generated_at")
    assert generated.endswith("Z")
    assert status == {
        "database": str(tmp_path / "site.db"),
        "ingest_running": False,
        "data_version": {
            "version": 7,
            "changed_at": "2026-11-21T10:30:00Z",
            "datasets": {
                "catalog": {"version": 2, "changed_at": "2026-11-20T09:00:00Z"},
                "news": {"version": 5, "changed_at": "2026-11-21T10:30:00Z"},
            },
        },
        "site_export": {
            "source": str(SAMPLE_EXPORT),  # as the config gives it
            "every": 3600,
            "fetched_at": "2026-11-20T09:00:00Z",
            "last_run": {
                "id": 2,
                "status": "failed",
                "started_at": "2026-11-21T09:00:00Z",
                "finished_at": "2026-11-21T09:00:01Z",
                "counts": {},
                "error": "HTTP 500 from https://q.example/export.json",
            },
            "last_success_at": "2026-11-20T09:00:00Z",
        },
        "totals": {
            "courses": 6,
            "slides": 412,
            "quizzes": 38,
            "question_bank_size": 950,
            "glossary_terms": 120,
            "news_items": 3,
            "exported_at": "2026-11-20T08:00:00Z",
        },
        "sources": [
            {"name": "Lab Notes", "url": "https://example.org/lab.xml", "tag": "Science", "configured": True,
             "disabled": False, "last_fetch_at": "2026-11-21T10:30:00Z", "last_status": "ok", "last_error": None,
             "consecutive_failures": 0, "next_fetch_at": "2026-11-21T10:45:00Z", "items": 2},
            {"name": "New Feed", "url": "https://example.org/new.xml", "tag": "Industry", "configured": True,
             "disabled": False, "last_fetch_at": None, "last_status": None, "last_error": None,
             "consecutive_failures": 0, "next_fetch_at": None, "items": 0},
            {"name": "Old Feed", "url": "https://example.org/old.xml", "tag": "Investing", "configured": False,
             "disabled": True, "last_fetch_at": "2026-11-21T10:30:00Z", "last_status": "failed",
             "last_error": "HTTP 410 Gone", "consecutive_failures": 3, "next_fetch_at": None, "items": 1},
        ],
    }


def test_status_table_is_readable(qsite, known_db):
    result = qsite("status", "--config", str(known_db))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "data version    7 (last change 2026-11-21T10:30:00Z)" in out
    assert "#2 failed" in out and "HTTP 500 from https://q.example/export.json" in out
    assert "last success  2026-11-20T09:00:00Z" in out
    lines = out.splitlines()
    old = next(line for line in lines if line.startswith("Old Feed"))
    assert "Investing" in old and "failed (disabled) (not in config)" in old and "HTTP 410 Gone" in old
    lab = next(line for line in lines if line.startswith("Lab Notes"))
    assert "2026-11-21T10:45:00Z" in lab and lab.split()[-1] == "-"  # no error
    assert any("412" in line and "950" in line for line in lines)


def test_status_without_a_database_says_so(qsite, make_config, tmp_path):
    result = qsite("status", "--json", "--config", str(make_config()))
    assert result.returncode == 1
    assert "no database yet" in result.stderr and str(tmp_path / "site.db") in result.stderr
    assert not (tmp_path / "site.db").exists()


def test_status_shows_a_running_ingest(qsite, known_db, tmp_path):
    from pipeline.lock import writer_lock

    with writer_lock(tmp_path / "site.db", 0):
        result = qsite("status", "--json", "--config", str(known_db))
    assert json.loads(result.stdout)["ingest_running"] is True
