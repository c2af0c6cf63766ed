"""Fair-use rate limiting (issue 5): memory and real Redis storage, real ``qsite serve`` replicas."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
from contextlib import ExitStack
from time import time as time_now  # limits' reset times are its own wall clock's
from unittest import mock

import httpx
import limits
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from datasette.app import Datasette

import qsite.service.http.ratelimit
from qsite.config import ConfigError, load_config
from qsite.pipeline.ops.ingest import SITE, run_ingest
from qsite.pipeline.store import open_database
from qsite.service.describe.openapi import build_document
from tests.support.openapi_check import OpenAPICheck
from tests.support.problems import assert_problem
from tests.support.processes import free_port, qsite_serve, stop as stop_process, wait_until, worker_pids



def run(coro):
    return asyncio.run(coro)


class Clock:
    """A wall clock the test moves (``FairUse.clock``): no waiting, and no window turning under a loaded machine."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


#: Where every in-process test's clock starts: just after a 2 s (and a 60 s) window turns.
START = 1_800_000_000.05


@pytest.fixture
def datasette_for(make_config):
    """A Datasette over a migrated (or, with ``ingest``, filled) database whose qsite config has these ``api`` keys."""

    def make(ingest=False, own_server=True, **api) -> Datasette:
        path = make_config(api=api)
        config = load_config(path)
        if ingest:  # in this process: the data is the point here, not the command (tests/test_cli.py has that)
            assert not any(report.failed for report in run_ingest(config, 0, (SITE,)))
        else:
            open_database(config.database_path).close()
        ds = Datasette(
            [str(config.database_path)],
            # qsite serve's own server limits every page; a plugin in someone else's Datasette only /api/v1
            metadata={"plugins": {"qsite": {"config": str(path), "own_server": own_server}}},
        )
        if config.api.rate_limit_storage.startswith("memory://") and (limiter := qsite.service.http.ratelimit.fair_use(ds)):
            limiter.clock = Clock(START)  # counts that never see a window turn mid-test
        return ds

    return make


def assert_rate_limited(response: httpx.Response, quota: int, window: int):
    body = assert_problem(response, 429, "rate-limited")
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= window
    assert response.headers["ratelimit-policy"] == f'"default";q={quota};w={window}'
    assert response.headers["ratelimit"] == f'"default";r=0;t={retry_after}'
    assert f"retry after {retry_after} seconds" in body["detail"]
    return retry_after


@pytest.mark.slow
def test_limit_reached_refused_then_reset(datasette_for):
    ds = datasette_for(rate_limit="3 per 2 seconds")
    clock = qsite.service.http.ratelimit.fair_use(ds).clock

    async def scenario():
        seen = []
        for _ in range(3):
            response = await ds.client.get("/-/versions.json")
            assert response.status_code == 200
            assert response.headers["ratelimit-policy"] == '"default";q=3;w=2'
            seen.append(response.headers["ratelimit"])
        assert [value.split(";")[1] for value in seen] == ["r=2", "r=1", "r=0"]
        refused = await ds.client.get("/-/versions.json")
        retry_after = assert_rate_limited(refused, quota=3, window=2)
        head = await ds.client.head("/-/versions.json")
        assert head.status_code == 429 and head.content == b""
        clock.now += retry_after + 0.2
        again = await ds.client.get("/-/versions.json")
        assert again.status_code == 200
        assert again.headers["ratelimit"].startswith('"default";r=')

    run(scenario())


def test_json_sql_csv_and_api_share_one_budget_static_is_exempt(datasette_for):
    ds = datasette_for(rate_limit="100/minute", ingest=True)
    paths = [
        "/site.json",
        "/site.csv?sql=select+1",
        "/site?sql=select+1",
        "/site/courses.json",
        "/api/v1/stats",
        "/api/v1/stats",  # a repeat is answered from the API's cache, and still counts
        "/api/v1/nowhere",
        "/-/versions.json",
    ]

    async def scenario():
        remaining = []
        for path in paths:
            response = await ds.client.get(path)
            assert response.status_code == (404 if path == "/api/v1/nowhere" else 200), path
            remaining.append(response.headers["ratelimit"].split(";")[1])
        assert remaining == [f"r={99 - n}" for n in range(len(paths))]
        static = await ds.client.get("/-/static/app.css")
        assert static.status_code == 200 and "ratelimit" not in static.headers
        preflight = await ds.client.options("/api/v1/stats")
        assert "ratelimit" not in preflight.headers
        after = await ds.client.get("/api/v1/courses")
        assert after.headers["ratelimit"].split(";")[1] == f"r={99 - len(paths)}"

    run(scenario())


def test_as_a_plugin_only_api_v1_is_limited(datasette_for):
    """In someone else's Datasette (no own_server setting) fair use counts /api/v1 only: the
    deployer's pages are never refused or given headers by qsite."""
    ds = datasette_for(rate_limit="2/minute", ingest=True, own_server=False)

    async def scenario():
        for _ in range(4):
            for path in ("/site.json", "/site?sql=select+1", "/-/versions.json"):
                response = await ds.client.get(path)
                assert response.status_code == 200 and "ratelimit" not in response.headers, path
        assert (await ds.client.get("/api/v1/stats")).headers["ratelimit"].startswith('"default";r=1;')
        assert (await ds.client.get("/api/v1/stats")).headers["ratelimit"].startswith('"default";r=0;')
        assert_rate_limited(await ds.client.get("/api/v1/courses"), 2, 60)
        assert (await ds.client.get("/site.json")).status_code == 200

    run(scenario())


def test_ipv6_clients_count_by_their_network():
    key = qsite.service.http.ratelimit.client_key
    assert key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff:1:2:3") == "2001:db8:1:2::/64"
    assert key("2001:db8:1:3::1") != key("2001:db8:1:2::1")
    assert key("2001:db8:1:2::1", 48) == key("2001:db8:1:3::1", 48) == "2001:db8:1::/48"
    assert key("2001:db8::1", 128) != key("2001:db8::2", 128)
    assert key("::ffff:192.0.2.7") == key("192.0.2.7") == "192.0.2.7"  # IPv4-mapped: the IPv4 client
    assert key("unknown") == "unknown" and key("not:an:address") == "not:an:address"


def test_one_ipv6_subscriber_shares_one_budget(datasette_for):
    """Every address of a /64 is one client: a new address per request buys nothing."""
    ds = datasette_for(rate_limit="2/minute", ingest=True)
    app = ds.app()

    async def get(address: str) -> int:
        answer = {}

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]

        scope = {
            "type": "http", "method": "GET", "path": "/api/v1/stats", "raw_path": b"/api/v1/stats", "query_string": b"",
            "headers": [(b"host", b"localhost")], "client": (address, 5000), "scheme": "http", "http_version": "1.1",
        }
        await app(scope, receive, send)
        return answer["status"]

    async def scenario():
        assert [await get(f"2001:db8:1:2::{n}") for n in range(1, 4)] == [200, 200, 429]
        assert await get("2001:db8:1:3::1") == 200  # another subscriber

    run(scenario())


def test_refused_writes_count_and_over_limit_answers_match_the_document(datasette_for):
    """The limiter wraps outside the plugin's read-only guard: a refused POST still costs budget,
    and over the limit every method gets the 429, as the OpenAPI document says."""
    ds = datasette_for(rate_limit="4/minute", ingest=True)

    async def scenario():
        openapi = OpenAPICheck((await ds.client.get("/api/v1/openapi.json")).json())
        canned = await ds.client.post("/site/api_news", data={"tag": "Science"})
        assert canned.status_code == 405 and canned.headers["ratelimit"].startswith('"default";r=2;')
        refused = await ds.client.post("/api/v1/news", content=b"{}")
        assert refused.status_code == 405 and refused.headers["ratelimit"].startswith('"default";r=1;')
        openapi.check("POST", refused)
        courses = await ds.client.get("/api/v1/courses")
        assert courses.status_code == 200 and courses.headers["ratelimit"].startswith('"default";r=0;')
        openapi.check("GET", courses)
        for method in ("GET", "HEAD", "POST", "DELETE", "TRACE"):
            over = await ds.client.request(method, "/api/v1/news")
            assert over.status_code == 429, method
            openapi.check(method, over)
            if method != "HEAD":
                assert_rate_limited(over, quota=4, window=60)
        assert (await ds.client.post("/site/api_news")).status_code == 429
        assert openapi.checked == 7

    run(scenario())


def test_off_means_no_limit_and_no_headers(datasette_for):
    ds = datasette_for(rate_limit="off")

    async def scenario():
        for _ in range(5):
            response = await ds.client.get("/-/versions.json")
            assert response.status_code == 200
            assert "ratelimit" not in response.headers

    run(scenario())


def test_spoofed_forwarded_for_ignored_without_trusted_proxies(datasette_for):
    ds = datasette_for(rate_limit="2/minute", trusted_proxies=0)

    async def scenario():
        for n in range(2):
            response = await ds.client.get("/-/versions.json", headers={"X-Forwarded-For": f"10.0.0.{n}"})
            assert response.status_code == 200
        spoofed = await ds.client.get("/-/versions.json", headers={"X-Forwarded-For": "10.0.0.99"})
        assert_rate_limited(spoofed, quota=2, window=60)

    run(scenario())


def test_forwarded_for_honoured_one_hop_from_the_right(datasette_for):
    ds = datasette_for(rate_limit="2/minute", trusted_proxies=1)

    async def scenario():
        for _ in range(2):
            assert (await ds.client.get("/-/versions.json", headers={"X-Forwarded-For": "203.0.113.7"})).status_code == 200
        # the client may prepend anything; only the entry the trusted proxy added counts
        faked = await ds.client.get("/-/versions.json", headers={"X-Forwarded-For": "1.2.3.4, 203.0.113.7"})
        assert_rate_limited(faked, quota=2, window=60)
        other = await ds.client.get("/-/versions.json", headers={"X-Forwarded-For": "203.0.113.8"})
        assert other.status_code == 200
        assert other.headers["ratelimit"].split(";")[1] == "r=1"

    run(scenario())


def test_limits_strategy_over_the_memory_counts():
    """limits' own SlidingWindowCounterRateLimiter decides over qsite.service.http.windows' counts:
    refused hits are not counted, the stats after a hit are that hit's, clear starts over."""
    from limits.aio.strategies import SlidingWindowCounterRateLimiter

    from qsite.service.http.windows import MemoryCounts

    counts = MemoryCounts()
    counts.clock = lambda: 86400 * 20000 + 3600  # an hour into a day that never ends: no window turns
    strategy = SlidingWindowCounterRateLimiter(counts)
    item = limits.parse("2/day")

    async def scenario():
        assert [await strategy.hit(item, "a") for _ in range(3)] == [True, True, False]
        stats = await strategy.get_window_stats(item, "a")
        assert stats.remaining == 0 and 0 < stats.reset_time - time_now() <= 86400
        assert await strategy.hit(item, "b") and (await strategy.get_window_stats(item, "b")).remaining == 1
        window = int(counts.clock() // 86400)
        assert await counts.get(f"{item.key_for('a')}/{window}") == 2  # the refused hit was taken back
        await strategy.clear(item, "a")
        assert await strategy.hit(item, "a")

    run(scenario())


@pytest.mark.parametrize(
    "trusted, header, expected",
    [
        (0, "1.1.1.1", "127.0.0.1"),
        (1, None, "127.0.0.1"),
        (1, "1.1.1.1, 2.2.2.2", "2.2.2.2"),
        (2, "1.1.1.1, 2.2.2.2, 3.3.3.3", "2.2.2.2"),
        (2, "3.3.3.3", "127.0.0.1"),
    ],
)
def test_client_address(trusted, header, expected):
    headers = [(b"x-forwarded-for", header.encode())] if header else []
    scope = {"type": "http", "client": ("127.0.0.1", 5000), "headers": headers}
    assert qsite.service.http.ratelimit.client_address(scope, trusted) == expected


@pytest.mark.parametrize("value", ["lots", "120/minute;10/second", "0/minute", ""])
def test_bad_rate_limit_is_a_config_error(make_config, value):
    with pytest.raises(ConfigError) as error:
        load_config(make_config(api={"rate_limit": value}))
    assert "api.rate_limit:" in str(error.value)


@pytest.mark.slow
def test_cli_refuses_a_bad_rate_limit(make_config, qsite):
    result = qsite("migrate", "--config", str(make_config(api={"rate_limit": "fast"})))
    assert result.returncode == 2
    assert "api.rate_limit: must be one limit such as 120/minute" in result.stderr


def test_bad_rate_limit_storage_is_a_config_error(make_config):
    with pytest.raises(ConfigError) as error:
        load_config(make_config(api={"rate_limit_storage": "memcache://localhost"}))
    assert "api.rate_limit_storage:" in str(error.value)


# --- real Redis ------------------------------------------------------------


class RedisServer:
    """A real redis-server on a free loopback port, without persistence (restarts empty)."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._start()

    def _start(self):
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_until(self._pong, 10):
            self.stop()
            raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        stop_process(self.process, timeout=10)

    def restart(self):
        self._start()


@pytest.fixture
def redis_server(tmp_path):
    # the tests using it are marked requires("redis-server"): one line, before they start, when it is missing
    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.mark.requires("redis-server")
def test_redis_down_mid_run_still_serves_and_counting_resumes(datasette_for, redis_server, caplog, monkeypatch):
    # try the storage on every request, to show the warning is still logged only once
    monkeypatch.setattr(qsite.service.http.ratelimit, "STORAGE_RETRY_AFTER", 0.0)
    ds = datasette_for(rate_limit="2/minute", rate_limit_storage=redis_server.url)

    async def scenario():
        response = await ds.client.get("/-/versions.json")
        assert response.headers["ratelimit"].split(";")[1] == "r=1"
        redis_server.stop()
        with caplog.at_level(logging.WARNING, logger="qsite.ratelimit"):
            for _ in range(4):
                response = await ds.client.get("/-/versions.json")
                assert response.status_code == 200
                assert "ratelimit" not in response.headers
        warnings = [r for r in caplog.records if r.name == "qsite.ratelimit"]
        assert len(warnings) == 1
        assert "unreachable" in warnings[0].getMessage()
        redis_server.restart()
        response = await ds.client.get("/-/versions.json")
        assert response.headers["ratelimit"].split(";")[1] == "r=1"

    run(scenario())


#: Static assets are exempt from the limit, so waiting for a server costs no budget.
READY = "/-/static/app.css"
# DAY_WINDOW: a real server counts on the wall clock, in windows aligned to it, and the sliding
# window weighs the previous window's count by what is left of it: a burst that crosses a window's
# start is no longer all counted (4 hits at 10:00:59.9 weigh 3.99 at 10:01:00.1, so a fifth is let
# through). With a minute's window a run failed that way; a day's starts at midnight UTC only.


@pytest.mark.requires("redis-server")
@pytest.mark.slow
def test_two_replicas_share_one_redis_limit(make_config, qsite, redis_server, tmp_path):
    path = make_config(api={"rate_limit": "4/day", "rate_limit_storage": redis_server.url})  # DAY_WINDOW
    assert qsite("ingest", "site", "--config", str(path)).returncode == 0
    with ExitStack() as stack:
        replicas = [stack.enter_context(qsite_serve(path, tmp_path / f"serve-{n}.log", ready=READY)) for n in range(2)]
        statuses, remaining = [], []
        for n in range(5):
            response = httpx.get(replicas[n % 2].url("/api/v1/courses"), timeout=5)
            statuses.append(response.status_code)
            remaining.append(response.headers["ratelimit"].split(";")[1])
        assert statuses == [200, 200, 200, 200, 429]
        assert remaining == ["r=3", "r=2", "r=1", "r=0", "r=0"]
        assert response.json()["type"] == "/api/v1/problems/rate-limited"
        # the real 429 over HTTP matches the document (built here: fetching it would cost budget)
        OpenAPICheck(build_document(load_config(path).api.cache_max_age)).check("GET", response)
        assert httpx.get(replicas[0].url("/-/versions.json"), timeout=5).status_code == 429


@pytest.mark.slow
def test_real_server_ignores_spoofed_forwarded_for(make_config, qsite, tmp_path):
    path = make_config(api={"rate_limit": "2/day", "trusted_proxies": 0})  # DAY_WINDOW
    open_database(load_config(path).database_path).close()
    with qsite_serve(path, tmp_path / "serve.log", ready=READY) as server:
        statuses = [
            httpx.get(server.url("/-/versions.json"), headers={"X-Forwarded-For": f"192.0.2.{n}"}, timeout=5).status_code
            for n in range(3)
        ]
        # server-side proxy-header handling (uvicorn's was on by default, trusting
        # 127.0.0.1) would hand the client a fresh address per request: qsite serve has none.
        assert statuses == [200, 200, 429]


@pytest.mark.requires("redis-server")
@pytest.mark.slow
def test_two_workers_share_one_budget_in_redis(make_config, qsite, redis_server, tmp_path):
    """Each request on a new connection, so the kernel spreads them over both workers;
    the remaining budget still falls by one per request: one count, never one per worker."""
    path = make_config(api={"rate_limit": "10/day", "rate_limit_storage": redis_server.url})  # DAY_WINDOW
    assert qsite("ingest", "site", "--config", str(path)).returncode == 0
    with qsite_serve(path, tmp_path / "serve.log", ready=READY, args=["--workers", "2"]) as server:
        workers = worker_pids(server.process.pid)
        assert len(workers) == 2
        statuses, remaining = [], []
        for _ in range(14):
            response = httpx.get(server.url("/api/v1/courses"), timeout=5)  # a new connection each time
            statuses.append(response.status_code)
            remaining.append(response.headers["ratelimit"].split(";")[1])
    assert statuses == [200] * 10 + [429] * 4
    assert remaining == [f"r={n}" for n in range(9, -1, -1)] + ["r=0"] * 4


@pytest.mark.slow
def test_memory_storage_refuses_more_than_one_worker(make_config, qsite):
    from qsite.config import serving_workers

    # Checked where serve decides its workers: the other commands take the config, and --workers overrides it.
    path = make_config(api={"workers": 2, "rate_limit_storage": "memory://"})
    result = qsite("serve", "--config", str(path), "--port", str(free_port()))
    assert result.returncode == 2
    assert f"Error: {path}: api.workers: 2 worker processes cannot share api.rate_limit_storage memory://" in result.stderr
    assert qsite("migrate", "--config", str(path)).returncode == 0
    assert qsite("status", "--config", str(path)).returncode == 0
    assert serving_workers(load_config(path).api, requested=1) == 1
    # the command-line override is checked the same way, before anything is served
    path = make_config(api={"rate_limit": "60/minute"})
    result = qsite("serve", "--config", str(path), "--port", str(free_port()), "--workers", "2")
    assert result.returncode == 2
    assert "--workers: 2 worker processes cannot share api.rate_limit_storage memory://" in result.stderr
    # memory:// is fine with one worker, and without a limit there is nothing to share
    assert load_config(make_config(api={"workers": 1})).api.workers == 1
    assert load_config(make_config(api={"workers": 2, "rate_limit": "off"})).api.workers == 2


def test_default_workers_one_per_core_unless_counting_in_memory(make_config):
    from qsite.config import serving_workers

    cores = len(os.sched_getaffinity(0))
    assert serving_workers(load_config(make_config()).api) == 1
    assert serving_workers(load_config(make_config(api={"rate_limit_storage": "redis://127.0.0.1:1/0"})).api) == cores
    assert serving_workers(load_config(make_config(api={"rate_limit": "off"})).api) == cores
    assert serving_workers(load_config(make_config(api={"rate_limit": "off"})).api, requested=3) == 3


def test_the_workers_help_says_when_the_default_is_one():
    """One worker only with a rate limit on in memory://: with rate_limit off it is one per core, as above."""
    from qsite.cli import serve_command

    (option,) = [param for param in serve_command.params if param.name == "workers"]
    assert "1 with a rate limit on and rate_limit_storage memory://" in option.help


class OneHitAgainstLimits(RuleBasedStateMachine):
    """The in-process limiter (:meth:`qsite.service.http.windows.MemoryCounts.hit_now`) says what
    ``limits``' own strategy says over the counts a shared storage keeps (``limits``' async memory
    storage behind :class:`~qsite.service.http.windows.SharedCounts`, the path Redis takes), hit for
    hit: the verdict, what remains, and the reset time in whole seconds, as windows turn."""

    def __init__(self):
        super().__init__()
        from limits.aio.strategies import SlidingWindowCounterRateLimiter
        from limits.storage import storage_from_string

        from qsite.service.http.windows import MemoryCounts, SharedCounts

        self.now = START
        self.item = limits.parse("3/2 seconds")
        self.local = MemoryCounts()
        self.shared = SharedCounts(storage_from_string("async+memory://"))
        for counts in (self.local, self.shared):
            counts.clock = lambda: self.now
        self.strategy = SlidingWindowCounterRateLimiter(self.shared)
        self.loop = asyncio.new_event_loop()

    def teardown(self):
        self.loop.close()

    @rule(client=st.sampled_from(["a", "b", "c"]))
    def hit(self, client):
        allowed, remaining, reset_in = self.local.hit_now(self.item.key_for(client), self.item.amount, self.item.get_expiry())

        async def theirs():
            hit = await self.strategy.hit(self.item, client)
            return hit, await self.strategy.get_window_stats(self.item, client)

        with mock.patch("limits.aio.strategies.time.time", lambda: self.now):  # its reset time on our clock
            their_allowed, stats = self.loop.run_until_complete(theirs())
        assert (allowed, remaining) == (their_allowed, stats.remaining)
        # whole seconds up to limits' reset time (a timestamp: its float keeps a fraction to about 1e-6 s)
        assert reset_in - 1 - 1e-6 < stats.reset_time - self.now <= reset_in + 1e-6

    @rule(seconds=st.one_of(st.sampled_from([0.5, 1.0, 2.0, 4.0]), st.floats(0.001, 3.0)))
    def wait(self, seconds):
        self.now += seconds

    @rule()
    def to_the_next_window(self):  # exactly where a window turns
        expiry = self.item.get_expiry()
        self.now = (self.now // expiry + 1) * expiry


test_one_hit_says_what_limits_says = OneHitAgainstLimits.TestCase
test_one_hit_says_what_limits_says.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


@pytest.mark.parametrize("foreign_wrapper", [False, True], ids=["qsite's layers alone", "with another plugin's wrapper"])
def test_every_answer_carries_the_fields_whoever_adds_them(datasette_for, foreign_wrapper):
    """With only qsite's ASGI wrappers the layer that answers adds the fields the limiter leaves in the
    scope (service/http/answered.py); with another plugin's wrapper the limiter wraps ``send`` itself.
    Either way: a kept answer and a new one, a refused target, a refused method, a page, a 404."""
    import types

    from datasette import hookimpl
    from datasette.plugins import pm

    if foreign_wrapper:
        wrapper = types.ModuleType("someone_elses_plugin")  # as Datasette registers an installed plugin: a module
        wrapper.asgi_wrapper = hookimpl(lambda datasette: lambda app: app)
        pm.register(wrapper, name="someone-elses-wrapper")
    try:
        ds = datasette_for(rate_limit="100/minute", ingest=True)
        requests = [
            ("GET", "/api/v1/stats", 200), ("GET", "/api/v1/stats", 200), ("GET", "/api/v1/courses?limit=x", 400),
            ("GET", "/api/v1/" + "x" * 9000, 414), ("POST", "/api/v1/stats", 405), ("GET", "/site/courses.json", 200),
            ("GET", "/nowhere", 404),
        ]

        async def scenario():
            for number, (method, path, status) in enumerate(requests):
                response = await ds.client.request(method, path)
                assert response.status_code == status, (method, path[:40])
                assert response.headers["ratelimit"].startswith(f'"default";r={99 - number};'), (method, path[:40])
                assert response.headers["ratelimit-policy"] == '"default";q=100;w=60'

        run(scenario())
    finally:
        if foreign_wrapper:
            pm.unregister(name="someone-elses-wrapper")
