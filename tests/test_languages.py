"""The interface in every language: /api/v1/openapi.json?lang=, the index's languages, /api/v1/docs."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate as validate_spec

from qsite.pipeline.store import open_database
from qsite.service.api.endpoints import USAGE_TERMS
from qsite.service.i18n import LANGUAGES, Catalogs, document_texts, translate_document
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import COURSES, news_items, seed_news, seeded_database

CODES = [language.code for language in LANGUAGES]


@pytest.fixture
def client(make_config, tmp_path):
    seeded_database(tmp_path / "site.db").close()
    client = ApiClient(datasette_for_config(make_config(api={"cache_max_age": 120, "rate_limit": "30/minute"})))
    yield client
    client.close()


def blank_texts(document: dict) -> dict:
    """Everything but the texts for people: paths, parameter names, tag values, fields, problem types, ..."""
    return translate_document(document, lambda text: "")


def test_the_index_lists_every_language(client):
    assert client.get("/api/v1").json()["languages"] == [
        {"code": language.code, "name": language.name} for language in LANGUAGES
    ]
    assert {"code": "de", "name": "Deutsch"} in client.get("/api/v1/").json()["languages"]


@pytest.mark.parametrize("code", CODES)
def test_each_language_has_the_same_identifiers_as_english(client, code):
    english = client.get("/api/v1/openapi.json").json()
    response = client.get(f"/api/v1/openapi.json?lang={code}")
    assert response.status_code == 200
    assert response.headers["content-language"] == code
    document = response.json()
    validate_spec(document)
    assert blank_texts(document) == blank_texts(english)
    # spelled out: the identifiers the spec names
    assert list(document["paths"]) == list(english["paths"])
    names = lambda doc: sorted(p["name"] for p in doc["components"]["parameters"].values())  # noqa: E731
    assert names(document) == names(english)
    assert document["components"]["schemas"]["Tag"]["enum"] == ["Science", "Industry", "Investing"]
    fields = lambda doc: {n: sorted(s.get("properties", {})) for n, s in doc["components"]["schemas"].items()}  # noqa: E731
    assert fields(document) == fields(english)
    problem_types = lambda doc: doc["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]  # noqa: E731
    assert problem_types(document) == problem_types(english)
    texts = [text for _, text in document_texts(document)]
    english_texts = [text for _, text in document_texts(english)]
    if code == "en":
        assert texts == english_texts
    else:  # translated, and each text as its catalog has it
        gettext = Catalogs().gettext(next(language for language in LANGUAGES if language.code == code))
        assert texts == [gettext(text) for text in english_texts]
        assert sum(a != b for a, b in zip(texts, english_texts)) >= 0.9 * len(texts)


def test_lang_ignores_letter_case_and_defaults_to_english(client):
    canonical = client.get("/api/v1/openapi.json?lang=zh-Hans")
    loose = client.get("/api/v1/openapi.json?lang=ZH-hans")
    assert loose.headers["content-language"] == "zh-Hans" and loose.content == canonical.content
    assert loose.headers["etag"] == canonical.headers["etag"]
    default = client.get("/api/v1/openapi.json")
    assert default.headers["content-language"] == "en"
    assert default.content == client.get("/api/v1/openapi.json?lang=en").content
    assert client.get("/api/v1/openapi.json", headers={"if-none-match": default.headers["etag"]}).status_code == 304


@pytest.mark.parametrize("query", ["lang=xx", "lang=", "lang=english", "lang=de&lang=fr", "lang=de-DE"])
def test_an_unknown_language_is_a_problem_listing_the_languages(client, query):
    for path in ("/api/v1/openapi.json", "/api/v1/docs"):
        response = client.get(f"{path}?{query}")
        assert response.status_code == 400
        problem = response.json()
        assert problem["type"] == "/api/v1/problems/invalid-parameters"
        (error,) = problem["errors"]
        assert error["parameter"] == "lang"
        if "&" not in query:
            assert all(code in error["detail"] for code in CODES), error["detail"]


def test_terms_of_service_is_an_absolute_url_of_the_host_asked(client):
    document = client.get("/api/v1/openapi.json?lang=fr", headers={"host": "api.example.org:8443"}).json()
    assert document["info"]["termsOfService"] == "http://api.example.org:8443/api/v1/docs#terms"
    assert document["servers"] == [{"url": "/", "description": document["servers"][0]["description"]}]
    for hostile in ('evil"}, "x": "', "a b", "x" * 300, "host/path", ""):
        response = client.get("/api/v1/openapi.json", headers={"host": hostile})
        assert response.status_code == 200
        assert response.json()["info"]["termsOfService"] == "http://localhost/api/v1/docs#terms"


@pytest.mark.parametrize("language", LANGUAGES, ids=lambda language: language.code)
def test_the_documentation_page(client, language):
    response = client.get(f"/api/v1/docs?lang={language.code}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-language"] == language.code
    html = response.text
    assert f'<html lang="{language.code}" dir="{language.direction}">' in html
    assert "<script" not in html and "http://" not in html.replace("http://localhost", "")
    # a language switcher with every language
    for other in LANGUAGES:
        assert f'href="/api/v1/docs?lang={other.code}" lang="{other.code}" hreflang="{other.code}"' in html
    assert 'aria-current="page">' + language.name in html
    # every endpoint, with a real example from the data, errors, limits, caching and the terms
    document = client.get(f"/api/v1/openapi.json?lang={language.code}").json()
    for path, item in document["paths"].items():
        assert f"GET {path}</code>" in html
        assert str(item["get"]["summary"]).replace("'", "&#39;") in html
    assert "GET /api/v1/news?limit=2" in html and "GET /api/v1/glossary/" in html
    assert COURSES[0]["title"] in html and "&#34;results&#34;: [" in html
    for problem_type in document["components"]["schemas"]["Problem"]["properties"]["type"]["enum"]:
        assert problem_type in html
    for header in ("RateLimit", "RateLimit-Policy", "Retry-After", "ETag", "Last-Modified", "Cache-Control"):
        assert f'<code class="ident" dir="ltr">{header}</code>' in html
    assert "30" in html and "60" in html  # this instance's limit: 30 requests per 60 seconds
    terms = document["info"]["x-usage-terms"]
    assert terms.replace("’", "&#39;") in html or terms in html
    if language.code == "en":
        assert terms == USAGE_TERMS


def test_the_page_follows_the_data_and_answers_conditionally(client, tmp_path):
    first = client.get("/api/v1/docs?lang=de")
    assert client.get("/api/v1/docs?lang=DE").content == first.content
    assert client.get("/api/v1/docs?lang=de", headers={"if-none-match": first.headers["etag"]}).status_code == 304
    db = open_database(tmp_path / "site.db")
    seed_news(db, [{**news_items(1, prefix="fresh")[0], "title": "A brand-new headline"}], changed_at="2026-11-21T00:00:00Z")
    db.close()
    get_api = __import__("qsite.service.datasette.plugin", fromlist=["get_api"]).get_api
    client.run(get_api(client.datasette).cache.refresh(force=True))
    second = client.get("/api/v1/docs?lang=de")
    assert second.headers["etag"] != first.headers["etag"] and "A brand-new headline" in second.text


def test_datasettes_about_and_license_links_lead_to_the_page(client):
    html = client.get("/", validate=False).text
    assert re.search(r'<a href="/api/v1/docs">[^<]*</a>', html), "About"
    assert re.search(r'<a href="/api/v1/docs#terms">[^<]*</a>', html), "License"
    assert client.get("/api/v1/docs").status_code == 200
