"""Helpers shared by the /api/v1 tests: known data, a Datasette client, and the OpenAPI check.

The data is written straight into a database made by
:func:`pipeline.store.open_database`, with ``data_versions`` bumped as the
pipeline does, so the tests know every value they assert.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timedelta, timezone

import httpx
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate as validate_spec

from config import load_config
from pipeline.store import bump_version, open_database
from service.serve import make_datasette

CATALOG_AT = "2026-11-20T08:00:00Z"
NEWS_AT = "2026-11-20T09:30:00Z"
NEWS_START = datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc)
TAGS = ("Science", "Industry", "Investing")
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


def news_items(count: int, start: datetime = NEWS_START, prefix: str = "item") -> list[dict]:
    """``count`` items an hour apart, newest first, tags in turn; items 3 and 4 share a time."""
    items = []
    for i in range(count):
        published = start - timedelta(hours=i if i != 4 else 3)
        tag = TAGS[i % 3]
        items.append(
            {
                "id": f"{prefix}-{i:03d}",
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
    db["courses"].insert_all(COURSES)
    db["sections"].insert_all(SECTIONS)
    db["glossary"].insert_all(
        [{**entry, "lesson_title": "Qubits", "lesson_url": "https://academy.example/q/qubits",
          "course_id": "quantum-basics", "section_id": "qubits"} for entry in GLOSSARY]
    )
    db["site_totals"].insert(TOTALS)
    for dataset in ("catalog", "glossary", "totals"):
        bump_version(db, dataset, changed_at)


def seed_news(db, items: list[dict], changed_at: str = NEWS_AT) -> None:
    db["sources"].insert_all(
        [{"name": name, "url": f"https://{tag.lower()}.example/feed", "tag": tag} for tag, name in SOURCES.items()],
        ignore=True,
    )
    db["news"].insert_all(items)
    bump_version(db, "news", changed_at)


def seeded_database(path, news: int = 45):
    db = open_database(path)
    seed_catalog(db)
    seed_news(db, news_items(news))
    return db


def parse_http_date(value: str) -> datetime:
    return datetime.strptime(value, "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=timezone.utc)


class OpenAPICheck:
    """Validates responses against the project's own OpenAPI 3.1 document.

    For each response: the path and method exist, the status is documented,
    every required header is there and matches its schema, the headers the
    service and its rate limiter add are documented wherever they are sent,
    the media type is documented, and the body validates against the schema
    (or is empty where the document says there is none).
    """

    #: Sent by the service or the rate limiter: wherever one appears, the document must describe it.
    OWN_HEADERS = ("cache-control", "etag", "link", "allow", "retry-after", "ratelimit", "ratelimit-policy")

    _valid: set[str] = set()  # documents already validated, by their JSON text

    def __init__(self, document: dict):
        text = json.dumps(document, sort_keys=True)
        if text not in OpenAPICheck._valid:
            validate_spec(document)
            OpenAPICheck._valid.add(text)
        self.document = document
        self.templates = []
        for template in document["paths"]:
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            self.templates.append((re.compile(pattern), template))
        self.checked = 0

    def deref(self, node: dict) -> dict:
        while "$ref" in node:
            target = self.document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        return node

    def validate(self, schema: dict, instance) -> None:
        wrapped = {**schema, "components": self.document["components"]}
        OAS31Validator(wrapped, format_checker=OAS31Validator.FORMAT_CHECKER).validate(instance)

    def check(self, method: str, response: httpx.Response, path: str | None = None) -> None:
        """Check one response; ``path`` is the raw path as sent, when the request URL cannot carry it."""
        path = path or response.request.url.path
        template = next((template for pattern, template in self.templates if pattern.match(path)), None)
        status = str(response.status_code)
        if template is None:
            assert status == "404", f"{path} is not documented, yet answered {status}"
            documented = self.deref(self.document["components"]["responses"]["NotFound"])
        else:
            operation = self.document["paths"][template].get(method.lower())
            assert operation is not None, f"{method} {template} is not documented"
            assert status in operation["responses"], f"{method} {template} answered undocumented {status}"
            documented = self.deref(operation["responses"][status])
        documented_names = {name.lower() for name in documented.get("headers", {})}
        for name in self.OWN_HEADERS:
            if name in response.headers:
                assert name in documented_names, f"{method} {path} {status}: undocumented header {name}"
        for name, header in documented.get("headers", {}).items():
            header = self.deref(header)
            value = response.headers.get(name)
            if header.get("required"):
                assert value is not None, f"{method} {path} {status}: header {name} missing"
            if value is not None:
                self.validate(header["schema"], value)
        content = documented.get("content")
        if not content or method.upper() == "HEAD":
            assert response.content == b"", f"{method} {path} {status}: body where none is documented"
        else:
            media_type = response.headers["content-type"].split(";")[0].strip()
            assert media_type in content, f"{method} {path} {status}: undocumented type {media_type}"
            self.validate(content[media_type]["schema"], json.loads(response.content))
        self.checked += 1


class ApiClient:
    """Requests through ``datasette.client`` on one event loop; /api/v1 answers are checked against OpenAPI."""

    def __init__(self, datasette, check: bool = True):
        self.datasette = datasette
        self.loop = asyncio.new_event_loop()
        self.openapi = None
        self.check = check
        if check:
            document = self.request("GET", "/api/v1/openapi.json", validate=False).json()
            self.openapi = OpenAPICheck(document)

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def request(self, method: str, path: str, validate: bool = True, **kwargs) -> httpx.Response:
        response = self.run(self.datasette.client.request(method, path, **kwargs))
        if validate and self.openapi is not None and response.request.url.path.startswith("/api/v1"):
            self.openapi.check(method, response)
        return response

    def get(self, path: str, **kwargs) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def head(self, path: str, **kwargs) -> httpx.Response:
        return self.request("HEAD", path, **kwargs)

    def close(self) -> None:
        # background tasks (the rate limiter's expiry timer) end with the loop
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()


def datasette_for_config(config_path):
    """The Datasette ``qsite serve`` would run for this config."""
    return make_datasette(load_config(config_path))
