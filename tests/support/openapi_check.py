"""Validates responses against the project's own OpenAPI 3.1 document."""

from __future__ import annotations

import json
import re

import httpx
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate as validate_spec


class OpenAPICheck:
    """Validates responses against the project's own OpenAPI 3.1 document.

    For each response: the path and method exist, the status is documented,
    every required header is there and matches its schema, the headers the
    service and its rate limiter add are documented wherever they are sent,
    the media type is documented, and the body validates against the schema
    (or is empty where the document says there is none).
    """

    #: Sent by the service or the rate limiter: wherever one appears, the document must describe it.
    OWN_HEADERS = ("cache-control", "etag", "link", "allow", "retry-after", "ratelimit", "ratelimit-policy", "content-language")

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
        if path == "/api/v1/":  # the index's description: the same answer as /api/v1
            path = "/api/v1"
        template = next((template for pattern, template in self.templates if pattern.match(path)), None)
        status = str(response.status_code)
        if template is None:
            assert status == "404", f"{path} is not documented, yet answered {status}"
            documented = self.deref(self.document["components"]["responses"]["NotFound"])
        else:
            # GET is the one operation; HEAD answers as GET without content (x-head), OPTIONS is the CORS
            # preflight (x-preflight), and the document's x-other-methods says what any other method gets.
            method = method.upper()
            if method in ("GET", "HEAD"):
                operation = self.document["paths"][template]["get"]
            elif method == "OPTIONS":
                operation = self.document["x-preflight"]
            else:
                operation = self.document["x-other-methods"]
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
            if media_type.endswith("json"):
                self.validate(content[media_type]["schema"], json.loads(response.content))
            elif media_type == "text/html":  # the documentation page: a string
                self.validate(content[media_type]["schema"], response.text)
            else:  # a file (the snapshot download): its bytes are checked by the test that asked for it
                assert response.content, f"{method} {path} {status}: empty {media_type}"
        self.checked += 1
