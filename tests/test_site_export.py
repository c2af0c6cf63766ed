"""Ingesting the site export: every rule of export format v1, against real SQLite files and a real HTTP server."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading

import pytest

from qsite.config import load_config
from qsite.pipeline.site.catalog_rows import slugify
from qsite.pipeline.site.ingest import ingest_site
from qsite.pipeline.store import open_database
from tests.support.local_server import Reply
from tests.support.paths import SITE_EXPORT
from tests.support.processes import free_port
from tests.support.snapshot import snapshot

FAST = {"connect_timeout": 0.5, "read_timeout": 0.5, "deadline": 5}
#: Every table the export owns, so "nothing changed" can be asserted exactly.
EXPORT_TABLES = ("courses", "sections", "glossary", "site_totals", "data_versions", "export_state")


def versions(db) -> dict:
    return dict(db.execute("SELECT dataset, version FROM data_versions").fetchall())


def runs(db) -> list[dict]:
    return [dict(row) for row in db.query("SELECT * FROM ingest_runs ORDER BY id")]


def write_export(tmp_path, data, name="export.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def setup(make_config):
    """``setup(source)`` -> (config, db) with the database in tmp_path."""
    opened = []

    def make(source=None):
        overrides = {"site_export": {"source": source}} if source else {}
        config = load_config(make_config(**overrides))
        db = open_database(config.database_path)
        opened.append(db)
        return config, db

    yield make
    for db in opened:
        db.conn.close()


@pytest.fixture
def loaded(setup, tmp_path, sample_export):
    """A database holding the sample, and a way to ingest another export into it."""
    config, db = setup()
    assert ingest_site(db, config).status == "ok"

    def ingest(data, **client_options):
        other = load_config(config.path).model_copy(
            update={"site_export": config.site_export.model_copy(update={"source": write_export(tmp_path, data)})}
        )
        return ingest_site(db, other, client_options or None)

    return db, ingest


# --- the sample -----------------------------------------------------------------


def test_sample_lands_in_order_with_counts_and_totals(setup, sample_export):
    config, db = setup()
    report = ingest_site(db, config)
    assert report.status == "ok", report.line()

    courses = sample_export["courses"]
    assert [row["id"] for row in db.query("SELECT id FROM courses ORDER BY position")] == [c["id"] for c in courses]
    assert len(courses) == 6 and 35 <= sum(len(c["sections"]) for c in courses) <= 45

    def slides(section):
        return len(section["slides"]) if "slides" in section else section["slide_count"]

    for course in courses:
        row = db.execute(
            "SELECT title, summary, level, url, section_count, slide_count FROM courses WHERE id = ?", [course["id"]]
        ).fetchone()
        assert row == (
            course["title"],
            course["summary"],
            course.get("level"),
            course["url"],
            len(course["sections"]),
            sum(slides(s) for s in course["sections"]),
        )
        stored = db.execute(
            "SELECT id, title, url, slide_count FROM sections WHERE course_id = ? ORDER BY position", [course["id"]]
        ).fetchall()
        assert stored == [(s["id"], s["title"], s.get("url"), slides(s)) for s in course["sections"]]

    # the sample uses both ways of giving slides, and optional keys both ways
    all_sections = [s for c in courses for s in c["sections"]]
    assert any("slides" in s for s in all_sections) and any("slide_count" in s for s in all_sections)
    assert any("url" not in s for s in all_sections) and any("level" not in c for c in courses)

    quizzes = sum(1 for s in all_sections if "quiz" in s)
    totals = next(db.query("SELECT * FROM site_totals"))
    assert totals == {
        "id": 1,
        "site_name": sample_export["site"]["name"],
        "site_base_url": sample_export["site"]["base_url"],
        "exported_at": sample_export["exported_at"],
        "courses": 6,
        "slides": sum(slides(s) for s in all_sections),
        "quizzes": quizzes,
        "question_bank_size": len(sample_export["question_bank"]),
        "glossary_terms": len(sample_export["glossary"]),
    }
    assert quizzes >= 20 and len(sample_export["question_bank"]) >= 200 and 90 <= len(sample_export["glossary"]) <= 120
    assert report.counts == {
        "courses": 6,
        "sections": len(all_sections),
        "slides": totals["slides"],
        "quizzes": quizzes,
        "question_bank": totals["question_bank_size"],
        "glossary": totals["glossary_terms"],
    }
    assert versions(db) == {"catalog": 1, "glossary": 1, "totals": 1}
    [run] = runs(db)
    assert (run["kind"], run["source"], run["status"], run["error"]) == ("site", SITE_EXPORT.name, "ok", None)
    assert json.loads(run["counts"]) == report.counts and run["started_at"] <= run["finished_at"]


def test_glossary_lesson_links_resolve(setup, sample_export):
    config, db = setup()
    ingest_site(db, config)
    sections = {(c["id"], s["id"]): (s["title"], s.get("url"), c["url"]) for c in sample_export["courses"] for s in c["sections"]}
    by_url = {url: key for key, (_, url, _) in sections.items() if url}
    courses = {c["url"]: (c["id"], c["title"]) for c in sample_export["courses"]}
    rows = {row["term"]: row for row in db.query("SELECT * FROM glossary")}
    kinds = set()
    for entry in sample_export["glossary"]:
        row = rows[entry["term"]]
        assert row["definition"] == entry["definition"] and row["id"] == slugify(entry["term"])
        if "lesson" in entry:
            key = (entry["lesson"]["course"], entry["lesson"]["section"])
            title, url, course_url = sections[key]
            # a section without a page of its own links to its course's page
            assert (row["lesson_title"], row["lesson_url"]) == (title, url or course_url)
            assert (row["course_id"], row["section_id"]) == key
            kinds.add("lesson" if url else "lesson-no-url")
        elif entry["lesson_url"] in by_url:
            key = by_url[entry["lesson_url"]]
            assert (row["lesson_title"], row["lesson_url"], row["course_id"], row["section_id"]) == (
                sections[key][0], entry["lesson_url"], *key)
            kinds.add("url-section")
        elif entry["lesson_url"] in courses:
            course_id, title = courses[entry["lesson_url"]]
            assert (row["lesson_title"], row["course_id"], row["section_id"]) == (title, course_id, None)
            kinds.add("url-course")
        else:
            # a page outside the catalog is titled by the term it explains
            assert (row["lesson_title"], row["lesson_url"], row["course_id"]) == (entry["term"], entry["lesson_url"], None)
            kinds.add("url-outside")
    assert kinds == {"lesson", "lesson-no-url", "url-section", "url-course", "url-outside"}
    # full-text search over term and definition
    hits = [r[0] for r in db.execute("SELECT term FROM glossary_fts WHERE glossary_fts MATCH 'entangled'")]
    assert "Bell state" in hits


def _secrets(export: dict) -> list[str]:
    secrets = []
    for course in export["courses"]:
        for section in course["sections"]:
            for question in (section.get("quiz") or {}).get("questions", []):
                secrets += [question["prompt"], question["answer"], question["explanation"]]
    for user in export["users"]:
        secrets += [user["email"], user["name"], user["password_hash"]]
    for question in export["question_bank"][:50]:
        secrets.append(question["prompt"])
    return secrets


def test_quiz_content_and_users_never_reach_the_database_files(setup, sample_export):
    config, db = setup()
    assert ingest_site(db, config).status == "ok"
    secrets = _secrets(sample_export)
    assert len(secrets) > 100 and any("@" in s for s in secrets)
    db_path = config.database_path
    wal_path = db_path.with_name(db_path.name + "-wal")
    assert wal_path.exists() and wal_path.stat().st_size > 0  # the data is still in the WAL: search it too
    for path in (db_path, wal_path):
        data = path.read_bytes()
        leaked = [s for s in secrets if s.encode("utf-8") in data]
        assert leaked == [], f"{path.name} contains {leaked[:3]}"
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not [s for s in secrets if s.encode("utf-8") in db_path.read_bytes()]


def test_a_rejected_quiz_is_not_quoted_in_the_error(loaded, sample_export):
    db, ingest = loaded
    bad = copy.deepcopy(sample_export)
    bad["courses"][0]["sections"][1]["quiz"]["questions"] = "The secret answer is Zebra-Quokka-42"
    report = ingest(bad)
    assert report.failed
    assert "courses[0].sections[1].quiz.questions: must be an array" in report.error
    assert "Zebra-Quokka-42" not in report.error
    assert "Zebra-Quokka-42" not in json.dumps(runs(db))


# --- fetching over HTTP -----------------------------------------------------------


def test_http_conditional_get_sends_validators_back_exactly(setup, http_server):
    body = SITE_EXPORT.read_bytes()
    etag, modified = 'W/"export-7f3a"', "Fri, 14 Mar 2025 09:30:00 GMT"

    def serve(request):
        if request.headers.get("if-none-match") == etag:
            return Reply(304, b"", {"ETag": etag})
        return Reply(200, body, {"ETag": etag, "Last-Modified": modified, "Content-Type": "application/json"})

    http_server.routes["/export.json"] = serve
    config, db = setup(http_server.url("/export.json"))
    assert ingest_site(db, config, FAST).status == "ok"
    assert "if-none-match" not in http_server.requests[0].headers
    assert db.execute("SELECT etag, last_modified FROM export_state").fetchone() == (etag, modified)
    before, changes = snapshot(db, EXPORT_TABLES), db.conn.total_changes

    report = ingest_site(db, config, FAST)
    assert report.status == "unchanged"
    sent = http_server.requests[1].headers
    assert (sent["if-none-match"], sent["if-modified-since"]) == (etag, modified)
    assert snapshot(db, EXPORT_TABLES) == before
    assert db.conn.total_changes - changes == 2  # the ingest_runs row, inserted and closed: nothing else
    assert [r["status"] for r in runs(db)] == ["ok", "unchanged"]


def test_same_body_without_validators_writes_nothing(setup, http_server):
    http_server.routes["/export.json"] = Reply(200, SITE_EXPORT.read_bytes())
    config, db = setup(http_server.url("/export.json"))
    assert ingest_site(db, config, FAST).status == "ok"
    before, changes = snapshot(db, EXPORT_TABLES), db.conn.total_changes
    assert ingest_site(db, config, FAST).status == "unchanged"
    assert snapshot(db, EXPORT_TABLES) == before and db.conn.total_changes - changes == 2


def test_redirects_are_followed(setup, http_server):
    http_server.routes["/old"] = Reply(301, b"", {"Location": "/moved"})
    http_server.routes["/moved"] = Reply(302, b"", {"Location": http_server.url("/export.json")})
    http_server.routes["/export.json"] = Reply(200, SITE_EXPORT.read_bytes())
    config, db = setup(http_server.url("/old"))
    assert ingest_site(db, config, FAST).status == "ok"
    assert [r.path for r in http_server.requests] == ["/old", "/moved", "/export.json"]
    assert db.execute("SELECT count(*) FROM courses").fetchone()[0] == 6


@pytest.mark.parametrize(
    "case, expected",
    [
        ("timeout", "timed out"),
        ("refused", "ConnectError"),
        ("404", "HTTP 404"),
        ("500", "HTTP 500"),
        ("503", "HTTP 503"),
        ("too big", "over the 2000 byte limit"),
    ],
)
def test_a_failed_fetch_changes_nothing(setup, http_server, case, expected):
    good = SITE_EXPORT.read_bytes()
    http_server.routes["/export.json"] = Reply(200, good, {"ETag": '"v1"'})
    config, db = setup(http_server.url("/export.json"))
    assert ingest_site(db, config, FAST).status == "ok"
    before = snapshot(db, EXPORT_TABLES)

    replies = {
        "timeout": Reply(200, good, stall=1.5),
        "404": Reply(404, b"gone fishing"),
        "500": Reply(500, b"oops"),
        "503": Reply(503, b"busy", {"Retry-After": "120"}),
        "too big": Reply(200, good, {"ETag": '"v2"'}),
    }
    options = dict(FAST, max_bytes=2000) if case == "too big" else FAST
    if case == "refused":
        config = config.model_copy(
            update={"site_export": config.site_export.model_copy(update={"source": f"http://127.0.0.1:{free_port()}/export.json"})}
        )
    else:
        http_server.routes["/export.json"] = replies[case]
    report = ingest_site(db, config, options)
    assert report.failed and expected in report.error, report.error
    assert snapshot(db, EXPORT_TABLES) == before
    last = runs(db)[-1]
    assert (last["status"], last["error"], last["counts"]) == ("failed", report.error, "{}")
    assert last["finished_at"] is not None


def test_a_missing_file_fails_and_keeps_data(loaded, tmp_path):
    db, _ = loaded
    before = snapshot(db, EXPORT_TABLES)
    config = load_config(tmp_path / "qsite.yml")
    config = config.model_copy(update={"site_export": config.site_export.model_copy(update={"source": str(tmp_path / "nope.json")})})
    report = ingest_site(db, config)
    assert report.failed and "nope.json: cannot read file" in report.error
    assert snapshot(db, EXPORT_TABLES) == before


# --- rejecting bad exports whole ------------------------------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        ("{ this is not json", "(top level): not valid JSON"),
        ("", "(top level): not valid JSON"),
        ("[1, 2, 3]", "(top level): must be a JSON object"),
        (json.dumps({"format_version": 2, "courses": "whatever"}), "format_version: must be 1 (got 2)"),
        (json.dumps({"format_version": "1"}), "format_version: must be 1 (got '1')"),
        (json.dumps({"courses": []}), "format_version: required key is missing"),
    ],
)
def test_not_json_or_another_version_is_rejected(loaded, body, message):
    db, ingest = loaded
    before = snapshot(db, EXPORT_TABLES)
    report = ingest(body)
    assert report.failed and message in report.error, report.error
    assert snapshot(db, EXPORT_TABLES) == before
    assert runs(db)[-1]["status"] == "failed"


def test_every_structural_problem_is_listed_by_path(loaded, sample_export):
    db, ingest = loaded
    before = snapshot(db, EXPORT_TABLES)
    bad = copy.deepcopy(sample_export)
    bad["exported_at"] = "last Tuesday"
    bad["site"]["base_url"] = "ftp://qubit-academy.example"
    bad["courses"][0]["title"] = "   "
    bad["courses"][1]["id"] = "Gates And Circuits"
    bad["courses"][2]["sections"][0].pop("slide_count", None)
    bad["courses"][2]["sections"][0].pop("slides", None)
    bad["courses"][2]["sections"][0]["slide_count"] = -1
    bad["courses"][2]["sections"][1]["slide_count"] = "12"
    bad["courses"][3]["sections"][2] = {"id": "superconducting-qubits", "title": "Again", "slide_count": 1}  # duplicate id
    bad["courses"][4]["sections"][0]["slides"] = [{"title": "both"}]  # slides and slide_count
    del bad["courses"][5]["sections"][0]["slide_count"]  # neither
    bad["courses"][5]["sections"][1] = "not an object"
    bad["courses"][4]["url"] = "/relative/path"
    bad["glossary"][3] = {"definition": "no term", "lesson_url": "https://qubit-academy.example/x"}
    bad["glossary"][4] = {"term": "Orphan", "definition": "no link"}
    bad["question_bank"] = {"size": 300}
    report = ingest(bad)
    assert report.failed
    expected = [
        "exported_at: must be an RFC 3339 date-time with a time zone, e.g. 2024-05-01T12:00:00Z",
        "site.base_url: must be an absolute http(s) URL",
        "courses[0].title: must be a non-empty string",
        "courses[1].id: must be a slug of lowercase letters, digits and hyphens (got 'Gates And Circuits')",
        "courses[2].sections[0].slide_count: must be an integer >= 0",
        "courses[2].sections[1].slide_count: must be an integer >= 0",
        "courses[3].sections[2].id: duplicate section id 'superconducting-qubits' in this course (also sections[1])",
        "courses[4].url: must be an absolute http(s) URL",
        "courses[4].sections[0]: give either slides or slide_count, not both",
        "courses[5].sections[0]: needs slides (an array) or slide_count",
        "courses[5].sections[1]: must be an object",
        "glossary[3].term: required key is missing",
        "glossary[4]: needs a lesson link: lesson_url or lesson {course, section}",
        "question_bank: must be an array",
    ]
    lines = report.error.splitlines()
    assert lines[0] == f"export rejected, {len(expected)} problems:"
    assert [line.strip() for line in lines[1:]] == expected
    assert snapshot(db, EXPORT_TABLES) == before
    assert runs(db)[-1]["error"] == report.error


def test_values_the_database_cannot_hold_are_listed_by_path(loaded, sample_export):
    """Each passed validation and then failed the store as "unexpected error", naming no key."""
    db, ingest = loaded
    before = snapshot(db, EXPORT_TABLES)
    bad = copy.deepcopy(sample_export)
    bad["exported_at"] = "0001-01-01T00:00:00+01:00"  # year 0 in UTC
    bad["courses"][0]["sections"][0].pop("slides", None)
    bad["courses"][0]["sections"][0]["slide_count"] = 10**30  # over SQLite's 64-bit integers
    bad["courses"][1]["summary"] = "Gates \ud800 and circuits"  # JSON may escape a lone surrogate; UTF-8 cannot hold it
    bad["glossary"][0]["term"] = "Qubit\udc00"
    report = ingest(json.dumps(bad))
    assert report.failed and report.error.splitlines() == [
        "export rejected, 4 problems:",
        "  exported_at: must be within the years 0001 to 9999 once in UTC (got '0001-01-01T00:00:00+01:00')",
        "  courses[0].sections[0].slide_count: must be at most 1000000 (got 1000000000000000000000000000000)",
        "  courses[1].summary: must be valid Unicode text: character 7 is a lone surrogate (U+D800)",
        "  glossary[0].term: must be valid Unicode text: character 6 is a lone surrogate (U+DC00)",
    ], report.error
    assert "exported_at: must be within the years 0001 to 9999 once in UTC" in ingest(
        {**sample_export, "exported_at": "9999-12-31T23:59:59-01:00"}
    ).error
    assert snapshot(db, EXPORT_TABLES) == before
    assert runs(db)[-1]["status"] == "failed"


def test_missing_top_level_keys_and_duplicate_courses(loaded, sample_export):
    db, ingest = loaded
    bad = copy.deepcopy(sample_export)
    del bad["site"], bad["glossary"]
    bad["courses"][3]["id"] = bad["courses"][0]["id"]
    report = ingest(bad)
    assert report.failed
    assert "site: required key is missing" in report.error
    assert "glossary: required key is missing" in report.error
    assert "courses[3].id: duplicate course id 'quantum-foundations' (also courses[0])" in report.error
    assert ingest({**sample_export, "courses": []}).error.endswith("courses: must list at least one course")


def test_unknown_keys_are_ignored(loaded, sample_export):
    db, ingest = loaded
    data = copy.deepcopy(sample_export)
    data["analytics"] = {"visits": 123456789}
    data["courses"][0]["sections"][0]["instructor_notes"] = "Nested-Unknown-Key-Text"
    report = ingest(data)
    assert report.status == "ok"
    dump = "\n".join(db.conn.iterdump())
    assert "123456789" not in dump and "Nested-Unknown-Key-Text" not in dump


# --- glossary rules -----------------------------------------------------------------


def test_unresolvable_lesson_is_skipped_and_reported(loaded, sample_export):
    db, ingest = loaded
    data = copy.deepcopy(sample_export)
    first = next(n for n, e in enumerate(data["glossary"]) if "lesson" in e)
    term = data["glossary"][first]["term"]
    data["glossary"][first]["lesson"] = {"course": "quantum-foundations", "section": "no-such-section"}
    data["glossary"].append({"term": "Qutrit", "definition": "A three-level quantum system.", "lesson": {"course": "nope", "section": "x"}})
    data["glossary"].append({"term": "Qudit", "definition": "A d-level quantum system.", "lesson": {"course": "quantum-foundations", "section": "bits-and-qubits"}})
    report = ingest(data)
    assert report.status == "warning" and not report.failed
    assert report.counts["glossary"] == len(data["glossary"]) - 2 and report.counts["glossary_skipped"] == 2
    assert "2 glossary entries skipped" in report.error
    assert f"glossary[{first}] {term!r}: lesson {{course: 'quantum-foundations', section: 'no-such-section'}} is not in the catalog" in report.error
    terms = {r[0] for r in db.execute("SELECT term FROM glossary")}
    assert term not in terms and "Qutrit" not in terms and "Qudit" in terms
    assert db.execute("SELECT glossary_terms FROM site_totals").fetchone()[0] == len(data["glossary"]) - 2
    last = runs(db)[-1]
    assert (last["status"], last["error"], json.loads(last["counts"])) == ("warning", report.error, report.counts)


def test_glossary_ids_are_slugs_and_collisions_are_deterministic(loaded, sample_export):
    db, ingest = loaded
    data = copy.deepcopy(sample_export)
    link = {"lesson": {"course": "gates-and-circuits", "section": "phase-gates"}}
    data["glossary"] += [
        {"term": "T-gate", "definition": "Spelled with a hyphen.", **link},
        {"term": "t gate", "definition": "Lower case.", **link},
        {"term": "Schrödinger's cat", "definition": "A thought experiment.", **link},
        {"term": "⟨ψ|φ⟩", "definition": "An inner product.", **link},
    ]
    assert ingest(data).status == "ok"
    ids = dict(db.execute("SELECT term, id FROM glossary WHERE term IN ('T gate', 'T-gate', 't gate', 'Schrödinger''s cat', '⟨ψ|φ⟩')").fetchall())
    # the sample's "T gate" comes first in export order and keeps the bare slug
    assert ids == {"T gate": "t-gate", "T-gate": "t-gate-2", "t gate": "t-gate-3", "Schrödinger's cat": "schrodinger-s-cat", "⟨ψ|φ⟩": "term"}


# --- what changes, and when -----------------------------------------------------------


def test_versions_bump_only_for_datasets_that_changed(loaded, sample_export):
    db, ingest = loaded
    assert versions(db) == {"catalog": 1, "glossary": 1, "totals": 1}

    data = copy.deepcopy(sample_export)
    data["glossary"][0]["definition"] += " Edited."
    assert ingest(data).status == "ok"
    assert versions(db) == {"catalog": 1, "glossary": 2, "totals": 1}

    data["question_bank"].append({"prompt": "one more"})
    assert ingest(data).status == "ok"
    assert versions(db) == {"catalog": 1, "glossary": 2, "totals": 2}

    data["courses"][0]["summary"] = "A new summary."
    glossary = snapshot(db, EXPORT_TABLES)["glossary"]
    assert ingest(data).status == "ok"
    assert versions(db) == {"catalog": 2, "glossary": 2, "totals": 2}
    assert db.execute("SELECT summary FROM courses WHERE position = 1").fetchone()[0] == "A new summary."
    # glossary rows pointing at the rewritten sections keep their links
    assert snapshot(db, EXPORT_TABLES)["glossary"] == glossary

    data["exported_at"] = "2025-03-15T10:00:00+01:00"
    data["unrelated"] = True
    assert ingest(data).status == "ok"
    assert versions(db) == {"catalog": 2, "glossary": 2, "totals": 3}
    assert db.execute("SELECT exported_at FROM site_totals").fetchone()[0] == "2025-03-15T09:00:00Z"


def test_a_failure_mid_transaction_leaves_the_old_catalog(loaded, sample_export):
    db, ingest = loaded
    before = snapshot(db, EXPORT_TABLES)
    # A real SQLite failure while the glossary is written, after the catalog rows were replaced.
    db.execute("CREATE TRIGGER fail_boom BEFORE INSERT ON glossary WHEN NEW.term = 'Boom' BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    data = copy.deepcopy(sample_export)
    data["courses"] = data["courses"][:3]
    data["glossary"] = [e for e in data["glossary"] if "lesson_url" in e][:5] + [
        {"term": "Boom", "definition": "Fails.", "lesson_url": "https://qubit-academy.example/boom"}
    ]
    report = ingest(data)
    assert report.failed and "injected failure" in report.error
    assert snapshot(db, EXPORT_TABLES) == before
    assert runs(db)[-1]["status"] == "failed"
    db.execute("DROP TRIGGER fail_boom")
    assert ingest(data).status == "ok"
    assert db.execute("SELECT count(*) FROM courses").fetchone()[0] == 3


def test_readers_see_the_old_catalog_or_the_new_never_a_mix(loaded, sample_export, tmp_path):
    db, ingest = loaded
    small = copy.deepcopy(sample_export)
    small["courses"] = small["courses"][:2]
    kept = {c["id"] for c in small["courses"]}
    small["glossary"] = [e for e in small["glossary"] if e.get("lesson", {}).get("course") in kept]

    def shape(export):
        return (len(export["courses"]), sum(len(c["sections"]) for c in export["courses"]), len(export["glossary"]), len(export["courses"]))

    allowed = {shape(sample_export), shape(small)}
    seen, stop = set(), threading.Event()

    def read():
        reader = sqlite3.connect(str(tmp_path / "site.db"), isolation_level=None)
        while not stop.is_set():
            reader.execute("BEGIN")
            seen.add(
                reader.execute(
                    "SELECT (SELECT count(*) FROM courses), (SELECT count(*) FROM sections),"
                    " (SELECT count(*) FROM glossary), (SELECT courses FROM site_totals)"
                ).fetchone()
            )
            reader.execute("COMMIT")
        reader.close()

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for n in range(12):
            assert ingest(small if n % 2 == 0 else sample_export).status == "ok"
    finally:
        stop.set()
        thread.join()
    assert seen and seen <= allowed, seen - allowed


# --- the real command -----------------------------------------------------------------


@pytest.mark.slow
def test_exit_statuses_of_the_real_command(make_config, qsite, tmp_path, http_server, sample_export):
    config = make_config()
    ok = qsite("ingest", "site", "--config", str(config), fork=False)
    assert ok.returncode == 0, ok.stderr
    assert "site " in ok.stdout and ": ok (courses 6" in ok.stdout

    warned = copy.deepcopy(sample_export)
    warned["glossary"].append({"term": "Lost", "definition": "Nowhere.", "lesson": {"course": "x", "section": "y"}})
    result = qsite("ingest", "site", "--config", str(make_config(site_export={"source": write_export(tmp_path, warned, "warn.json")})))
    assert result.returncode == 0 and ": warning (" in result.stdout and "'Lost'" in result.stdout

    http_server.routes["/export.json"] = Reply(500, b"down")
    failed = qsite("ingest", "site", "--config", str(make_config(site_export={"source": http_server.url("/export.json")})), fork=False)
    assert failed.returncode == 1 and "failed" in failed.stdout and "HTTP 500" in failed.stdout

    broken = qsite("ingest", "site", "--config", str(make_config(site_export={"source": write_export(tmp_path, "{", "bad.json")})))
    assert broken.returncode == 1 and "not valid JSON" in broken.stdout

    db = open_database(tmp_path / "site.db")
    assert [r["status"] for r in runs(db)] == ["ok", "warning", "failed", "failed"]
    assert db.execute("SELECT count(*) FROM courses").fetchone()[0] == 6
    db.conn.close()

    bad_config = make_config(site_export={"source": "x.json", "evry": "1h"})
    usage = qsite("ingest", "site", "--config", str(bad_config))
    assert usage.returncode == 2 and str(bad_config) in usage.stderr and "site_export.evry: unknown key" in usage.stderr
    assert qsite("ingest", "site", "--no-such-option").returncode == 2
