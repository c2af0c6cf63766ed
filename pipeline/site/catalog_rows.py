"""A validated site export as the rows of the catalog tables: pure, no SQL.

What is kept is decided here by construction: rows are built from the
validated fields of :mod:`qsite.pipeline.site.export_format` only. Quizzes are counted,
the question bank is measured, and nothing else of theirs ever becomes a row.
Each row is a dict of the table's columns, as :mod:`qsite.pipeline.store.catalog`
stores and compares them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime

from qsite.db.model import format_time

from qsite.pipeline.site.export_format import Export


def slugify(text: str) -> str:
    """``"Bloch sphere"`` -> ``"bloch-sphere"``; accents folded, anything else dropped."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-") or "term"


@dataclass
class Rows:
    """Everything one export stores: the rows of each table, and what the run reports."""

    #: ``courses`` rows, in position order.
    courses: list[dict]
    #: ``sections`` rows, in export order (course by course).
    sections: list[dict]
    #: ``glossary`` rows, in id order.
    glossary: list[dict]
    #: The one ``site_totals`` row.
    totals: dict
    #: One line per glossary entry left out, saying why.
    skipped: list[str]
    counts: dict


@dataclass(frozen=True)
class _Lesson:
    """Where a glossary entry's lesson link leads."""

    title: str
    url: str
    course_id: str | None
    section_id: str | None


def build_rows(export: Export) -> Rows:
    """The rows ``export`` stores, and the glossary entries whose lesson is not in the catalog."""
    courses, sections = [], []
    by_ref: dict[tuple[str, str], _Lesson] = {}
    by_url: dict[str, _Lesson] = {}
    slides_total = quizzes = 0
    for position, course in enumerate(export.courses, start=1):
        course_slides = 0
        for s_position, section in enumerate(course.sections, start=1):
            count = section.slides_total
            course_slides += count
            quizzes += section.quiz is not None
            sections.append(
                {"course_id": course.id, "id": section.id, "position": s_position, "title": section.title,
                 "url": section.url, "slide_count": count}
            )
            # A section without a page of its own is reached through its course's page.
            lesson = _Lesson(section.title, section.url or course.url, course.id, section.id)
            by_ref[(course.id, section.id)] = lesson
            if section.url:
                by_url.setdefault(section.url, lesson)
        courses.append(
            {"id": course.id, "position": position, "title": course.title, "summary": course.summary,
             "level": course.level, "url": course.url, "section_count": len(course.sections),
             "slide_count": course_slides}
        )
        by_url.setdefault(course.url, _Lesson(course.title, course.url, course.id, None))
        slides_total += course_slides

    glossary, skipped, taken = [], [], set()
    for n, entry in enumerate(export.glossary):
        if entry.lesson is not None:
            lesson = by_ref.get((entry.lesson.course, entry.lesson.section))
            if lesson is None:
                skipped.append(
                    f"glossary[{n}] {entry.term!r}: lesson {{course: {entry.lesson.course!r}, "
                    f"section: {entry.lesson.section!r}}} is not in the catalog"
                )
                continue
        else:
            # A bare URL takes the title of the section (or course) at that URL;
            # a page outside the catalog is titled by the term it explains.
            lesson = by_url.get(entry.lesson_url) or _Lesson(entry.term, entry.lesson_url, None, None)
        base = slugify(entry.term)
        glossary_id, suffix = base, 2
        while glossary_id in taken:  # first in export order keeps the bare slug
            glossary_id, suffix = f"{base}-{suffix}", suffix + 1
        taken.add(glossary_id)
        glossary.append(
            {"id": glossary_id, "term": entry.term, "definition": entry.definition, "lesson_title": lesson.title,
             "lesson_url": lesson.url, "course_id": lesson.course_id, "section_id": lesson.section_id}
        )

    totals = {
        "id": 1,
        "site_name": export.site.name,
        "site_base_url": export.site.base_url,
        "exported_at": format_time(datetime.fromisoformat(export.exported_at.upper())),
        "courses": len(courses),
        "slides": slides_total,
        "quizzes": quizzes,
        "question_bank_size": len(export.question_bank),
        "glossary_terms": len(glossary),
    }
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
    glossary.sort(key=lambda row: row["id"])
    return Rows(courses, sections, glossary, totals, skipped, counts)
