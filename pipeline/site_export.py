"""Ingesting the site export (format version 1) into the catalog tables.

The learning site publishes one JSON document: its courses and their
sections, the glossary, the question bank, and (in practice) more than we may
keep, such as quiz answers and a ``users`` block. This module fetches that
document, validates it as a whole, and replaces ``courses``, ``sections``,
``glossary`` and ``site_totals`` in one transaction, so readers see the old
catalog or the new one and a bad export costs nothing.

What is kept is decided here by construction: rows are built from the
validated fields only. Quizzes are counted, the question bank is measured,
and nothing else of theirs, nor any unknown key, ever reaches SQL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Callable
from urllib.parse import urlsplit

import sqlite_utils
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from db.model import format_time, utc_now

from . import store
from .fetch import FetchError, Fetched, fetch, make_client

log = logging.getLogger("qsite.site")

KIND = "site"
FORMAT_VERSION = 1
#: A hopeless export could have a problem per field; the run's error text stops here.
MAX_PROBLEMS_LISTED = 500

_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class ExportError(Exception):
    """An export rejected whole; ``problems`` lists each one as ``path: message``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        shown = problems[:MAX_PROBLEMS_LISTED]
        more = len(problems) - len(shown)
        text = f"export rejected, {len(problems)} problem{'s' if len(problems) != 1 else ''}:\n  " + "\n  ".join(shown)
        if more:
            text += f"\n  ... and {more} more"
        super().__init__(text)


# --- validation -------------------------------------------------------------
#
# Each field type is a check with the exact message a publisher needs to see;
# pydantic walks the document and collects every failure with its location.


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(test: Callable[[Any], bool], message: str, optional: bool = False, show_value: bool = False):
    def validate(value):
        if value is None and optional:
            return None
        if not test(value):
            raise PydanticCustomError("export", message + (f" (got {_short(value)})" if show_value else ""))
        return value.strip() if isinstance(value, str) else value

    return BeforeValidator(validate)


def _is_text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_url(value) -> bool:
    if not isinstance(value, str) or value != value.strip() or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_count(value) -> bool:
    return type(value) is int and value >= 0


def _is_timestamp(value) -> bool:
    if not isinstance(value, str) or not re.match(r"^\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d", value):
        return False
    try:
        return datetime.fromisoformat(value.upper()).tzinfo is not None
    except ValueError:
        return False


Text = Annotated[Any, _check(_is_text, "must be a non-empty string")]
AnyText = Annotated[Any, _check(lambda v: isinstance(v, str), "must be a string")]
OptionalText = Annotated[Any, _check(lambda v: isinstance(v, str), "must be a string or null", optional=True)]
Slug = Annotated[
    Any,
    _check(lambda v: isinstance(v, str) and bool(_SLUG.match(v)), "must be a slug of lowercase letters, digits and hyphens", show_value=True),
]
Url = Annotated[Any, _check(_is_url, "must be an absolute http(s) URL")]
OptionalUrl = Annotated[Any, _check(_is_url, "must be an absolute http(s) URL or null", optional=True)]
Count = Annotated[Any, _check(_is_count, "must be an integer >= 0")]
Array = Annotated[Any, _check(lambda v: isinstance(v, list), "must be an array")]
OptionalArray = Annotated[Any, _check(lambda v: isinstance(v, list), "must be an array", optional=True)]
OptionalCount = Annotated[Any, _check(_is_count, "must be an integer >= 0", optional=True)]
Timestamp = Annotated[Any, _check(_is_timestamp, "must be an RFC 3339 date-time with a time zone, e.g. 2024-05-01T12:00:00Z")]


class _Model(BaseModel):
    # Unknown keys at any level are ignored (the export may grow) and, since rows
    # are built from these fields alone, never stored.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Site(_Model):
    name: Text
    base_url: Url


class Quiz(_Model):
    id: Text
    #: Checked to be an array and counted; its content is never read.
    questions: Array


class Section(_Model):
    id: Slug
    title: Text
    url: OptionalUrl = None
    slides: OptionalArray = None
    slide_count: OptionalCount = None
    quiz: Quiz | None = None

    @property
    def slides_total(self) -> int:
        return len(self.slides) if self.slides is not None else self.slide_count


class Course(_Model):
    id: Slug
    title: Text
    summary: AnyText
    level: OptionalText = None
    url: Url
    sections: list[Section]


class LessonRef(_Model):
    course: Text
    section: Text


class GlossaryEntry(_Model):
    term: Text
    definition: Text
    lesson_url: OptionalUrl = None
    lesson: LessonRef | None = None


class Export(_Model):
    format_version: Any
    exported_at: Timestamp
    site: Site
    courses: list[Course]
    glossary: list[GlossaryEntry]
    question_bank: Array


_MESSAGES = {
    "missing": "required key is missing",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
}

#: Paths sort in document order: list index, then the keys as the format lists them.
_KEY_ORDER = {
    key: n
    for n, key in enumerate(
        "format_version exported_at site name base_url courses id term title summary level url definition "
        "lesson_url lesson course section sections slides slide_count quiz questions glossary question_bank".split()
    )
}


def _path(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _sort_key(loc: tuple):
    return tuple((0, part, "") if isinstance(part, int) else (1, _KEY_ORDER.get(part, 99), part) for part in loc)


def _cross_checks(data: dict) -> list[tuple[tuple, str]]:
    """Rules across fields, checked on the raw document so they are reported next to field errors."""
    problems = []
    courses = data.get("courses") if isinstance(data.get("courses"), list) else []
    if "courses" in data and isinstance(data.get("courses"), list) and not courses:
        problems.append((("courses",), "must list at least one course"))
    seen_courses: dict[str, int] = {}
    for c, course in enumerate(courses):
        if not isinstance(course, dict):
            continue
        course_id = course.get("id")
        if isinstance(course_id, str):
            if course_id in seen_courses:
                problems.append((("courses", c, "id"), f"duplicate course id {course_id!r} (also courses[{seen_courses[course_id]}])"))
            else:
                seen_courses[course_id] = c
        sections = course.get("sections") if isinstance(course.get("sections"), list) else []
        seen_sections: dict[str, int] = {}
        for s, section in enumerate(sections):
            if not isinstance(section, dict):
                continue
            section_id = section.get("id")
            if isinstance(section_id, str):
                if section_id in seen_sections:
                    problems.append(
                        (
                            ("courses", c, "sections", s, "id"),
                            f"duplicate section id {section_id!r} in this course (also sections[{seen_sections[section_id]}])",
                        )
                    )
                else:
                    seen_sections[section_id] = s
            has_slides, has_count = section.get("slides") is not None, section.get("slide_count") is not None
            if has_slides and has_count:
                problems.append((("courses", c, "sections", s), "give either slides or slide_count, not both"))
            elif not (has_slides or has_count):
                problems.append((("courses", c, "sections", s), "needs slides (an array) or slide_count"))
    glossary = data.get("glossary") if isinstance(data.get("glossary"), list) else []
    for g, entry in enumerate(glossary):
        if not isinstance(entry, dict):
            continue
        has_url, has_lesson = entry.get("lesson_url") is not None, entry.get("lesson") is not None
        if has_url and has_lesson:
            problems.append((("glossary", g), "give either lesson_url or lesson, not both"))
        elif not (has_url or has_lesson):
            problems.append((("glossary", g), "needs a lesson link: lesson_url or lesson {course, section}"))
    return problems


def parse_export(body: bytes) -> Export:
    """Decode and validate an export; raise :class:`ExportError` listing every problem."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ExportError([f"(top level): not valid JSON: {exc}"]) from None
    if not isinstance(data, dict):
        raise ExportError(["(top level): must be a JSON object"])
    version = data.get("format_version")
    if "format_version" not in data:
        raise ExportError([f"format_version: required key is missing (this reader understands {FORMAT_VERSION})"])
    if not (type(version) is int and version == FORMAT_VERSION):
        raise ExportError([f"format_version: must be {FORMAT_VERSION} (got {_short(version)})"])
    problems = _cross_checks(data)
    export = None
    try:
        export = Export.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            message = error["msg"] if error["type"] == "export" else _MESSAGES.get(error["type"], error["msg"])
            problems.append((tuple(error["loc"]), message))
    if problems:
        problems.sort(key=lambda problem: _sort_key(problem[0]))
        raise ExportError([f"{_path(loc)}: {message}" for loc, message in problems])
    return export


# --- turning the export into rows ---------------------------------------------


def slugify(text: str) -> str:
    """``"Bloch sphere"`` -> ``"bloch-sphere"``; accents folded, anything else dropped."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-") or "term"


@dataclass
class Rows:
    """Everything one export stores, as rows in table column order."""

    courses: list[tuple]
    sections: list[tuple]
    glossary: list[tuple]
    totals: tuple
    skipped: list[str]
    counts: dict


def build_rows(export: Export) -> Rows:
    courses, sections = [], []
    by_ref: dict[tuple[str, str], tuple] = {}
    by_url: dict[str, tuple] = {}
    slides_total = quizzes = 0
    for position, course in enumerate(export.courses, start=1):
        course_slides = 0
        for s_position, section in enumerate(course.sections, start=1):
            count = section.slides_total
            course_slides += count
            quizzes += section.quiz is not None
            sections.append((course.id, section.id, s_position, section.title, section.url, count))
            # A section without a page of its own is reached through its course's page.
            target = (section.title, section.url or course.url, course.id, section.id)
            by_ref[(course.id, section.id)] = target
            if section.url:
                by_url.setdefault(section.url, target)
        courses.append(
            (course.id, position, course.title, course.summary, course.level, course.url, len(course.sections), course_slides)
        )
        by_url.setdefault(course.url, (course.title, course.url, course.id, None))
        slides_total += course_slides

    glossary, skipped, taken = [], [], set()
    for n, entry in enumerate(export.glossary):
        if entry.lesson is not None:
            target = by_ref.get((entry.lesson.course, entry.lesson.section))
            if target is None:
                skipped.append(
                    f"glossary[{n}] {entry.term!r}: lesson {{course: {entry.lesson.course!r}, "
                    f"section: {entry.lesson.section!r}}} is not in the catalog"
                )
                continue
        else:
            # A bare URL takes the title of the section (or course) at that URL;
            # a page outside the catalog is titled by the term it explains.
            target = by_url.get(entry.lesson_url, (entry.term, entry.lesson_url, None, None))
        title, url, course_id, section_id = target
        base = slugify(entry.term)
        glossary_id, suffix = base, 2
        while glossary_id in taken:  # first in export order keeps the bare slug
            glossary_id, suffix = f"{base}-{suffix}", suffix + 1
        taken.add(glossary_id)
        glossary.append((glossary_id, entry.term, entry.definition, title, url, course_id, section_id))

    totals = (
        1,
        export.site.name,
        export.site.base_url,
        format_time(datetime.fromisoformat(export.exported_at.upper())),
        len(courses),
        slides_total,
        quizzes,
        len(export.question_bank),
        len(glossary),
    )
    counts = {
        "courses": len(courses),
        "sections": len(sections),
        "slides": slides_total,
        "quizzes": quizzes,
        "question_bank": len(export.question_bank),
        "glossary": len(glossary),
    }
    if skipped:
        counts["glossary_skipped"] = len(skipped)
    return Rows(courses, sections, sorted(glossary), totals, skipped, counts)


# --- writing ------------------------------------------------------------------

_COURSE_COLUMNS = "id, position, title, summary, level, url, section_count, slide_count"
_SECTION_COLUMNS = "course_id, id, position, title, url, slide_count"
_GLOSSARY_COLUMNS = "id, term, definition, lesson_title, lesson_url, course_id, section_id"
_TOTALS_COLUMNS = "id, site_name, site_base_url, exported_at, courses, slides, quizzes, question_bank_size, glossary_terms"


def _current(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    return [tuple(row) for row in conn.execute(sql)]


def _insert(conn: sqlite3.Connection, table: str, columns: str, rows: list[tuple]) -> None:
    marks = ", ".join("?" for _ in columns.split(","))
    conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def store_rows(db: sqlite_utils.Database, rows: Rows, source: str, fetched: Fetched) -> list[str]:
    """Replace what changed in one transaction; return the datasets that changed."""
    conn = db.conn
    with store.transaction(db):
        catalog_changed = (
            _current(conn, f"SELECT {_COURSE_COLUMNS} FROM courses ORDER BY position") != rows.courses
            or _current(conn, f"SELECT {_SECTION_COLUMNS} FROM sections ORDER BY course_id, position")
            != sorted(rows.sections, key=lambda row: (row[0], row[2]))
        )
        glossary_changed = _current(conn, f"SELECT {_GLOSSARY_COLUMNS} FROM glossary ORDER BY id") != rows.glossary
        totals_changed = _current(conn, f"SELECT {_TOTALS_COLUMNS} FROM site_totals") != [rows.totals]
        if catalog_changed or glossary_changed:
            # Glossary rows point at sections; they go first and come back last.
            conn.execute("DELETE FROM glossary")
        if catalog_changed:
            conn.execute("DELETE FROM sections")
            conn.execute("DELETE FROM courses")
            _insert(conn, "courses", _COURSE_COLUMNS, rows.courses)
            _insert(conn, "sections", _SECTION_COLUMNS, rows.sections)
        if catalog_changed or glossary_changed:
            _insert(conn, "glossary", _GLOSSARY_COLUMNS, rows.glossary)
        if totals_changed:
            conn.execute("DELETE FROM site_totals")
            _insert(conn, "site_totals", _TOTALS_COLUMNS, [rows.totals])
        changed = [name for name, flag in (("catalog", catalog_changed), ("glossary", glossary_changed), ("totals", totals_changed)) if flag]
        now = utc_now()
        for dataset in changed:
            store.bump_version(db, dataset, now)
        conn.execute(
            """
            INSERT INTO export_state (source, etag, last_modified, content_hash, fetched_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(source) DO UPDATE SET etag = excluded.etag, last_modified = excluded.last_modified,
                content_hash = excluded.content_hash, fetched_at = excluded.fetched_at
            """,
            [source, fetched.etag, fetched.last_modified, fetched.content_hash, now],
        )
    return changed


# --- the run ------------------------------------------------------------------


def _fetch(location: str, etag: str | None, last_modified: str | None, client_options: dict) -> Fetched:
    options = dict(client_options)
    fetch_options = {key: options.pop(key) for key in ("max_bytes", "deadline") if key in options}

    async def run():
        async with make_client(**options) as client:
            return await fetch(client, location, etag, last_modified, **fetch_options)

    return asyncio.run(run())


def ingest_site(db: sqlite_utils.Database, config, client_options: dict | None = None) -> store.RunReport:
    """Fetch, validate and store the site export named by ``config``; record the run.

    :param client_options: ``connect_timeout`` and ``read_timeout`` for
        :func:`pipeline.fetch.make_client`, ``max_bytes`` and ``deadline`` for
        :func:`pipeline.fetch.fetch`.
    :returns: the run's report; its status is ``ok``, ``warning`` (glossary
        entries skipped), ``unchanged`` or ``failed`` (nothing changed).
    """
    source = config.site_export_source
    store.close_interrupted_runs(db)
    run_id = store.start_run(db, KIND, source)
    status, counts, error = "failed", {}, None
    try:
        state = db.conn.execute(
            "SELECT etag, last_modified, content_hash FROM export_state WHERE source = ?", [source]
        ).fetchone()
        etag, last_modified, stored_hash = state if state else (None, None, None)
        fetched = _fetch(source, etag, last_modified, client_options or {})
        if fetched.not_modified and state:
            status = "unchanged"
        elif fetched.not_modified:
            error = f"{source}: answered 304 Not Modified but no export is stored"
        elif fetched.content_hash == stored_hash:
            status = "unchanged"
        else:
            rows = build_rows(parse_export(fetched.body))
            changed = store_rows(db, rows, source, fetched)
            counts = rows.counts
            status = "warning" if rows.skipped else "ok"
            if rows.skipped:
                error = f"{len(rows.skipped)} glossary entr{'ies' if len(rows.skipped) != 1 else 'y'} skipped:\n  " + "\n  ".join(rows.skipped)
            log.info("site export %s: changed %s", source, ", ".join(changed) or "nothing")
    except (FetchError, ExportError) as exc:
        error = str(exc)
    except sqlite3.Error as exc:
        error = f"database error, nothing changed: {exc}"
    except Exception as exc:  # a run must never end without its ingest_runs row
        log.exception("site export %s: unexpected error", source)
        error = f"unexpected error, nothing changed: {type(exc).__name__}: {exc}"
    store.finish_run(db, run_id, status, counts, error)
    report = store.RunReport(KIND, source, status, counts, error)
    (log.warning if report.failed else log.info)("%s", report.line())
    return report
