"""The deployer's Datasette permissions hold on /api/v1 (service/datasette/access.py).

A ``datasette.yaml`` that sets ``allow`` on the news query makes /api/v1/news
answer as the query's own page does: 403 (a problem document) to whoever the
rule leaves out, the data to whoever it lets in; other endpoints are untouched.
"""

from __future__ import annotations

import pytest
import yaml

from qsite.config import load_config
from qsite.service.datasette.metadata import read_config_file
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient


def deployer_config(tmp_path, allow) -> str:
    """The bundled datasette.yaml with ``allow`` on the news query (and its count)."""
    data = read_config_file()
    (entry,) = data["databases"].values()
    for name in ("api_news", "api_news_count"):
        entry["queries"][name]["allow"] = allow
    path = tmp_path / "datasette.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def actor_cookie(datasette, actor_id: str) -> dict:
    """The ``ds_actor`` cookie Datasette's own login plugins set (signed with the instance's secret)."""
    return {"ds_actor": datasette.sign({"a": {"id": actor_id}}, "actor")}


@pytest.fixture
def guarded(seeded_config, tmp_path):
    datasette = make_datasette(load_config(seeded_config), datasette_yaml=deployer_config(tmp_path, {"id": "editor"}))
    with ApiClient(datasette) as client:
        yield client


def test_allow_on_the_news_query_holds_on_api_news(guarded):
    response = guarded.get("/api/v1/news")
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["type"] == "/api/v1/problems/forbidden"
    assert guarded.get("/site/api_news.json").status_code == 403  # the same rule, the query's own page
    assert guarded.get("/api/v1/courses").status_code == 200  # what the rule does not name stays public
    assert guarded.get("/api/v1/glossary").status_code == 200


def test_an_allowed_actor_reads_it_and_anonymous_requests_never_get_its_kept_answer(guarded):
    cookies = actor_cookie(guarded.datasette, "editor")
    allowed = guarded.get("/api/v1/news?limit=3", cookies=cookies)
    assert allowed.status_code == 200 and len(allowed.json()["results"]) == 3
    assert guarded.get("/api/v1/news?limit=3", cookies=actor_cookie(guarded.datasette, "someone")).status_code == 403
    # the same URL without credentials: the fast path must not hand out what the editor was given
    for _ in range(2):
        assert guarded.get("/api/v1/news?limit=3").status_code == 403


def test_allow_false_forbids_everyone(seeded_config, tmp_path):
    datasette = make_datasette(load_config(seeded_config), datasette_yaml=deployer_config(tmp_path, False))
    with ApiClient(datasette) as client:
        assert client.get("/api/v1/news").status_code == 403
        assert client.get("/api/v1/news", cookies=actor_cookie(datasette, "editor")).status_code == 403


def test_the_default_config_is_public(seeded_config):
    with ApiClient(make_datasette(load_config(seeded_config))) as client:
        for path in ("/api/v1/news", "/api/v1/courses", "/api/v1/glossary", "/api/v1/sources", "/api/v1/stats"):
            assert client.get(path).status_code == 200, path
