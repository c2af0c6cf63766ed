"""docs/deploy.md, "Permissions": its table of what each endpoint checks is the code's, and its examples hold.

The table and the news example are written by cog (``docs/_generate.py``); these tests read the
page itself, so a page not regenerated after a change to ``ENDPOINTS`` fails here too. Each
example is merged into the bundled ``datasette.yaml`` and served, anonymous and as the editor
(the ``ds_actor`` cookie Datasette's login plugins set).
"""

from __future__ import annotations

import re

import pytest
import yaml

from qsite.config import load_config
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.compat import datasette_1
from qsite.service.datasette.access import WHOLE_DATABASE
from qsite.service.datasette.metadata import read_config_file
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient
from tests.support.paths import ROOT

DEPLOY = ROOT / "docs" / "deploy.md"


def permissions_section() -> str:
    text = DEPLOY.read_text(encoding="utf-8")
    return text[text.index("**Permissions.**") : text.index("**Other plugins.**")]


def test_the_permissions_table_is_what_each_endpoint_checks():
    rows = dict(re.findall(r"^\| `(/api/v1[^`]*)` \| (.*) \|$", permissions_section(), re.M))
    assert list(rows) == [endpoint.url for endpoint in ENDPOINTS.values()], "run `make cog`"
    for endpoint in ENDPOINTS.values():
        named = re.findall(r"`(api_\w+)`", rows[endpoint.url])
        if endpoint.name in WHOLE_DATABASE:
            assert "view-database" in rows[endpoint.url] and not named, endpoint.url
        else:
            assert named == [f"api_{query}" for query in endpoint.queries], f"{endpoint.url}: run `make cog`"


def examples() -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", permissions_section(), re.S)]


def merged(example: dict) -> dict:
    """The bundled datasette.yaml with ``example`` merged in (``sql: ...`` stands for the query's own SQL)."""

    def merge(base: dict, extra: dict):
        for key, value in extra.items():
            if key == "sql":
                continue
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value

    data = read_config_file()
    merge(data, example)
    return data


def serve(seeded_config, tmp_path, example: dict) -> ApiClient:
    path = tmp_path / "datasette.yaml"
    path.write_text(yaml.safe_dump(merged(example)), encoding="utf-8")
    return ApiClient(make_datasette(load_config(seeded_config), datasette_yaml=str(path)))


NEWS_PATHS = (
    "/api/v1/news", "/api/v1/news/{id}", "/api/v1/news/removed", "/api/v1/news.atom", "/api/v1/news.json",
    "/api/v1/sources", "/api/v1/stats", "/site/news.json", "/site/news/{id}.json", "/site/news_fts.json",
    "/site/news_search.json", "/site/news_removed.json", "/site/news_counts.json", "/site/news_totals.json",
    "/site/api_news.json", "/site/api_news_item.json?item_id={id}", "/site/api_stats.json",
    "/site.json?sql=select+*+from+news", "/site/courses.json?_where=1",
)
PUBLIC_DOCUMENTS = ("/api/v1", "/api/v1/openapi.json", "/api/v1/docs")


def get(client: ApiClient, path: str, **kwargs) -> int:
    """The status of ``path``; health's 503 (the seeded database has no ingest run) read as the 200 it is allowed."""
    response = client.get(path, follow_redirects=True, **kwargs)  # 1.0 redirects /site.json?sql= to /site/-/query.json
    if path == "/api/v1/health" and response.status_code == 503:
        return 200
    return response.status_code


def editor(client: ApiClient) -> dict:
    return {"ds_actor": client.datasette.sign({"a": {"id": "editor"}}, "actor")}


@pytest.fixture
def item_id(seeded_config):
    with ApiClient(make_datasette(load_config(seeded_config))) as client:
        return client.get("/api/v1/news?limit=1").json()["results"][0]["id"]


def test_the_database_example_keeps_everything_but_health_private(seeded_config, tmp_path, item_id):
    database, _news = examples()
    assert database["databases"]["site"]["allow"] == {"id": "editor"}
    with serve(seeded_config, tmp_path, database) as client:
        for path in (*NEWS_PATHS, "/api/v1/courses", "/api/v1/glossary", "/site/courses.json"):
            path = path.format(id=item_id)
            assert get(client, path) == 403, path
            assert get(client, path, cookies=editor(client)) == 200, path
        for path in ("/api/v1/health", "/site/api_health.json", *PUBLIC_DOCUMENTS):
            assert get(client, path) == 200, path


def test_without_its_api_health_line_health_is_forbidden_too(seeded_config, tmp_path):
    database, _news = examples()
    del database["databases"]["site"]["queries"]
    with serve(seeded_config, tmp_path, database) as client:
        assert get(client, "/api/v1/health") == 403
        assert get(client, "/api/v1/health", cookies=editor(client)) == 200


def test_the_news_example_keeps_the_news_private_and_the_rest_public(seeded_config, tmp_path, item_id):
    _database, news = examples()
    with serve(seeded_config, tmp_path, news) as client:
        for path in NEWS_PATHS:
            path = path.format(id=item_id)
            assert get(client, path) == 403, path
            assert get(client, path, cookies=editor(client)) == 200, path
        public = ("/api/v1/courses", "/api/v1/glossary", "/api/v1/health", "/site/courses.json", "/site/glossary.json")
        for path in (*public, *PUBLIC_DOCUMENTS):
            assert get(client, path) == 200, path


def test_an_allow_on_the_news_table_alone_leaves_the_rest_open(seeded_config, tmp_path):
    """What the page says of a table-level allow: Datasette checks each table, query and ?sql= on its own."""
    table_only = {"databases": {"site": {"tables": {"news": {"allow": {"id": "editor"}}}}}}
    with serve(seeded_config, tmp_path, table_only) as client:
        assert get(client, "/site/news.json") == 403
        for path in ("/api/v1/news", "/site/api_news.json", "/site.json?sql=select+*+from+news"):
            assert get(client, path) == 200, path
        # the FTS table of a private table: public on 0.65, private with it on 1.0
        assert get(client, "/site/news_fts.json") == (403 if datasette_1() else 200)
