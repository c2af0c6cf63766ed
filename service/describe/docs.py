"""The documentation page, /api/v1/docs: the OpenAPI document as HTML a person reads.

Rendered on the server from the same (translated) OpenAPI document the API
serves, so the page cannot say something the document does not; only its
headings and connecting sentences come from the template
(``service/templates/qsite_docs.html``, translated through the same catalogs
with ``_()``). It is rendered with Datasette's Jinja environment, which finds
qsite's templates through the plugin's ``prepare_jinja2_environment`` hook; it has no script, and loads nothing from
another host: its style is inline.

Each endpoint is shown with a real request and the start of its real answer,
taken from the data the instance serves at the time the page is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Awaitable, Callable
from urllib.parse import quote

from qsite.service.i18n import LANGUAGES, Catalogs, Gettext, Language
from qsite.service.http.problems import API_PREFIX, PROBLEM_PREFIX, PROBLEMS

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"
TEMPLATE = "qsite_docs.html"
DOCS_PATH = API_PREFIX + "/docs"

#: Results shown of a list in an example answer; the page says how many more there are.
EXAMPLE_RESULTS = 2

#: The example request of each documented path: a real request whose real answer the page shows.
#: ``{id}`` is filled with the ``id`` of the first result of the collection above it.
EXAMPLE_QUERIES = {
    API_PREFIX + "/glossary": "q=qubit",
    API_PREFIX + "/news": "limit=2",
}

#: (header, its component in the document) shown under fair use, and under caching.
FAIR_USE_HEADERS = (("RateLimit", "RateLimit"), ("RateLimit-Policy", "RateLimitPolicy"), ("Retry-After", "RetryAfter"))
CACHING_HEADERS = (("Cache-Control", "CacheControl"), ("ETag", "ETag"), ("Last-Modified", "LastModified"), ("Link", "Link"))

#: The document's response component that describes each error status (405: x-other-methods describes it).
STATUS_RESPONSES = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    414: "UriTooLong",
    429: "TooManyRequests",
    431: "HeaderFieldsTooLarge",
    500: "InternalError",
    503: "Unavailable",
}

#: ``answer(path_and_query)`` -> ``(status, body)`` of a GET, as the API answers it.
Answer = Callable[[str], Awaitable[tuple[int, bytes]]]


@dataclass(frozen=True)
class Example:
    request: str
    status: int
    body: str
    more: int = 0


def docs_url(language: Language) -> str:
    return f"{DOCS_PATH}?lang={quote(language.code)}"


def _component(document: dict, ref_or_object: dict) -> dict:
    """A ``$ref`` within the document, resolved (one level, as qsite's document uses them)."""
    ref = ref_or_object.get("$ref")
    if not ref:
        return ref_or_object
    node = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def example_path(path: str) -> str | None:
    """The collection whose first result names the example item of ``path`` (``/glossary/{id}``)."""
    return path.removesuffix("/{id}") if path.endswith("/{id}") else None


async def collect_examples(paths: list[str], answer: Answer) -> dict[str, Example]:
    """A real request and answer for each documented path, shortened to ``EXAMPLE_RESULTS`` results."""
    examples: dict[str, Example] = {}
    bodies: dict[str, object] = {}
    for path in paths:
        request = path
        collection = example_path(path)
        if collection is not None:
            results = (bodies.get(collection) or {}).get("results") or [{}]
            if "id" not in results[0]:
                continue
            request = path.replace("{id}", quote(results[0]["id"], safe=""))
        elif path in EXAMPLE_QUERIES:
            request = f"{path}?{EXAMPLE_QUERIES[path]}"
        status, body = await answer(request)
        payload = json.loads(body) if body else None
        bodies[path] = payload if isinstance(payload, dict) else None
        more = 0
        if isinstance(payload, dict) and isinstance(payload.get("results"), list):
            more = max(0, len(payload["results"]) - EXAMPLE_RESULTS)
            payload = {**payload, "results": payload["results"][:EXAMPLE_RESULTS]}
        if payload is not None:
            examples[path] = Example(request, status, json.dumps(payload, indent=2, ensure_ascii=False), more)
    return examples


def schema_facts(schema: dict, _: Callable) -> tuple[str, list[tuple[str, str | None]]]:
    """A parameter's type (as JSON Schema names it) and its limits: ``(words, value or None)`` pairs.

    Values (enums, defaults) are kept apart from the words so the page can set
    them left to right inside right-to-left text.
    """
    facts: list[tuple[str, str | None]] = []
    if schema.get("type") == "array":  # a parameter that may be repeated
        facts.append((_("may be given up to %(count)s times", count=schema.get("maxItems")), None))
        schema = schema.get("items", {})
    kind = schema.get("type", "")
    if schema.get("format"):
        kind = f"{kind} ({schema['format']})"
    if "enum" in schema:
        facts.append((_("one of:"), ", ".join(map(str, schema["enum"]))))
    if "minimum" in schema and "maximum" in schema:
        facts.append((_("from %(minimum)s to %(maximum)s", minimum=schema["minimum"], maximum=schema["maximum"]), None))
    if "maxLength" in schema:
        facts.append((_("at most %(count)s characters", count=schema["maxLength"]), None))
    if "default" in schema:
        facts.append((_("default:"), str(schema["default"])))
    return kind, facts


def _listed(document: dict, schema: dict) -> dict:
    """A parameter's schema as the page lists it: an enum taken in any letter case (``anyOf`` the
    enum's component and its any-case pattern, see :class:`qsite.service.api.kinds.OneOf`) as the enum."""
    if "anyOf" not in schema:
        return schema
    first, *_rest = schema["anyOf"]
    return {**_component(document, first), **{key: value for key, value in schema.items() if key != "anyOf"}}


def operations(document: dict, _: Callable, examples: dict[str, Example]) -> list[dict]:
    """Every GET of the document with its parameters, example and answers, in document order."""
    found = []
    for path, item in document["paths"].items():
        get = item.get("get")
        if get is None:
            continue
        parameters = []
        for parameter in [*item.get("parameters", []), *get.get("parameters", [])]:
            parameter = _component(document, parameter)
            kind, facts = schema_facts(_listed(document, parameter.get("schema", {})), _)
            parameters.append({**parameter, "kind": kind, "facts": facts})
        responses = [
            {"status": status, "description": _component(document, response).get("description", "")}
            for status, response in get["responses"].items()
        ]
        found.append(
            {
                "anchor": get["operationId"],
                "path": path,
                "summary": get.get("summary", ""),
                "description": get.get("description", ""),
                "parameters": parameters,
                "responses": responses,
                "example": examples.get(path),
            }
        )
    return found


def problem_rows(document: dict, gettext: Gettext) -> list[dict]:
    """Every problem type with its status, title and the document's description of that answer."""
    responses = {**document["components"]["responses"]}
    responses["405"] = document["x-other-methods"]["responses"]["405"]
    return [
        {
            "type": PROBLEM_PREFIX + name,
            "status": status,
            "title": gettext(title),
            "description": responses.get(STATUS_RESPONSES.get(status, str(status)), {}).get("description", ""),
        }
        for name, (status, title) in PROBLEMS.items()
    ]


def header_rows(document: dict, wanted: tuple[tuple[str, str], ...]) -> list[dict]:
    headers = document["components"]["headers"]
    return [{"name": name, "description": headers[key]["description"]} for name, key in wanted if key in headers]


def template_gettext(gettext: Gettext) -> Callable:
    """``_(text, **values)`` for the template: the translation, with ``%(name)s`` filled in."""

    def _(text: str, **values) -> str:
        translated = gettext(text)
        return translated % values if values else translated

    return _


def page_context(
    document: dict,
    language: Language,
    gettext: Gettext,
    examples: dict[str, Example],
    rate_limit: tuple[int, int] | None,
    max_age: int,
) -> dict:
    """Everything the template shows; ``document`` is already in ``language``.

    :param rate_limit: ``(requests, seconds)`` of the fair-use limit, None when it is off.
    """
    _ = template_gettext(gettext)
    info = document["info"]
    return {
        "_": _,
        "language": language,
        "languages": [
            {"code": other.code, "name": other.name, "url": docs_url(other), "current": other == language}
            for other in LANGUAGES
        ],
        "info": info,
        "overview": [part for part in info.get("description", "").split("\n\n") if part.strip()],
        "terms": info.get("x-usage-terms", ""),
        "openapi_url": f"{API_PREFIX}/openapi.json?lang={quote(language.code)}",
        "operations": operations(document, _, examples),
        "problems": problem_rows(document, gettext),
        "fair_use_headers": header_rows(document, FAIR_USE_HEADERS),
        "caching_headers": header_rows(document, CACHING_HEADERS),
        "not_modified": document["components"]["responses"]["NotModified"]["description"],
        "rate_limit": rate_limit,
        "max_age": max_age,
    }


class DocsPage:
    """Renders the documentation page for one Datasette instance, through its template environment.

    :param rate_limit: ``(requests, seconds)`` of the fair-use limit, None when it is off.
    """

    def __init__(self, datasette, catalogs: Catalogs, rate_limit: tuple[int, int] | None, max_age: int):
        self.datasette = datasette
        self.catalogs = catalogs
        self.rate_limit = rate_limit
        self.max_age = max_age

    async def render(self, document: dict, language: Language, examples: dict[str, Example]) -> str:
        """The page in ``language``; ``document`` is the OpenAPI document already in that language."""
        gettext = self.catalogs.gettext(language)
        context = page_context(document, language, gettext, examples, self.rate_limit, self.max_age)
        return await self.datasette.render_template(TEMPLATE, context)
