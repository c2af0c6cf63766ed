"""The site export, format version 1: what a valid document is, and every problem of an invalid one.

The learning site publishes one JSON document: its courses and their
sections, the glossary, the question bank, and (in practice) more than we may
keep, such as quiz answers and a ``users`` block. :func:`parse_export`
validates it as a whole with the pydantic models below and either returns
them or raises :class:`ExportError` listing every problem by its path in the
document (``courses[1].sections[0].id: ...``), in document order, so a
publisher can fix them all at once.

Unknown keys at any level are ignored, and the models hold only the fields
the catalog needs: what is not declared here can never reach the database.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Annotated, Any, Callable
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from qsite.pipeline.text import shorten

FORMAT_VERSION = 1
#: A hopeless export could have a problem per field; the run's error text stops here.
MAX_PROBLEMS_LISTED = 500
#: Longest quotation of a bad value in a problem, in characters.
SHOWN_VALUE_LIMIT = 60
#: The most slides a section may count. No lesson comes near it, and the sums over any export
#: that fits the fetch's 15 MiB stay far inside SQLite's 64-bit integers (10**30 could not be stored).
MAX_SLIDE_COUNT = 1_000_000

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


def _shown(value: Any) -> str:
    """A bad value as quoted in a problem: its ``repr``, shortened."""
    return shorten(repr(value), SHOWN_VALUE_LIMIT)


def _check(test: Callable[[Any], bool], message: str, optional: bool = False, show_value: bool = False):
    def validate(value):
        if value is None and optional:
            return None
        if not test(value):
            raise PydanticCustomError("export", message + (f" (got {_shown(value)})" if show_value else ""))
        if isinstance(value, str):
            _check_unicode(value)
            return value.strip()
        return value

    return BeforeValidator(validate)


def _check_unicode(text: str) -> None:
    """Refuse a lone surrogate: JSON can write one (``"\\ud800"``), but no UTF-8 can hold it, so SQLite could not store it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        lone = f"U+{ord(text[exc.start]):04X}"
        raise PydanticCustomError("export", f"must be valid Unicode text: character {exc.start + 1} is a lone surrogate ({lone})") from None


def _and(test: Callable[[Any], bool], message: str, show_value: bool = False):
    """A further check of a value (or null) that passed its :func:`_check`, with a message of its own."""

    def validate(value):
        if value is not None and not test(value):
            raise PydanticCustomError("export", message + (f" (got {_shown(value)})" if show_value else ""))
        return value

    return AfterValidator(validate)


def _is_text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_url(value) -> bool:
    if not isinstance(value, str) or value != value.strip() or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _is_count(value) -> bool:
    return type(value) is int and value >= 0


def _in_utc_years(value: str) -> bool:
    """Whether the time stays within years 1 to 9999 once in UTC (``0001-01-01T00:00:00+01:00`` does not)."""
    try:
        datetime.fromisoformat(value.upper()).astimezone(timezone.utc)
    except OverflowError:
        return False
    return True


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
_AT_MOST = _and(lambda v: v <= MAX_SLIDE_COUNT, f"must be at most {MAX_SLIDE_COUNT}", show_value=True)
Count = Annotated[Any, _check(_is_count, "must be an integer >= 0"), _AT_MOST]
Array = Annotated[Any, _check(lambda v: isinstance(v, list), "must be an array")]
OptionalArray = Annotated[Any, _check(lambda v: isinstance(v, list), "must be an array", optional=True)]
OptionalCount = Annotated[Any, _check(_is_count, "must be an integer >= 0", optional=True), _AT_MOST]
Timestamp = Annotated[
    Any,
    _check(_is_timestamp, "must be an RFC 3339 date-time with a time zone, e.g. 2024-05-01T12:00:00Z"),
    _and(_in_utc_years, "must be within the years 0001 to 9999 once in UTC", show_value=True),
]


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


def _objects(value) -> list[tuple[int, dict]]:
    """The objects in a raw list, with their indexes; anything else there is for the models to report."""
    return [(n, item) for n, item in enumerate(value if isinstance(value, list) else []) if isinstance(item, dict)]


def _duplicate_ids(objects: list[tuple[int, dict]], path: tuple, describe: Callable[[str, int], str]) -> list[tuple[tuple, str]]:
    """A problem for each object whose ``id`` an earlier one has; ``describe(id, first index)`` says it."""
    first: dict[str, int] = {}
    problems = []
    for n, item in objects:
        item_id = item.get("id")
        if not isinstance(item_id, str):
            continue
        if item_id in first:
            problems.append(((*path, n, "id"), describe(item_id, first[item_id])))
        else:
            first[item_id] = n
    return problems


def _exactly_one(item: dict, path: tuple, one: str, other: str, missing: str) -> list[tuple[tuple, str]]:
    """A problem unless exactly one of the keys ``one`` and ``other`` has a value."""
    has_one, has_other = item.get(one) is not None, item.get(other) is not None
    if has_one and has_other:
        return [(path, f"give either {one} or {other}, not both")]
    return [] if has_one or has_other else [(path, missing)]


def _cross_checks(data: dict) -> list[tuple[tuple, str]]:
    """Rules across fields, checked on the raw document so they are reported next to field errors."""
    problems = []
    if isinstance(data.get("courses"), list) and not data["courses"]:
        problems.append((("courses",), "must list at least one course"))
    courses = _objects(data.get("courses"))
    problems += _duplicate_ids(courses, ("courses",), lambda course_id, n: f"duplicate course id {course_id!r} (also courses[{n}])")
    for c, course in courses:
        sections = _objects(course.get("sections"))
        problems += _duplicate_ids(
            sections,
            ("courses", c, "sections"),
            lambda section_id, n: f"duplicate section id {section_id!r} in this course (also sections[{n}])",
        )
        for s, section in sections:
            path = ("courses", c, "sections", s)
            problems += _exactly_one(section, path, "slides", "slide_count", "needs slides (an array) or slide_count")
    for g, entry in _objects(data.get("glossary")):
        needs = "needs a lesson link: lesson_url or lesson {course, section}"
        problems += _exactly_one(entry, ("glossary", g), "lesson_url", "lesson", needs)
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
        raise ExportError([f"format_version: must be {FORMAT_VERSION} (got {_shown(version)})"])
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
