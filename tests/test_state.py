"""The serving state is derived in one place (service/datasette/state.py), and a failed build is retried.

An instance whose database is not there yet answers 503; once it is, the next
request builds the API and serves data, with no restart. (It used to keep the
broken API forever.)
"""

from __future__ import annotations

from datasette.database import Database

from qsite.config import load_config
from qsite.service.datasette.state import held_api
from qsite.service.serve.app import make_datasette
from tests.support.api_client import ApiClient


def test_a_failed_build_is_retried_not_kept(seeded_config, caplog):
    config = load_config(seeded_config)
    datasette = make_datasette(config, files=[])  # started without its database
    with ApiClient(datasette) as client:
        for _ in range(2):
            response = client.get("/api/v1/courses")
            assert response.status_code == 503
            assert response.json()["type"] == "/api/v1/problems/unavailable"
        assert held_api(datasette) is None  # nothing broken is kept
        assert sum("cannot serve data" in record.getMessage() for record in caplog.records) == 1  # logged once

        datasette.add_database(Database(datasette, path=str(config.database_path), is_mutable=True), name="site")
        response = client.get("/api/v1/courses")
        assert response.status_code == 200, response.text
        assert response.json()["count"] == 2
        kept = held_api(datasette)
        assert kept is not None
        client.get("/api/v1/glossary")
        assert held_api(datasette) is kept  # built once, then kept
