"""The sample export's quiz content and user data appear in no table, no response and no log line.

The bundled export carries quiz questions with answers and explanations, a
question bank, and a ``users`` block with names, e-mail addresses and password
hashes. After ingesting it (at DEBUG logging, and once more as a rejected
export), none of those strings may be in any cell of any table (full-text
shadow tables included), in any /api/v1 or Datasette JSON/CSV response, or in
any line the ingest or the server logged.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.support.paths import FEEDS, SITE_EXPORT
from tests.support.processes import qsite_serve, run_qsite

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "secrets.json"
#: Shorter strings (an answer of "2") would match innocent text; these are all distinctive.
MIN_LENGTH = 12


def secrets_of(export: dict) -> set[str]:
    found: set[str] = set()

    def walk(value):
        if isinstance(value, str):
            if len(value) >= MIN_LENGTH and any(char.isalpha() for char in value):  # not bare numbers
                found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for course in export["courses"]:
        for section in course["sections"]:
            quiz = section.get("quiz") or {}
            for question in quiz.get("questions", []):
                walk({key: question.get(key) for key in ("prompt", "answer", "explanation", "choices")})
    for question in export["question_bank"]:
        walk({key: question.get(key) for key in ("prompt", "answer", "explanation", "choices")})
    for user in export.get("users", []):
        walk({key: value for key, value in user.items() if key not in ("joined", "role")})
    # An answer may legitimately be a public word too ("Superposition" is a section title).
    public = json.dumps([export["site"], export["glossary"], [
        {key: value for key, value in course.items() if key != "sections"}
        | {"sections": [{k: v for k, v in section.items() if k != "quiz"} for section in course["sections"]]}
        for course in export["courses"]
    ]], ensure_ascii=False)
    return {secret for secret in found if secret not in public}


def leaks(text: str, secrets: set[str]) -> list[str]:
    return [secret for secret in secrets if secret in text]


@pytest.fixture(scope="module")
def secrets():
    export = json.loads(SITE_EXPORT.read_text(encoding="utf-8"))
    found = secrets_of(export)
    emails = [s for s in found if "@" in s]
    assert len(emails) >= 3 and len(found) > 100, "the sample must carry quiz answers and user e-mails to test"
    return found


def test_no_table_response_or_log_line_holds_quiz_content_or_user_data(make_config, tmp_path, secrets, sample_export):
    news = {"sources": [
        {"name": "Quantum Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
        {"name": "Quantum Capital Brief", "url": str(FEEDS / "capital-brief.rdf"), "tag": "Investing"},
    ]}
    config = make_config(api={"rate_limit": "off"}, news=news)
    env = {"QSITE_LOG_LEVEL": "DEBUG"}
    logs = []
    result = run_qsite("ingest", "all", "--config", str(config), env=env)
    assert result.returncode == 0, result.stderr
    logs.append(result.stdout + result.stderr)

    # A rejected export (a broken section next to its quiz) must not quote the quiz either.
    broken = json.loads(json.dumps(sample_export))
    section = next(s for c in broken["courses"] for s in c["sections"] if s.get("quiz"))
    section["slide_count"] = "many"
    section.pop("slides", None)
    section["quiz"]["questions"][0]["answer"] = {"not": "a string"}
    (tmp_path / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    broken_config = make_config(api={"rate_limit": "off"}, site_export={"source": str(tmp_path / "broken.json")})
    rejected = run_qsite("ingest", "site", "--config", str(broken_config), env=env)
    assert rejected.returncode == 1
    logs.append(rejected.stdout + rejected.stderr)
    config = make_config(api={"rate_limit": "off"}, news=news)  # back to the good export for serving

    # Every cell of every table, shadow tables included.
    db_path = tmp_path / "site.db"
    conn = sqlite3.connect(db_path)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert {"courses", "sections", "glossary", "news", "ingest_runs", "glossary_fts"} <= set(tables)
    cells = 0
    for table in tables:
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            for value in row:
                if isinstance(value, (str, bytes)):
                    cells += 1
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                    assert not leaks(text, secrets), f"{table} holds {leaks(text, secrets)[:2]}"
    conn.close()

    # Every response: the API, and Datasette's JSON and CSV of every table and canned query.
    paths = ["/api/v1", "/api/v1/openapi.json", "/api/v1/courses", "/api/v1/glossary", "/api/v1/news?limit=100", "/api/v1/stats",
             "/api/v1/glossary?q=qubit", "/-/metadata.json", "/site.json"]
    responses = 0
    with qsite_serve(config, tmp_path / "serve.log", env=env) as served:
        with httpx.Client(base_url=served.base, timeout=20) as client:
            database = client.get("/site.json").json()
            for table in database["tables"]:
                name = table["name"]
                paths += [f"/site/{name}.json?_shape=array&_size=max", f"/site/{name}.csv?_size=max"]
            paths += [f"/site/{query['name']}.json?_shape=array" for query in database.get("queries", [])]
            for path in paths:
                response = client.get(path)
                responses += 1
                assert response.status_code in (200, 400), (path, response.status_code)
                assert not leaks(response.text, secrets), f"{path} shows {leaks(response.text, secrets)[:2]}"
            for entry in client.get("/api/v1/glossary").json()["results"]:
                response = client.get(f"/api/v1/glossary/{entry['id']}")
                responses += 1
                assert not leaks(response.text, secrets)
    logs.append((tmp_path / "serve.log").read_text())
    lines = "\n".join(logs).splitlines()
    assert len(lines) > 10
    for line in lines:
        assert not leaks(line, secrets), f"log line shows {leaks(line, secrets)[:2]}: {line[:200]}"
    assert cells > 500 and responses > 100
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps({"secrets": len(secrets), "tables": len(tables), "cells": cells, "responses": responses, "log_lines": len(lines)}))
