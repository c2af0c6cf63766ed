"""Hostile requests against a real ``qsite serve``: fuzzed from our own OpenAPI document, and by hand.

schemathesis reads /api/v1/openapi.json from the running process and sends
generated requests, valid and invalid, to every operation; each response must
be no 5xx and must match the document (status, content type, headers, body
schema). Then SQL-injection strings, huge and repeated parameters, odd
encodings and long URLs: each gets a 4xx problem (or, for the free-text
``q``, a normal answer) that also validates against the document, and the
data is unchanged afterwards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.config_files import write_config
from tests.support.openapi_check import OpenAPICheck
from tests.support.paths import FEEDS
from tests.support.processes import qsite_serve, run_qsite
from tests.support.schemathesis_cli import run_phases
from tests.support.snapshot import snapshot
from tests.support.raw_http import raw_request

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

SOAK = bool(os.environ.get("QSITE_SOAK"))
EXAMPLES = 400 if SOAK else 40
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance, response_schema_conformance]
SEEN = {"requests": 0, "statuses": {}, "operations": 0}
#: Figures of the last run, for the README.
FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "fuzz.json"


SOURCES = [
    {"name": "Quantum Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
    {"name": "Qubit Industry Wire", "url": str(FEEDS / "industry-wire.atom"), "tag": "Industry"},
    {"name": "Quantum Capital Brief", "url": str(FEEDS / "capital-brief.rdf"), "tag": "Investing"},
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    config = write_config(folder, news={"sources": SOURCES}, api={"cache_max_age": 60, "rate_limit": "off"})
    result = run_qsite("ingest", "all", "--config", str(config))
    assert result.returncode == 0, result.stderr
    with qsite_serve(config, folder / "serve.log") as server:
        server.db = folder / "site.db"
        yield server
    log = (folder / "serve.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps(SEEN, sort_keys=True))


def operations(served):
    schema = schemathesis.openapi.from_url(served.url("/api/v1/openapi.json"))
    return [result.ok() for result in schema.get_all_operations()]


# schemathesis's own pytest plugin does not run under pytest 9, so each operation's
# strategy is driven by hypothesis directly: the same generation, the same checks.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_every_operation_against_the_document(served, mode):
    found = operations(served)
    openapi = OpenAPICheck(httpx.get(served.url("/api/v1/openapi.json")).json())
    assert {op.path for op in found} >= {"/api/v1/courses", "/api/v1/glossary", "/api/v1/glossary/{id}", "/api/v1/news", "/api/v1/stats"}
    statuses, unsatisfiable = {}, []
    for operation in found:
        if mode == GenerationMode.NEGATIVE and not operation.path_parameters and not operation.query:
            continue  # nothing to make invalid
        SEEN["operations"] += 1

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def call(case):
            response = case.call_and_validate(base_url=served.base, checks=CHECKS)
            # HEAD is no operation (x-head): the same request as HEAD gets the same status and headers, no body
            target = response.request.url.removeprefix(served.base)
            status, headers, body = raw_request(served.port, target, "HEAD")
            assert (status, body) == (response.status_code, b""), (target, status)
            openapi.check("HEAD", httpx.Response(status, headers=headers, content=body), path=target.partition("?")[0])
            SEEN["requests"] += 1
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            SEEN["statuses"][str(response.status_code)] = SEEN["statuses"].get(str(response.status_code), 0) + 1
            if response.status_code >= 400 and case.method.upper() != "HEAD":
                problem = response.json()
                assert problem["status"] == response.status_code and problem["type"].startswith("/api/v1/problems/")

        try:
            call()
        except Unsatisfiable:
            # Every value is valid for this operation (e.g. any string is an {id}): no invalid case exists.
            assert mode == GenerationMode.NEGATIVE, operation.label
            unsatisfiable.append(operation.label)
    assert "GET /api/v1/news" not in unsatisfiable
    assert not [status for status in statuses if status >= 500]
    if mode == GenerationMode.NEGATIVE:
        assert statuses.get(400), statuses  # invalid input was really sent, and refused


def test_schemathesis_examples_and_stateful_phases_find_no_failure(served):
    """schemathesis's own runner, as CI would run it: the examples phase (every parameter's example)
    and the stateful phase (a response's values fed to the operations that take them, such as a
    glossary entry's id), with every check, positive_data_acceptance included; 0 failures."""
    run_phases(served.url("/api/v1/openapi.json"), "examples,stateful", EXAMPLES, Path(served.db).parent / "schemathesis.json")


INJECTIONS = [
    "' OR '1'='1",
    "1; DROP TABLE news; --",
    "Science' UNION SELECT sql, 1, 1, 1, 1, 1, 1 FROM sqlite_master --",
    '" OR ""="',
    "1) OR (1=1",
    "%' AND 1=0 UNION SELECT * FROM news --",
    "'; ATTACH DATABASE '/tmp/x.db' AS x; --",
    "\\'; SELECT load_extension('x'); --",
]


def problem_of(response) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == response.status_code and "detail" in body
    text = response.text.lower()
    # The detail may quote what was sent; it must never show an error's innards.
    assert not any(marker in text for marker in ("traceback", "sqlite3", "operationalerror", "site.db", "line ", ".py")), text[:300]
    return body


def hostile_requests():
    """(path with raw query, expected) pairs; expected is a status class: 4 for a 4xx problem, 2 for an answer."""
    cases = []
    for value in INJECTIONS:
        quoted = httpx.QueryParams({"v": value}).get("v") and str(httpx.QueryParams({"v": value}))[2:]
        for param in ("tag", "limit", "cursor", "since"):
            cases.append((f"/api/v1/news?{param}={quoted}", 4))
        # free text: searched for, literally, but for an upper-case OR with no word before it (a 400 naming q)
        cases.append((f"/api/v1/glossary?q={quoted}", 4 if value.startswith("' OR ") else 2))
        cases.append((f"/api/v1/glossary/{quoted.replace('+', '%20')}", 4))
        cases.append((f"/api/v1/courses?id={quoted}", 4))
    cases += [
        ("/api/v1/news?limit=" + "9" * 10_000, 4),
        ("/api/v1/news?limit=1e3", 4),
        ("/api/v1/news?limit=-1", 4),
        ("/api/v1/news?limit=0x10", 4),
        ("/api/v1/news?limit=%EF%BC%91", 4),  # a full-width digit one
        ("/api/v1/news?tag=Science&tag=Science", 4),
        ("/api/v1/news?tag=Science&TAG=Industry", 4),
        ("/api/v1/news?" + "&".join(["limit=5"] * 2000), 4),
        ("/api/v1/news?" + "&".join(f"p{n}=1" for n in range(1000)), 4),
        ("/api/v1/glossary?q=" + "a" * 50_000, 4),
        ("/api/v1/news?since=" + "9" * 5000, 4),
        ("/api/v1/news?since=2026-02-30T00:00:00Z", 4),
        ("/api/v1/news?since=0000-01-01T00:00:00Z", 4),
        ("/api/v1/news?cursor=" + "A" * 20_000, 4),
        ("/api/v1/news?cursor=%00%00", 4),
        ("/api/v1/news?tag=%FF%FE", 4),
        ("/api/v1/news?%FF=1", 4),
        ("/api/v1/news?tag=Sc%00ience", 4),
        ("/api/v1/news?tag=%C0%AF", 4),  # overlong UTF-8
        ("/api/v1/news?tag=science%", 4),
        ("/api/v1/news?tag=%%32%35", 4),
        ("/api/v1/glossary/%FF", 4),
        ("/api/v1/glossary/%00", 4),
        ("/api/v1/glossary/..%2F..%2Fetc%2Fpasswd", 4),
        ("/api/v1/glossary/" + "x" * 7000, 4),
        ("/api/v1/" + "a/" * 3000, 4),
        ("/api/v1/stats/..", 4),
        ("/api/v1/stats;drop", 4),
        ("/api/v1/stats?" + "x" * 6000, 4),
        ("/api/v1/glossary?q=%E2%80%AE%F0%9F%98%80%CC%81", 2),  # RTL override, emoji, combining mark
        ("/api/v1/glossary?q=%22unterminated", 2),
        ("/api/v1/glossary?q=NEAR(a%20b)%20OR%20c*", 2),  # FTS syntax is escaped, never run; OR is qsite's
        ("/api/v1/glossary?q=NEAR(a%20b)%20OR%20*", 4),  # an OR with no word after it
        ("/api/v1/news?q=-%22a%20b%22%20-c", 4),  # nothing to include
        ("/api/v1/news?q=a%20OR%20OR%20b", 4),
        ("/api/v1/news?q=%7Bscience%7D:%20(a%20NOT%20b)%20-facets:%20s1%20OR%20t1science*%20^c", 2),
        ("/api/v1/news?q=" + "-a%20" * 40 + "b", 2),  # 200 characters, 40 of them excluded words
        ("/api/v1/news?q=" + "a%20OR%20" * 33 + "b", 2),  # 199 characters: 34 words, either of which
        ("/api/v1/news.atom?q=%E6%97%A5%E6%9C%AC%E8%AA%9E%20-%D8%A7%D9%84%D8%B9%D8%B1%D8%A8%D9%8A%D8%A9", 2),  # other scripts
        ("/api/v1/news?since=2026-11-20T00:00:00Z&until=2026-11-19T00:00:00Z", 4),  # since after until
        ("/api/v1/news?from=2026-11-20&apiKey=k&page=2", 4),  # other APIs' names
        # a source no publisher has, when nothing matches (each name quoted cut, with the publisher meant)
        ("/api/v1/news.json?source=Quantum%20Lab%20Notes,Qubit%20Industry%20Wire", 4),
        ("/api/v1/news?" + "&".join(f"source=quantum%20lab%20notes%27{n:02d}" + "%2C" * 180 for n in range(20)), 4),
    ]
    return cases


def raw_get(served, target: str, method: str = "GET") -> tuple[int, dict, bytes]:
    return raw_request(served.port, target, method)


def test_injection_huge_repeated_and_odd_requests_get_4xx_problems(served):
    before = snapshot(served.db)
    total = httpx.get(served.url("/api/v1/stats")).json()["glossary_terms"]
    openapi = OpenAPICheck(httpx.get(served.url("/api/v1/openapi.json")).json())
    tried = 0
    for target, expected in hostile_requests():
        status, headers, body = raw_get(served, target)
        tried += 1
        assert status < 500, (target[:120], status, body[:300])
        response = httpx.Response(status, headers=headers, content=body)
        if expected == 4:
            problem_of(response)
            # every error body stays small, whatever was sent (names are cut, errors capped)
            assert len(body) < 4096, (target[:120], len(body))
        else:
            assert status == 200, (target[:120], status, body[:300])
            if target.startswith("/api/v1/glossary"):
                assert json.loads(body)["count"] <= total
        openapi.check("GET", response, path=target.partition("?")[0])
    writes = ("POST", "PUT", "DELETE", "PATCH", "TRACE")
    for method in writes:
        status, headers, body = raw_get(served, "/api/v1/news?sql=delete%20from%20news", method)
        assert status == 405 and headers["allow"] == "GET, HEAD, OPTIONS"
        openapi.check(method, httpx.Response(status, headers=headers, content=body), path="/api/v1/news")
    assert openapi.checked == tried + len(writes) == 99 + 5
    assert snapshot(served.db) == before
    SEEN["requests"] += tried + len(writes)


def test_very_long_request_lines_are_refused_not_crashed(served):
    for size in (9_000, 70_000, 1_000_000):
        try:
            status, _, _ = raw_get(served, "/api/v1/news?tag=" + "S" * size)
        except (ConnectionError, OSError):
            status = None  # the server may close the connection on a line too long
        assert status is None or 400 <= status < 500, (size, status)
    assert httpx.get(served.url("/api/v1/stats")).status_code == 200  # and it still serves
