"""GET /api/v1/health and the version and snapshot every answer names: real ingests, real databases."""

from __future__ import annotations

import pytest

from qsite.config import load_config
from qsite.db.model import VERSION
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.store import open_database
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.paths import FEEDS

SOURCES = [
    {"name": "Quantum Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
    {"name": "Qubit Industry Wire", "url": str(FEEDS / "industry-wire.atom"), "tag": "Industry"},
    {"name": "Broken", "url": str(FEEDS / "no-such-feed.xml"), "tag": "Science"},
]


def ingested(make_config, **api):
    path = make_config(news={"sources": SOURCES}, api={"rate_limit": "off", **api})
    config = load_config(path)
    db = open_database(config.database_path)
    ingest_news(db, config)
    db.close()
    return path


def test_recent_data_is_healthy_with_the_last_ingest_of_each_kind(make_config):
    with ApiClient(datasette_for_config(ingested(make_config))) as client:
        response = client.get("/api/v1/health")
        assert response.status_code == 200
        assert response.headers["cache-control"] == "no-store" and "etag" not in response.headers
        assert response.headers["x-qsite-version"] == VERSION
        body = response.json()
        assert body["status"] == "ok" and body["qsite_version"] == VERSION and body["snapshot"] is None
        assert 0 <= body["data_age_seconds"] < 60 and body["max_data_age_seconds"] == 86400
        news = body["ingests"]["news"]
        assert news["sources"] == 3 and news["failed_sources"] == 1  # the missing feed
        assert news["last_success_at"] == body["data_updated_at"]
        assert body["ingests"]["site"] is None  # never ingested here
        assert body["data_version"] >= 1
        assert client.get("/api/v1/health?x=1").status_code == 400


def aged(path, seconds: int):
    """The database of the config at ``path`` as if its runs and changes were ``seconds`` older (no waiting on the clock)."""
    db = open_database(load_config(path).database_path)
    with db.conn:
        for table, columns in (("ingest_runs", ("started_at", "finished_at")), ("data_versions", ("changed_at",))):
            for column in columns:
                db.execute(
                    f"UPDATE {table} SET {column} = strftime('%Y-%m-%dT%H:%M:%SZ', {column}, ?) WHERE {column} IS NOT NULL",
                    [f"-{seconds} seconds"],
                )
    db.close()
    return path


def test_data_older_than_the_bound_is_a_503_with_the_same_body(make_config):
    with ApiClient(datasette_for_config(aged(ingested(make_config, health_max_data_age=60), 3600))) as client:
        response = client.get("/api/v1/health")
        assert response.status_code == 503 and response.headers["retry-after"]
        body = response.json()
        assert body["status"] == "stale" and body["max_data_age_seconds"] == 60
        assert 3600 <= body["data_age_seconds"] < 3660


def test_nothing_ingested_is_a_503(make_config, tmp_path):
    open_database(tmp_path / "site.db").close()
    with ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"}))) as client:
        response = client.get("/api/v1/health")
        assert response.status_code == 503 and response.json()["status"] == "no-data"


def test_no_database_loaded_is_a_503(make_config):
    config = load_config(make_config(api={"rate_limit": "off"}))
    with ApiClient(make_datasette(config, files=[]), check=False) as client:
        response = client.get("/api/v1/health")
        assert response.status_code == 503
        assert response.json()["status"] == "no-data" and response.json()["data_age_seconds"] is None


def test_the_index_and_every_answer_name_the_version(make_config):
    with ApiClient(datasette_for_config(ingested(make_config))) as client:
        index = client.get("/api/v1").json()
        assert index["qsite_version"] == VERSION and index["snapshot"] is None
        assert index["endpoints"]["health"] == "/api/v1/health"
        for path in ("/api/v1/news", "/api/v1/nope", "/api/v1/news?limit=0"):
            assert client.get(path).headers["x-qsite-version"] == VERSION
        etag = client.get("/api/v1/news").headers["etag"]
        assert client.get("/api/v1/news", headers={"if-none-match": etag}).headers["x-qsite-version"] == VERSION
        assert "X-Qsite-Version" in client.get("/api/v1/sources").headers["access-control-expose-headers"]


@pytest.mark.parametrize("value, seconds", [("6h", 21600), (90, 90)])
def test_the_bound_is_configured(make_config, value, seconds):
    assert load_config(make_config(api={"health_max_data_age": value})).api.health_max_data_age == seconds
