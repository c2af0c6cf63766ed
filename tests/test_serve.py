"""``qsite serve`` as a real process: HTTP on a free port, an ingest while it runs, a clean stop."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

from tests.support.openapi_check import OpenAPICheck
from tests.support.paths import SITE_EXPORT
from tests.support.processes import (
    free_port,
    qsite_serve,
    run_qsite,
    wait_until,
    worker_pids,
)

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

VISIBLE_WITHIN = 2.0


@pytest.fixture
def export_file(tmp_path):
    path = tmp_path / "site-export.json"
    path.write_text(SITE_EXPORT.read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.fixture
def server(make_config, export_file, tmp_path):
    """A running ``qsite serve``, the installed console script (not forked); yields (base URL, config path, process)."""
    # the fair-use limit on (far above what the test sends), so its headers are checked too
    config = make_config(site_export={"source": str(export_file)}, api={"cache_max_age": 60, "rate_limit": "10000/minute"})
    with qsite_serve(config, tmp_path / "serve.log", args=["--log-level", "WARNING"], fork=False) as served:
        yield served.base, config, served.process


def checked_client(base: str) -> tuple[httpx.Client, OpenAPICheck]:
    """An HTTP client whose every /api/v1 response is validated against the served OpenAPI document."""
    openapi = OpenAPICheck(httpx.get(base + "/api/v1/openapi.json", timeout=5).json())

    def check(response: httpx.Response) -> None:
        if response.request.url.path.startswith("/api/v1"):
            response.read()
            assert response.headers["ratelimit-policy"] == '"default";q=10000;w=60'
            openapi.check(response.request.method, response)

    return httpx.Client(base_url=base, timeout=5, event_hooks={"response": [check]}), openapi


def wait_for(fetch, ready, within: float) -> tuple[httpx.Response, float]:
    """Poll ``fetch()`` until ``ready(response)``; returns the last response and the seconds it took."""
    start, seen = time.monotonic(), []

    def fetched_and_ready():
        seen.append(fetch())
        return ready(seen[-1])

    wait_until(fetched_and_ready, within + 1)
    return seen[-1], time.monotonic() - start


def test_serve_answers_over_http_and_shows_a_new_ingest_within_two_seconds(server, export_file):
    base, config, process = server
    client, openapi = checked_client(base)
    with client:
        # migrated, no data yet: 503 with Retry-After, not a 500
        empty = client.get("/api/v1/courses")
        assert empty.status_code == 503
        assert empty.headers["content-type"] == "application/problem+json"
        assert int(empty.headers["retry-after"]) > 0

        assert run_qsite("ingest", "site", "--config", str(config)).returncode == 0
        courses, elapsed = wait_for(lambda: client.get("/api/v1/courses"), lambda r: r.status_code == 200, VISIBLE_WITHIN)
        assert courses.status_code == 200 and elapsed <= VISIBLE_WITHIN
        export = json.loads(export_file.read_text(encoding="utf-8"))
        assert [course["id"] for course in courses.json()["results"]] == [course["id"] for course in export["courses"]]
        assert courses.headers["cache-control"] == "public, max-age=60"

        # conditional GET and HEAD over a real socket
        etag = courses.headers["etag"]
        not_modified = client.get("/api/v1/courses", headers={"If-None-Match": etag})
        assert not_modified.status_code == 304 and not_modified.content == b""
        assert not_modified.headers["etag"] == etag
        head = client.head("/api/v1/courses")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == courses.headers["content-length"]

        # a changed export, ingested while serving, shows without a restart
        export["courses"][0]["title"] = "Quantum Foundations, Revised"
        export_file.write_text(json.dumps(export), encoding="utf-8")
        assert run_qsite("ingest", "site", "--config", str(config)).returncode == 0
        changed, elapsed = wait_for(
            lambda: client.get("/api/v1/courses"),
            lambda r: r.json()["results"][0]["title"] == "Quantum Foundations, Revised",
            VISIBLE_WITHIN,
        )
        assert changed.json()["results"][0]["title"] == "Quantum Foundations, Revised"
        assert elapsed <= VISIBLE_WITHIN
        assert changed.headers["etag"] != etag

        # the rest of the surface: problem 404 under /api/v1, Datasette's own pages beside it
        missing = client.get("/api/v1/nothing-here")
        assert missing.status_code == 404 and missing.json()["type"] == "/api/v1/problems/not-found"
        assert client.get("/site/courses.json?_shape=array").status_code == 200
        assert "qsite" in client.get("/").text
        # a POST to a read-only canned query page is Datasette's to answer (a 405 on 0.65, whose own
        # answer was a 500; a redirect with a message on 1.0): never a 5xx, never a write
        assert client.post("/site/api_news", data={"tag": "Science"}).status_code in (302, 403, 405)
        assert client.post("/api/v1/news").status_code == 405
    assert openapi.checked >= 7  # 503, 200s, 304, HEAD, 404, 405: every /api/v1 response above

    process.send_signal(signal.SIGINT)  # Ctrl-C
    assert process.wait(timeout=15) == 0


def test_granians_runtime_threads_never_preempt_the_event_loop(server):
    """A worker's runtime threads run as SCHED_BATCH, its event loop's thread as the default (service/serve/worker.py)."""
    base, _config, process = server
    assert httpx.get(base + "/api/v1/openapi.json", timeout=5).status_code == 200  # the worker has started
    (worker,) = worker_pids(process.pid)
    policies = {}
    for thread_id in map(int, os.listdir(f"/proc/{worker}/task")):
        with open(f"/proc/{worker}/task/{thread_id}/comm") as comm:
            policies[thread_id] = (comm.read().strip(), os.sched_getscheduler(thread_id))
    assert policies.pop(worker)[1] == os.SCHED_OTHER  # the event loop's thread
    runtime = [policy for name, policy in policies.values() if name.startswith("tokio")]
    assert runtime and set(runtime) == {os.SCHED_BATCH}
    assert os.sched_getscheduler(process.pid) == os.SCHED_OTHER  # the supervisor is left alone


def test_serve_stops_cleanly_on_sigterm(server):
    base, _config, process = server
    assert httpx.get(base + "/api/v1/openapi.json", timeout=5).status_code == 200
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0


def test_serve_refuses_a_bad_config(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("site_export: {source: x.json}\napi: {cache_max_age: -1}\n", encoding="utf-8")
    result = run_qsite("serve", "--config", str(bad), "--port", str(free_port()), timeout=30)
    assert result.returncode == 2
    assert "api.cache_max_age" in result.stderr


def test_serve_refuses_a_datasette_config_without_a_query_the_api_runs(seeded_config, tmp_path):
    """A copy of datasette.yaml without api_health: one Error line naming the file and the query, status 2, no server."""
    import yaml

    from qsite.service.datasette.metadata import read_config_file

    data = read_config_file()
    (entry,) = data["databases"].values()
    del entry["queries"]["api_health"]
    copy = tmp_path / "my-datasette.yaml"
    copy.write_text(yaml.safe_dump(data), encoding="utf-8")
    for args, env in (
        (["--datasette-config", str(copy)], {}),
        ([], {"QSITE_DATASETTE_CONFIG": str(copy)}),
    ):
        result = run_qsite("serve", "--config", str(seeded_config), "--port", str(free_port()), *args, env=env, timeout=30)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [f"Error: {copy}: canned queries missing: api_health"], result.stderr


def test_a_worker_freezes_what_its_startup_made(monkeypatch):
    """Full collections then skip the worker's long-lived objects (service/serve/worker.py after_startup)."""
    import asyncio
    import gc

    from qsite.service.serve import worker
    from qsite.service.serve.worker import after_startup

    monkeypatch.setattr(worker, "batch_other_threads", list)  # this test process's threads keep their policy

    async def app(scope, receive, send):
        await send({"type": "lifespan.startup.complete" if scope["type"] == "lifespan" else "http.response.start"})

    sent = []

    async def send(message):
        sent.append(message["type"])

    gc.unfreeze()
    try:
        asyncio.run(after_startup(app)({"type": "http"}, None, send))
        assert gc.get_freeze_count() == 0  # a request freezes nothing
        asyncio.run(after_startup(app)({"type": "lifespan"}, None, send))
        assert gc.get_freeze_count() > 1000  # this test process's modules, at least
        assert sent == ["http.response.start", "lifespan.startup.complete"]
    finally:
        gc.unfreeze()
