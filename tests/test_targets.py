"""Odd request targets, oversized heads and what a careful client notices, against a real ``qsite serve``.

Issue 13, sections 1 (the size caps), 5 and 6: no request target answers 5xx
(Datasette's error handler used to fail whenever ``rich`` is importable, and
its errors were 500s); absolute-form and ``OPTIONS *`` are accepted; request
targets and header fields over 8 KiB are refused with a problem; CORS
preflight works on any /api/v1 path and Datasette's JSON and CSV are readable
cross-origin; a bad or repeated ``If-Modified-Since`` is ignored; each problem
``type`` leads to a page.
"""

from __future__ import annotations

import importlib.util
import json

import httpx
import pytest

from tests.support.known_data import seeded_database
from tests.support.processes import qsite_serve
from qsite.service.http.targets import check_target
from tests.support.raw_http import raw_request

#: A real server for the module, seconds to start: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

OK_OR_CLIENT_ERROR = range(200, 500)
from qsite.service.compat import datasette_1

#: Where Datasette runs arbitrary SQL as JSON: 1.0 moved it to /<db>/-/query (the old URL redirects).
SQL_JSON = "/site/-/query.json" if datasette_1() else "/site.json"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    # Datasette 0.65's handler failed only where rich can be imported: these tests need it there.
    assert importlib.util.find_spec("rich") is not None, "rich must be installed for these tests (the test extra has it)"
    folder = tmp_path_factory.mktemp("targets")
    seeded_database(folder / "site.db").close()
    config = folder / "qsite.yml"
    config.write_text(
        json.dumps(
            {
                "database": str(folder / "site.db"),
                "site_export": {"source": str(folder / "export.json")},
                "api": {"rate_limit": "off"},
            }
        ),
        encoding="utf-8",
    )
    with qsite_serve(config, folder / "serve.log") as server:
        yield server
    log = (folder / "serve.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def problem(body: bytes) -> dict:
    found = json.loads(body)
    assert {"type", "title", "status", "detail"} <= set(found)
    return found


@pytest.mark.parametrize(
    "target, expected",
    [
        ("/a/b/c/d/e/f/g", 404),
        ("//x", 404),
        ("//evil.example/", 404),  # never a redirect to another site
        ("/site/news.json?_sort=nope", 400),
        ("/site/news?_sort_desc=nope", 400),
        ("/site/news.json?_sort=tag&_sort_desc=tag", 400),
        (SQL_JSON + "?sql=select+nope", 400),
        ("/nope.json", 404),
        ("/site/nope", 404),
        ("/site/news/nope.json", 404),
    ],
)
def test_odd_targets_answer_4xx_never_5xx(served, target, expected):
    status, headers, body = raw_request(served.port, target)
    assert status == expected, (target, status, body[:300])
    assert b"Traceback" not in body and b"site.db" not in body


def test_absolute_form_is_the_same_request_as_origin_form(served):
    """RFC 9112 3.2.2: accepted."""
    authority = f"127.0.0.1:{served.port}"
    for path in ("/api/v1/stats", "/api/v1/news?limit=2", "/site/news.json?_size=2&_shape=array&_nofacet=1"):
        origin = raw_request(served.port, path)
        for scheme in ("http", "HTTP"):
            absolute = raw_request(served.port, f"{scheme}://{authority}{path}")
            assert absolute[0] == origin[0] == 200, (path, absolute[0], absolute[2][:200])
            assert absolute[2] == origin[2]


@pytest.mark.parametrize("server_gives", ["target", "target and query"])
def test_absolute_form_as_a_server_may_pass_it_on(server_gives):
    """Granian takes absolute-form apart itself; uvicorn passes the whole target on as the path.

    The wrapper then uses the path and query, and the target's authority as the
    host, ignoring the Host field (RFC 9112 3.2.2), so Datasette's absolute
    links name the host the client asked.
    """
    target = b"HTTP://Example.org:8080/api/v1/news"
    scope = {"type": "http", "method": "GET", "raw_path": target, "path": target.decode(), "query_string": b"limit=2",
             "headers": [(b"host", b"forged.example"), (b"accept", b"*/*")]}
    if server_gives == "target and query":
        scope = {**scope, "raw_path": target + b"?limit=2", "query_string": b""}
    rewritten, answer = check_target(scope)
    assert answer is None
    assert (rewritten["raw_path"], rewritten["path"], rewritten["query_string"]) == (b"/api/v1/news", "/api/v1/news", b"limit=2")
    assert rewritten["headers"] == [(b"accept", b"*/*"), (b"host", b"Example.org:8080")]


def test_asterisk_form(served):
    status, headers, body = raw_request(served.port, "*", method="OPTIONS")
    assert status == 204 and headers["allow"] == "GET, HEAD, OPTIONS" and body == b""
    status, _, body = raw_request(served.port, "*")
    assert status == 400 and problem(body)["type"] == "/api/v1/problems/bad-request"


def test_request_targets_and_header_fields_over_8_kib_are_refused(served):
    """The memory attack of issue 13: /api/v1/stats? followed by 100,000 "&". Datasette's pages take 32 KiB."""
    fits = raw_request(served.port, "/api/v1/stats?" + "&" * 8000)
    assert fits[0] == 200
    for path in ("/site/news.json?_size=1&", "/"):
        assert raw_request(served.port, path + "&" * 16_400)[0] not in (414, 431), path  # a researcher's long ?sql=
    many = [("Host", "127.0.0.1"), ("Cookie", "sso=" + "c" * 16_400)]
    assert raw_request(served.port, "/site", headers=many)[0] == 200  # an SSO proxy's cookie
    for path, over in (("/api/v1/stats?", 8200), ("/site/news.json?_size=1&", 33_000), ("/", 33_000)):
        status, headers, body = raw_request(served.port, path + "&" * over)
        assert status == 414 and problem(body)["type"] == "/api/v1/problems/uri-too-long", (path, status)
        assert headers["cache-control"] == "no-store"
        # far over: the server may refuse it before the app sees it (granian does, with an empty 414 or 431)
        status, _, body = raw_request(served.port, path + "&" * 100_000)
        assert status in (414, 431) and (body == b"" or problem(body)["status"] == status)
    status, _, body = raw_request(served.port, "/api/v1/glossary/" + "x" * 9000)
    assert status == 414
    many = [("Host", "127.0.0.1")] + [(f"X-Padding-{n}", "v" * 100) for n in range(90)]
    status, _, body = raw_request(served.port, "/api/v1/stats", headers=many)
    assert status == 431 and problem(body)["type"] == "/api/v1/problems/header-fields-too-large"
    assert raw_request(served.port, "/api/v1/stats", headers=many[:60])[0] == 200


def test_preflight_anywhere_under_api_v1_and_cors_on_datasette_json_and_csv(served):
    preflight = {"Origin": "https://notebook.example", "Access-Control-Request-Method": "GET"}
    for path in ("/api/v1/nope", "/api/v1/glossary/a/b", "/api/v1/news"):
        response = httpx.options(served.url(path), headers=preflight)
        assert response.status_code == 204, path
        assert response.headers["access-control-allow-origin"] == "*"
    # ... so a script can read the 404 that follows
    missing = httpx.get(served.url("/api/v1/nope"), headers={"Origin": "https://notebook.example"})
    assert missing.status_code == 404 and missing.headers["access-control-allow-origin"] == "*"
    for path in ("/site/news.json", "/site/news.csv", SQL_JSON + "?sql=select+1", "/site/api_stats.json", "/-/metadata.json"):
        response = httpx.get(served.url(path), headers={"Origin": "https://notebook.example"})
        assert response.status_code == 200, path
        assert response.headers["access-control-allow-origin"] == "*", path


@pytest.mark.parametrize(
    "since",
    [
        "Sat, 21 Nov 2026 00:00:00 GMT, Sun, 22 Nov 2026 00:00:00 GMT",  # two members
        "21 Nov 2026 00:00:00 GMT",  # no day name: not an HTTP-date
        "Sat, 21 Nov 2026 00:00:00",  # no GMT
        "Sat, 21 Nov 2026 00:00:00 +0000",
        "2026-11-21T00:00:00Z",
    ],
)
def test_an_invalid_if_modified_since_is_ignored(served, since):
    url = served.url("/api/v1/courses")
    assert httpx.get(url, headers={"If-Modified-Since": "Sat, 21 Nov 2026 00:00:00 GMT"}).status_code == 304
    assert httpx.get(url, headers={"If-Modified-Since": since}).status_code == 200


def test_a_repeated_if_modified_since_is_ignored(served):
    date = "Sat, 21 Nov 2026 00:00:00 GMT"
    status, _, _ = raw_request(served.port, "/api/v1/courses", headers=[("Host", "x"), ("If-Modified-Since", date), ("If-Modified-Since", date)])
    assert status == 200


def test_every_problem_type_leads_to_its_page(served):
    answered = {
        "/api/v1/nope": 404,
        "/api/v1/news?limit=0": 400,
        "/api/v1/stats?" + "&" * 9000: 414,
    }
    types = set()
    for target, status in answered.items():
        got, _, body = raw_request(served.port, target)
        assert got == status
        types.add(problem(body)["type"])
    document = httpx.get(served.url("/api/v1/openapi.json")).json()
    types |= set(document["components"]["schemas"]["Problem"]["properties"]["type"]["enum"])
    for type_uri in sorted(types):
        page = httpx.get(served.url(type_uri))
        assert page.status_code == 200, type_uri
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert type_uri in page.text and "<h1>" in page.text
    assert httpx.get(served.url("/api/v1/problems/nope")).status_code == 404
    assert httpx.post(served.url("/api/v1/problems/not-found")).status_code == 405
    refused = httpx.get(served.url("/api/v1/problems/not-found?x=1"))  # takes no parameter, as every path here
    assert refused.status_code == 400 and refused.json()["errors"][0]["parameter"] == "x"
