"""``/metrics`` of a real ``qsite serve``: counts that add up across workers, replica gauges that move,
its own ``allow``, never rate-limited; the JSON log format and the access log, redacted."""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import ExitStack

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from qsite.service.http.tally import BUCKETS, Tally
from qsite.service.metrics.exported import METRICS
from qsite.service.metrics.labels import Labels, endpoint_label
from tests.support.processes import qsite_serve, wait_until, worker_pids
from tests.test_follow import Writer, follow

pytestmark = pytest.mark.slow

#: Seconds after which every worker has moved its counts into the shared files (FLUSH_EVERY, with room).
SETTLED = 2.5


def scrape(base: str) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of one scrape, on a new connection (any worker may answer)."""
    response = httpx.get(base + "/metrics", timeout=10, headers={"connection": "close"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def total(samples: dict, name: str, **labels) -> float:
    return sum(value for (sample, have), value in samples.items() if sample == name and set(labels.items()) <= set(have))


def requests_of(samples: dict) -> Counter:
    """Requests counted per (endpoint, status), /metrics itself left out (each scrape adds one)."""
    counted = Counter()
    for (name, labels), value in samples.items():
        if name == "qsite_http_requests_total":
            labels = dict(labels)
            if labels["endpoint"] != "metrics":
                counted[labels["endpoint"], labels["status"]] += int(value)
    return counted


@pytest.fixture
def seeded_two_workers(seeded_config, tmp_path):
    with qsite_serve(seeded_config, tmp_path / "serve.log", args=["--workers", "2"]) as served:
        assert wait_until(lambda: len(worker_pids(served.process.pid)) == 2, 20)
        yield served


def test_two_workers_give_one_answer_whose_counts_add_up_to_the_requests_sent(seeded_two_workers):
    served = seeded_two_workers
    time.sleep(SETTLED)  # the readiness probe's request is in the shared files, whichever worker had it
    before = scrape(served.base)
    sent = Counter()
    etag = None
    for round_ in range(12):  # a new connection each: the kernel spreads them over both workers
        with httpx.Client(base_url=served.base, timeout=10, headers={"connection": "close"}) as client:
            for path, endpoint in (("/api/v1/courses", "courses"), ("/api/v1/glossary", "glossary"), ("/api/v1/nope", "api_unknown")):
                response = client.get(path)
                sent[endpoint, str(response.status_code)] += 1
            response = client.get("/api/v1/courses", headers={"if-none-match": etag} if etag else {})
            etag = response.headers.get("etag", etag)
            sent["courses", str(response.status_code)] += 1
            response = client.get("/api/v1/" + "x" * 9000)
            sent["api_unknown", str(response.status_code)] += 1
            response = client.post("/api/v1/glossary")
            sent["glossary", str(response.status_code)] += 1
            response = client.head("/api/v1/glossary")
            sent["glossary", str(response.status_code)] += 1
            response = client.get("/-/versions.json")
            sent["datasette", str(response.status_code)] += 1
    assert sent["courses", "304"] == 11
    assert sent["glossary", "405"] == 12 and sent["datasette", "200"] == 12
    assert sent["api_unknown", "414"] == 12  # refused before any routing
    time.sleep(SETTLED)  # every worker's counts of these requests reach the shared files (FLUSH_EVERY, with room): no event marks a flush
    scrapes = [scrape(served.base) for _ in range(6)]
    for samples in scrapes:
        assert requests_of(samples) - requests_of(before) == sent  # one answer, whichever worker gave it
        latency = total(samples, "qsite_http_request_duration_seconds_count", endpoint="courses")
        assert latency - total(before, "qsite_http_request_duration_seconds_count", endpoint="courses") == 24
        assert total(samples, "qsite_http_not_modified_total") == 11
        assert total(samples, "qsite_http_refused_total", reason="size") == 12
        # every data request went through the response cache: hits and misses add up to them
        looked_up = total(samples, "qsite_response_cache_total") - total(before, "qsite_response_cache_total")
        assert looked_up == sent["courses", "200"] + sent["courses", "304"] + sent["glossary", "200"]
        misses = total(samples, "qsite_response_cache_total", result="miss") - total(before, "qsite_response_cache_total", result="miss")
        assert 2 <= misses <= 4  # once per worker and URL
        build = [labels for (name, labels) in samples if name == "qsite_build_info"]
        assert {key for key, _ in build[0]} == {"qsite", "datasette", "sqlite", "python"}
    # the cached path shows in the sub-millisecond buckets
    assert total(scrapes[-1], "qsite_http_request_duration_seconds_bucket", endpoint="courses", le=str(BUCKETS[3])) > 0


def test_metrics_has_its_own_allow_and_is_never_rate_limited(make_config, tmp_path):
    config = make_config(api={"rate_limit": "3/minute", "sql_time_limit_ms": 50})
    with qsite_serve(config, tmp_path / "serve.log", ready="/metrics") as served:
        endless = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"
        slow = httpx.get(served.url("/site.json"), params={"sql": endless}, timeout=10, follow_redirects=True)  # 1.0 redirects
        assert slow.status_code == 400 and "time limit" in slow.text
        statuses = [httpx.get(served.url("/api/v1/courses"), timeout=5).status_code for _ in range(5)]
        assert statuses.count(429) >= 3
        for _ in range(10):
            samples = scrape(served.base)  # far past the limit: /metrics is not counted against it
        assert total(samples, "qsite_http_rate_limited_total", limit="fair_use") == statuses.count(429)
        assert total(samples, "qsite_http_requests_total", endpoint="courses", status="429") == statuses.count(429)
        assert total(samples, "qsite_sql_interrupted_total", where="sql") == 1
        assert total(samples, "qsite_http_refused_total", reason="time") == 1
        assert total(samples, "qsite_http_requests_total", endpoint="datasette_sql", status="400") == 1
    closed = make_config(metrics={"allow": ["10.9.0.0/16"]})
    with qsite_serve(closed, tmp_path / "closed.log") as served:
        response = httpx.get(served.url("/metrics"), timeout=5)
        assert response.status_code == 403
        assert "metrics.allow" in response.json()["detail"]
        assert httpx.post(served.url("/metrics"), timeout=5).status_code == 405
    off = make_config(metrics={"enabled": False})
    with qsite_serve(off, tmp_path / "off.log") as served:
        assert httpx.get(served.url("/metrics"), timeout=5).status_code == 404  # Datasette's: nothing answers it


def test_ingest_gauges_come_from_the_database(make_config, tmp_path, qsite):
    config = make_config(news={"every": "15m", "sources": [{"name": "Gone", "url": "http://127.0.0.1:9/feed.xml", "tag": "Science"}]})
    qsite("--config", str(config), "ingest", "all")
    with qsite_serve(config, tmp_path / "serve.log") as served:
        samples = scrape(served.base)
    assert total(samples, "qsite_ingest_consecutive_failures", kind="news", source="Gone") == 1
    assert total(samples, "qsite_ingest_backoff_until_timestamp_seconds", kind="news", source="Gone") > time.time()
    assert total(samples, "qsite_ingest_consecutive_failures", kind="site") == 0
    assert total(samples, "qsite_ingest_last_run_items", kind="site", outcome="courses") > 0
    assert total(samples, "qsite_ingest_last_success_timestamp_seconds", kind="site") > time.time() - 600
    assert ("qsite_ingest_last_success_timestamp_seconds", (("kind", "news"), ("source", "Gone"))) not in samples
    assert 0 <= total(samples, "qsite_data_seconds_since_ingest_success") < 600
    assert total(samples, "qsite_data_version") > 0


def test_a_replicas_gauges_move_on_a_swap(tmp_path, make_config, sample_export):
    from tests.support.site_exports import other_export

    writer = Writer(tmp_path, make_config, sample_export)
    first = writer.publish()
    with ExitStack() as stack:
        replica = stack.enter_context(follow(writer, tmp_path, "replica"))
        assert wait_until(lambda: total(scrape(replica.base), "qsite_replica_data_version") == first.data_version, 30)
        samples = scrape(replica.base)
        swapped = total(samples, "qsite_replica_last_swap_timestamp_seconds")
        assert swapped > 0 and total(samples, "qsite_replica_latest_data_version") == first.data_version
        assert total(samples, "qsite_replica_snapshot_info", file=first.file) == 1
        assert total(samples, "qsite_replica_failed_swaps_total") == 0
        time.sleep(1.1)  # review: lets a whole second pass since the swap, which the gauge is checked to count, not a wait
        assert total(scrape(replica.base), "qsite_replica_seconds_since_swap") >= 1
        second = writer.publish(other_export(sample_export))
        assert second.data_version > first.data_version
        assert wait_until(lambda: total(scrape(replica.base), "qsite_replica_data_version") == second.data_version, 30)
        samples = scrape(replica.base)
        assert total(samples, "qsite_replica_last_swap_timestamp_seconds") > swapped
        assert total(samples, "qsite_replica_snapshot_info", file=second.file) == 1
        assert total(samples, "qsite_data_version") == second.data_version  # read from the snapshot served
        # a snapshot that does not check out: counted, the replica keeps serving the last one
        broken = writer.publish(sample_export)
        (writer.store / broken.file).write_bytes(b"not a database")
        assert wait_until(lambda: total(scrape(replica.base), "qsite_replica_failed_swaps_total") >= 1, 30)
        samples = scrape(replica.base)
        assert total(samples, "qsite_replica_latest_data_version") == broken.data_version
        assert total(samples, "qsite_replica_data_version") == second.data_version


def test_json_logs_one_object_a_line_with_request_ids_and_redacted_access_lines(seeded_config, tmp_path):
    config = yaml.safe_load(seeded_config.read_text())
    config["logs"] = {"format": "json", "access": True}
    path = tmp_path / "json.yml"
    path.write_text(yaml.safe_dump(config))
    with qsite_serve(path, tmp_path / "serve.log") as served:
        httpx.get(served.url("/api/v1/courses?access_token=hunter2&limit=1"), timeout=5)
        httpx.get(served.url("/api/v1/courses"), timeout=5)
        log = served.log
        assert wait_until(lambda: log.read_text().count('/api/v1/courses') >= 2, 10)
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    access = [record for record in records if record["logger"] == "qsite.access" and "courses" in record["target"]]
    assert access[0]["target"] == "/api/v1/courses?access_token=REDACTED&limit=1"
    assert access[0]["status"] == 400 and access[1]["status"] == 200 and access[0]["method"] == "GET"  # limit is not a parameter
    assert "hunter2" not in log.read_text()
    assert len({record["request_id"] for record in access}) == len(access)


def test_text_logs_redact_the_access_line_too(seeded_config, tmp_path, qsite):
    with qsite_serve(seeded_config, tmp_path / "serve.log", args=["--log-format", "text"], env={"QSITE_LOG_FORMAT": "json"}) as served:
        httpx.get(served.url("/metrics"), timeout=5)
    text = (tmp_path / "serve.log").read_text()
    assert not text.lstrip().startswith("{")  # the option beats the environment
    config = yaml.safe_load(seeded_config.read_text())
    config["logs"] = {"access": True}
    path = tmp_path / "access.yml"
    path.write_text(yaml.safe_dump(config))
    with qsite_serve(path, tmp_path / "access.log") as served:
        httpx.get(served.url("/api/v1/courses?password=hunter2"), timeout=5)
        assert wait_until(lambda: "qsite.access" in served.log.read_text(), 10)
    text = (tmp_path / "access.log").read_text()
    assert "GET /api/v1/courses?password=REDACTED 400" in text and "hunter2" not in text


def test_the_tally_sorts_latencies_into_the_buckets_as_observe_would():
    tally = Tally()
    for seconds in (0.00005, 0.0001, 0.0003, 20.0):
        tally.answers.append((b"/api/v1/courses", b"", "GET", 200, seconds))
    tally.answers.append((b"/api/v1/courses", b"", "GET", 304, 0.00001))
    tally.answers.append((b"/api/v1/" + b"x" * 9000, b"", "GET", 414, 0.00001))
    for query in (b"sql=select+1", b"", b"sql=select+2"):  # one page, arbitrary SQL or not by its query
        tally.answers.append((b"/site/news", query, "GET", 200, 0.001))
    for item in range(3):  # a walk over distinct items: one endpoint, whatever the paths
        tally.answers.append((b"/api/v1/news/%032x" % item, b"", "GET", 404, 0.002))
    requests, events = tally.take(Labels())
    counts = requests["courses", "GET", 200]
    assert sum(counts[:-1]) == 4
    assert counts[0] == 2 and counts[2] == 1 and counts[len(BUCKETS)] == 1  # le=0.0001 holds 0.0001; 20 s past every bound
    assert counts[-1] == pytest.approx(20.00045)
    assert set(requests) == {("courses", "GET", 200), ("courses", "GET", 304), ("api_unknown", "GET", 414),
                             ("datasette_sql", "GET", 200), ("datasette", "GET", 200), ("news_item", "GET", 404)}
    assert sum(requests["datasette_sql", "GET", 200][:-1]) == 2
    assert sum(requests["news_item", "GET", 404][:-1]) == 3 and requests["news_item", "GET", 404][-1] == pytest.approx(0.006)
    assert events == Counter({("not_modified", ""): 1, ("refused", "size"): 1})
    assert tally.take(Labels()) == ({}, Counter())


def test_endpoint_labels_stay_few_whatever_the_path():
    labels = Labels()
    assert labels(b"/api/v1/courses", b"") == "courses"
    assert labels(b"/api/v1/no/such/thing", b"") == "api_unknown"
    assert labels(b"/site/news", b"sql=select+1") == "datasette_sql"
    assert labels(b"/site/news", b"") == "datasette"
    assert labels(b"/site/news", b"sql=select+1") == "datasette_sql"
    assert labels(b"/metrics", b"") == "metrics"
    assert endpoint_label(b"/-/static/app.css", b"") == "static"
    assert len({metric.name for metric in METRICS}) == len(METRICS)


def test_the_sql_budget_counts_its_own_429s(monkeypatch):
    """Fair use's 429s are counted by the rate limiter (the test above); the SQL budget's by the budget."""
    import asyncio

    from qsite.service.http import tally
    from qsite.service.http.sql_budget import MAX_WAITING, SqlBudget

    monkeypatch.setattr(tally, "TALLY", Tally())
    budget = SqlBudget(time_limit_ms=1000, trusted_proxies=0)
    statuses = []

    async def run():
        release = asyncio.Event()

        async def query(scope, receive, send):
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "GET", "path": "/site", "headers": [], "client": ("127.0.0.1", 1)}
        admitted = [asyncio.ensure_future(budget(query, scope, None, send)) for _ in range(MAX_WAITING + 1)]
        await asyncio.sleep(0)  # every one of them holds its turn or waits for it
        for _ in range(2):
            await budget(query, scope, None, send)  # past the queue: refused at once
        release.set()
        await asyncio.gather(*admitted)

    asyncio.run(run())
    assert statuses.count(429) == 2 and statuses.count(200) == MAX_WAITING + 1
    assert tally.TALLY.events == {("rate_limited", "sql_budget"): 2}


def test_a_status_is_read_from_the_response_when_another_plugin_wraps_the_app(tmp_path, monkeypatch):
    """qsite's layers hand an /api/v1 status up; another plugin's ASGI wrapper could drop it, so with
    one installed every status is read from the response."""
    import asyncio
    import types

    from datasette import hookimpl
    from datasette.app import Datasette
    from datasette.plugins import pm
    from prometheus_client import values

    from qsite.config import load_config
    from qsite.service.http import tally
    from qsite.service.metrics.middleware import observed

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setattr(tally, "TALLY", None)
    monkeypatch.setattr(values, "ValueClass", values.ValueClass)  # as it was, for whatever runs next in this process

    async def silent_404(scope, receive, send):  # answers 404 and, like a foreign wrapper, returns nothing
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def statuses() -> set[int]:
        app = observed(silent_404, Datasette(memory=True), load_config(None))

        async def sent(message):
            return None

        scope = {"type": "http", "method": "GET", "path": "/api/v1/nope", "raw_path": b"/api/v1/nope", "query_string": b"", "headers": []}
        asyncio.run(app(scope, None, sent))
        requests, _ = tally.TALLY.take(Labels())
        return {status for _, _, status in requests}

    assert statuses() == {500}  # only qsite's wrappers: the status is what the app returned (nothing: 500)
    wrapper = types.ModuleType("someone_elses_plugin")  # as Datasette registers an installed plugin: a module
    wrapper.asgi_wrapper = hookimpl(lambda datasette: lambda app: app)
    pm.register(wrapper, name="someone-elses-wrapper")
    try:
        assert statuses() == {404}
    finally:
        pm.unregister(wrapper)
