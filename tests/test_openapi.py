"""/api/v1/openapi.json: a valid OpenAPI 3.1 document that describes the service exactly."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.versions.shortcuts import get_spec_version

import schemathesis

from schemathesis.specs.openapi.checks import positive_data_acceptance

from qsite.db.model import TAGS
from qsite.service.api import endpoints, parameter_table
from qsite.service.api.parameters import ECHO_MAX, MAX_ERRORS
from qsite.service.http.problems import PROBLEMS
from qsite.service.i18n import LANGUAGES
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import seeded_database


@pytest.fixture
def config_path(make_config, tmp_path):
    seeded_database(tmp_path / "site.db").close()
    # the seeded data is days old: a bound of ten years keeps /health a 200 (a 503 is a server error to schemathesis)
    return make_config(api={"cache_max_age": 120, "rate_limit": "off", "health_max_data_age": "3650d"})


@pytest.fixture
def document(config_path):
    with ApiClient(datasette_for_config(config_path)) as client:
        yield client.get("/api/v1/openapi.json").json()


def test_valid_openapi_3_1(document):
    validate_spec(document)
    assert document["openapi"] == "3.1.0"
    assert get_spec_version(document).major == "3" and get_spec_version(document).minor == "1"


def test_info_carries_the_usage_terms(document):
    terms = document["info"]["x-usage-terms"].lower()
    for phrase in ("fair use", "attribution is appreciated", "belong to their original publishers",
                   "education and research only", "not investment advice"):
        assert phrase in terms
        assert phrase in document["info"]["description"].lower()


def test_parameters_match_what_the_code_enforces(document):
    parameters = document["components"]["parameters"]
    # each enum once, as a component, referred to wherever it appears (one type in generated clients)
    schemas = document["components"]["schemas"]
    assert schemas["Tag"] == {"type": "string", "enum": list(TAGS)}
    assert schemas["LanguageCode"]["enum"] == [language.code for language in LANGUAGES]
    for tag in (schemas["NewsItem"]["properties"]["tag"], schemas["Source"]["properties"]["tag"]):
        assert tag["$ref"] == "#/components/schemas/Tag"
    assert schemas["NewsPage"]["properties"]["tag"]["anyOf"] == [{"$ref": "#/components/schemas/Tag"}, {"type": "null"}]
    # an enum is a component of its own (only that: type and enum), or the Problem's type and status
    enums = {name for name, schema in schemas.items() if set(schema) == {"type", "enum"}}
    assert {"Tag", "LanguageCode", "NewsSort", "HealthStatus", "IngestStatus"} <= enums
    assert '"enum"' not in json.dumps({name: schema for name, schema in schemas.items() if name not in enums | {"Problem"}})
    # the server takes any letter case (tag=science), and the schema says so: the enum, or its words in any case
    tag_schema = parameters["tag"]["schema"]
    assert tag_schema["anyOf"][0] == {"$ref": "#/components/schemas/Tag"}
    any_case = re.compile(tag_schema["anyOf"][1]["pattern"])
    assert all(any_case.match(word) for word in ("science", "SCIENCE", "inDustry", "Investing"))
    assert not any(any_case.match(word) for word in ("scienc", "sciences", "Science ", "", "news"))
    lang_schema = parameters["lang"]["schema"]
    assert lang_schema["anyOf"][0] == {"$ref": "#/components/schemas/LanguageCode"} and lang_schema["default"] == "en"
    assert re.match(lang_schema["anyOf"][1]["pattern"], "ZH-hans") and not re.match(lang_schema["anyOf"][1]["pattern"], "zh")
    assert parameters["limit"]["schema"] == {
        "type": "integer",
        "minimum": parameter_table.LIMIT_MIN,
        "maximum": parameter_table.LIMIT_MAX,
        "default": parameter_table.LIMIT_DEFAULT,
    }
    assert (parameter_table.LIMIT_MIN, parameter_table.LIMIT_MAX, parameter_table.LIMIT_DEFAULT) == (1, 100, 20)
    assert parameters["q"]["schema"]["maxLength"] == parameter_table.Q_MAX
    news = document["paths"]["/api/v1/news"]["get"]["parameters"]
    assert [p["$ref"].rsplit("/", 1)[1] for p in news] == [param.ref for param in endpoints.ENDPOINTS["news"].params]
    problem = document["components"]["schemas"]["Problem"]
    assert problem["properties"]["type"]["enum"] == [f"/api/v1/problems/{name}" for name in PROBLEMS]
    headers = document["components"]["headers"]
    assert headers["CacheControl"]["schema"]["enum"] == ["public, max-age=120", "private, no-store"]
    assert headers["NoStore"]["schema"]["enum"] == ["no-store", "private, no-store"]
    assert problem["properties"]["errors"]["maxItems"] == MAX_ERRORS
    parameter_error = document["components"]["schemas"]["ParameterError"]
    assert parameter_error["properties"]["parameter"]["maxLength"] == ECHO_MAX + 1


def test_every_path_is_documented_with_get_only(document):
    paths = document["paths"]
    assert set(paths) == {"/api/v1", "/api/v1/openapi.json", "/api/v1/docs", "/api/v1/courses", "/api/v1/glossary",
                          "/api/v1/glossary/{id}", "/api/v1/news", "/api/v1/news/removed", "/api/v1/news/{id}",
                          "/api/v1/news.atom", "/api/v1/news.json", "/api/v1/sources", "/api/v1/stats", "/api/v1/health",
                          "/api/v1/snapshot", "/api/v1/snapshot/{file}"}
    tags = {tag["name"] for tag in document["tags"]}
    for path, item in paths.items():
        # one operation per endpoint: HEAD and OPTIONS are HTTP mechanics (x-head, x-preflight), and as
        # operations they gave every generated client two more methods per endpoint
        assert set(item) - {"parameters"} == {"get"}
        # 503: no data yet, and on a following replica every path before its first snapshot
        # /health alone has no 304: never cached, a probe must see the state now
        conditional = set() if path == "/api/v1/health" else {"304"}
        assert set(item["get"]["responses"]) >= {"200", "400", "429", "500", "503", "414", "431"} | conditional
        assert item["get"]["description"] and set(item["get"]["tags"]) <= tags
    assert document["x-head"]["description"] and "x-head" in document["info"]["description"]
    assert set(document["x-preflight"]["responses"]) == {"204", "429", "414", "431"}
    assert "x-preflight" in document["info"]["description"]
    other = document["x-other-methods"]
    assert other["methods"] == ["POST", "PUT", "PATCH", "DELETE", "TRACE"]
    assert set(other["responses"]) == {"405", "429", "414", "431"} and "405" in other["description"]
    # RFC 9457 3.2: problem types may gain extension members, which clients ignore
    assert "additionalProperties" not in document["components"]["schemas"]["Problem"]
    assert document["security"] == [] and document["servers"][0]["url"] == "/"


@pytest.mark.slow
def test_schemathesis_finds_nothing_undocumented(config_path):
    """Property-based: generated requests to every operation get documented answers.

    Checks status codes, media types, bodies and headers against the document and
    that nothing is a server error. ``positive_data_acceptance`` is left out: a
    schema-valid ``cursor`` is any string, but only one the service issued is accepted.
    """
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", datasette_for_config(config_path).app())
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        examples = 12 if operation.method.upper() in ("GET", "HEAD") else 2

        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case):
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        check()
        operations += 1
    # every path's GET, less the GET that loaded the document
    assert operations == len(endpoints.ENDPOINTS) - 1
