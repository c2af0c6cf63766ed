"""The shipped ``deploy/nginx.conf`` in front of real ``qsite serve`` replicas: what a shared cache behind it would keep,
and what nginx answers itself.

Issue 13, section 6. nginx runs the shipped file, with only its upstream and
listening address pointed at loopback (``deploy/cluster.py``, :func:`nginx_site`,
as ``make cluster`` runs it). A response a cache may keep must carry
no ``RateLimit`` headers (a cache would replay one client's budget to
everyone), while 429s and errors keep them; and a forged ``Host`` must never
reach Datasette's absolute ``next_url``, which a cache keyed without the host
would hand to everyone.

And from a review with nginx, Varnish and Chromium in front: a health probe
through nginx, answered 503 by every replica whose data is old, must reach the
prober and never make nginx leave a replica out (it took them all out, and all
traffic got nginx's 502 page); what nginx answers itself is a problem document
a browser script can read; request targets qsite takes are not refused by nginx
first; compressed answers keep their conditional requests; and behind TLS the
absolute links say https.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sqlite3
import subprocess
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.support.known_data import seeded_database
from tests.support.paths import ROOT
from tests.support.processes import Served, free_port, qsite_serve, stop, wait_until
from tests.support.programs import PROGRAMS

_spec = importlib.util.spec_from_file_location("qsite_cluster", ROOT / "deploy" / "cluster.py")
cluster_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cluster_module)

pytestmark = [pytest.mark.slow, pytest.mark.requires("nginx")]


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by ``openssl``: what nginx ends TLS with."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [PROGRAMS["openssl"].path(), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def nginx_in_front(folder: Path, *upstream_ports: int, tls: bool = False) -> tuple[subprocess.Popen, str]:
    """nginx running the shipped config against ``127.0.0.1:<each of upstream_ports>``; returns it and its base URL.

    :param tls: listen with TLS (a self-signed certificate), as a deployment at an https address does.
    """
    nginx = PROGRAMS["nginx"].path()
    port = free_port()
    address = f"127.0.0.1:{port}"
    # the public address, as the file's comment asks
    site = cluster_module.nginx_site(list(upstream_ports), address + (" ssl" if tls else ""), address, folder / "nginx-cache")
    (folder / "site.conf").write_text(site, encoding="utf-8")
    certificate = ""
    if tls:
        cert, key = self_signed_certificate(folder)
        certificate = f"ssl_certificate {cert};\n    ssl_certificate_key {key};"
    temp = folder / "nginx-temp"
    temp.mkdir()
    (folder / "nginx.conf").write_text(
        f"""daemon off;
{"user root;" if os.geteuid() == 0 else ""}  # the workers write the cache under the test's folder
pid {folder / "nginx.pid"};
error_log {folder / "nginx-error.log"};
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    {certificate}
    include {folder / "site.conf"};
}}
""",
        encoding="utf-8",
    )
    process = subprocess.Popen([nginx, "-c", str(folder / "nginx.conf"), "-p", str(folder)], stderr=subprocess.PIPE)
    base = f"{'https' if tls else 'http'}://{address}"

    def answers():
        try:
            return httpx.get(f"{base}/-/static/app.css", timeout=1, verify=False).status_code == 200
        except httpx.HTTPError:
            return False

    if not wait_until(answers, 15):
        stop(process)
        pytest.fail(f"nginx did not start: {process.stderr.read().decode()[-2000:]}")
    return process, base


@contextlib.contextmanager
def replicas(folder: Path, count: int, api: dict) -> Iterator[list[Served]]:
    """``count`` replicas (``qsite serve``) over one database at ``folder/site.db``, with ``api`` settings."""
    config = folder / "qsite.yml"
    config.write_text(
        json.dumps({"database": str(folder / "site.db"), "site_export": {"source": "x.json"}, "api": api}), encoding="utf-8"
    )
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(qsite_serve(config, folder / f"serve-{n}.log", ready="/-/static/app.css")) for n in range(count)
        ]


def test_the_shipped_nginx_keeps_ratelimit_off_cacheable_responses_and_pins_the_host(tmp_path):
    seeded_database(tmp_path / "site.db").close()
    # a day's window: see tests/test_ratelimit.py, DAY_WINDOW
    with replicas(tmp_path, 1, {"rate_limit": "4/day"}) as (served,):
        process, base = nginx_in_front(tmp_path, served.port)
        try:
            direct = httpx.get(served.url("/api/v1/stats"))
            assert direct.status_code == 200 and "ratelimit" in direct.headers  # the service sends them

            cacheable = httpx.get(base + "/api/v1/stats")
            assert cacheable.status_code == 200 and cacheable.headers["cache-control"].startswith("public")
            assert "ratelimit" not in cacheable.headers and "ratelimit-policy" not in cacheable.headers
            # a forged Host never reaches Datasette's absolute links
            page = httpx.get(base + "/site/news.json?_size=1", headers={"Host": "forged.example"})
            assert page.status_code == 200
            assert page.json()["next_url"].startswith(f"{base}/site/news.json?")
            assert "ratelimit" not in page.headers

            error = httpx.get(base + "/api/v1/nope")  # no-store: nothing caches it, so the budget is shown
            assert error.status_code == 404 and error.headers["ratelimit"].startswith('"default";r=')
            refused = httpx.get(base + "/api/v1/news?limit=3")  # not cached: it reaches the limiter
            assert refused.status_code == 429 and refused.headers["cache-control"] == "no-store"
            assert refused.headers["ratelimit"] == '"default";r=0;t=' + refused.headers["ratelimit"].split("t=")[1]
            assert refused.headers["ratelimit-policy"] == '"default";q=4;w=86400'
        finally:
            stop(process)


def assert_nginx_problem(response: httpx.Response, status: int, name: str) -> None:
    """``response`` is nginx's own answer as a problem document a browser script can read, never stored."""
    assert response.status_code == status, response.text[:300]
    assert "x-qsite-version" not in response.headers  # nginx's, not a replica's
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["access-control-allow-origin"] == "*"
    assert response.headers["cache-control"] == "no-store"
    problem = response.json()
    assert problem["type"] == f"/api/v1/problems/{name}" and problem["status"] == status
    assert problem["title"] and problem["detail"]


def test_503s_of_every_replica_reach_the_client_and_take_no_replica_out(tmp_path):
    """Two replicas with data older than health_max_data_age and no news ever ingested:
    /api/v1/health and /api/v1/news answer 503 on both, the rest 200.

    nginx used to retry a 503 on the next replica and count it as a failure
    (max_fails=1): a second such request found every replica left out for
    10 s, and every request, of any path, got nginx's 502 page."""
    seeded_database(tmp_path / "site.db").close()
    with sqlite3.connect(tmp_path / "site.db") as db:
        db.execute("delete from data_versions where dataset = 'news'")  # news never ingested: its endpoints 503
    db.close()
    with replicas(tmp_path, 2, {"health_max_data_age": 60, "rate_limit": "off"}) as served:
        process, base = nginx_in_front(tmp_path, *(replica.port for replica in served))
        try:
            with httpx.Client(base_url=base) as client:
                for probe in range(4):  # more than the replicas: each would have been left out by now
                    health = client.get("/api/v1/health")
                    assert health.status_code == 503 and "x-qsite-version" in health.headers, health.text[:300]
                    assert health.json()["status"] == "stale" and health.headers["cache-control"] == "no-store"
                    news = client.get("/api/v1/news", params={"q": f"probe{probe}"})
                    assert news.status_code == 503 and "x-qsite-version" in news.headers, news.text[:300]
                    assert news.json()["type"] == "/api/v1/problems/no-data" and news.headers["retry-after"]
                    glossary = client.get("/api/v1/glossary", params={"q": f"probe{probe}"})  # a new URL: not from the cache
                    assert glossary.status_code == 200, glossary.text[:300]
                for replica in served:
                    stop(replica.process)
                # no replica answers: nginx's own 502, as a problem document
                gone = client.get("/api/v1/glossary", params={"q": "gone"})
                assert_nginx_problem(gone, 502, "unavailable")
                assert gone.headers["retry-after"] and "Retry-After" in gone.headers["access-control-expose-headers"]
                assert client.get("/api/v1/health").status_code == 502
        finally:
            stop(process)


def test_nginx_passes_every_request_qsite_takes_and_refuses_the_rest_as_problems(tmp_path):
    """qsite takes request targets (path and query) of 8 KiB and header fields of 8 KiB in all on /api/v1
    (32 KiB on Datasette's pages) and answers 414 and 431 past that; nginx's default buffers (8k for the request line) refused some of
    the targets first, with an HTML page a browser script could not read."""
    seeded_database(tmp_path / "site.db").close()
    with replicas(tmp_path, 1, {"rate_limit": "off"}) as (served,):
        process, base = nginx_in_front(tmp_path, served.port)
        try:
            with httpx.Client(base_url=base) as client:
                prefix = "/api/v1/glossary?padding="
                longest = prefix + "x" * (8 * 1024 + 1 - len(prefix))  # path and query: 8 KiB, the "?" aside
                taken = client.get(longest)
                assert taken.status_code == 400 and "x-qsite-version" in taken.headers, taken.text[:300]
                assert taken.json()["type"] == "/api/v1/problems/invalid-parameters"  # qsite's answer: padding is unknown
                over = client.get(longest + "x")
                assert over.status_code == 414 and "x-qsite-version" in over.headers  # qsite's own 414
                assert_nginx_problem(client.get(prefix + "x" * 50_000), 414, "uri-too-long")
                assert client.get("/api/v1/stats", headers={"X-Padding": "x" * 8000}).status_code == 200
                assert_nginx_problem(client.get("/api/v1/stats", headers={"X-Padding": "x" * 50_000}), 431, "header-fields-too-large")
                # Datasette's pages take what researchers send: a 16 KB ?sql=, an SSO proxy's 16 KB cookie
                long_sql = client.get("/site.json?sql=select+1+as+one+/*+" + "x" * 16_400 + "+*/&_shape=array")
                assert long_sql.status_code == 200 and long_sql.json() == [{"one": 1}], long_sql.text[:300]
                assert client.get("/site", headers={"Cookie": "sso=" + "c" * 16_400}).status_code == 200
            # every target's cache key fitted nginx's buffer (else: "proxy_buffer_size ... is not enough")
            logged = [line[:200] for line in (tmp_path / "nginx-error.log").read_text().splitlines() if "[error]" in line]
            assert not logged, logged
        finally:
            stop(process)


def test_compressed_answers_keep_their_validators_and_dates(tmp_path):
    """gzip for the API's types, ETags weakened by nginx still matching, If-Modified-Since as qsite answers it,
    and a cached answer's Date its replica's (nginx sends no Age)."""
    seeded_database(tmp_path / "site.db").close()
    with replicas(tmp_path, 1, {"rate_limit": "off", "cache_max_age": 300}) as (served,):
        process, base = nginx_in_front(tmp_path, served.port)
        try:
            with httpx.Client(base_url=base) as client:
                plain = client.get("/api/v1/courses", headers={"Accept-Encoding": "identity"})
                assert plain.status_code == 200 and "content-encoding" not in plain.headers
                strong = plain.headers["etag"]
                assert strong.startswith('"')
                packed = client.get("/api/v1/courses", headers={"Accept-Encoding": "gzip"})
                assert packed.headers["content-encoding"] == "gzip" and packed.json() == plain.json()
                assert packed.headers["etag"] == "W/" + strong  # nginx weakens what it compresses
                for response in (plain, packed):
                    assert "Accept-Encoding" in response.headers.get_list("vary"), response.headers
                for tag in (strong, packed.headers["etag"]):
                    for encoding in ("gzip", "identity"):
                        again = client.get("/api/v1/courses", headers={"If-None-Match": tag, "Accept-Encoding": encoding})
                        assert again.status_code == 304, (tag, encoding)

                # nginx's default answers only an exact If-Modified-Since with a 304; qsite, any time at or after the data's
                modified = parsedate_to_datetime(plain.headers["last-modified"]).timestamp()
                for since, status in ((0, 304), (3600, 304), (-3600, 200)):
                    asked = client.get("/api/v1/courses", headers={"If-Modified-Since": formatdate(modified + since, usegmt=True)})
                    assert asked.status_code == status, (since, asked.headers)

                for path in ("/api/v1/news.atom", "/api/v1/news.json", "/api/v1/nope", "/api/v1/docs", "/site"):
                    response = client.get(path, headers={"Accept-Encoding": "gzip"})
                    assert response.headers.get("content-encoding") == "gzip", (path, response.headers)

                # the replica's Date, not nginx's clock: wait for nginx's clock to pass the second the answer was made
                made = plain.headers["date"]
                assert wait_until(lambda: client.get("/api/v1/nope").headers["date"] != made, 5)
                hit = client.get("/api/v1/courses")
                assert hit.headers["x-cache"] == "HIT" and hit.headers["date"] == made
        finally:
            stop(process)


@pytest.mark.requires("openssl")
def test_behind_tls_every_absolute_link_says_https(tmp_path):
    """nginx ends TLS and says so in X-Forwarded-Proto; qsite, trusting one proxy to set it, makes https links
    (a browser refuses http requests from an https page: the dashboard's charts drew nothing)."""
    seeded_database(tmp_path / "site.db").close()
    with replicas(tmp_path, 1, {"rate_limit": "off", "trusted_proxies": 1, "forwarded_proto": True}) as (served,):
        process, base = nginx_in_front(tmp_path, served.port, tls=True)
        try:
            assert base.startswith("https://")
            with httpx.Client(base_url=base, verify=False) as client:
                document = client.get("/api/v1/openapi.json").json()
                assert document["info"]["termsOfService"] == f"{base}/api/v1/docs#terms"
                page = client.get("/site/news.json?_size=1")
                assert page.json()["next_url"].startswith(f"{base}/site/news.json?")
                assert page.headers["link"].startswith(f"<{base}/site/news.json?")
                dashboard = client.get("/-/dashboards/overview").text
                assert f"'{base}/" in dashboard and "'http://" not in dashboard  # the charts' data requests
        finally:
            stop(process)


def test_sql_answers_are_never_cached_and_past_the_budget_are_problems(tmp_path):
    """A client's own SQL (``?sql=``, however spelled) never fills the cache; past ``api.sql_answer_max_bytes``
    it is a 400 problem, never stored; Datasette's pages of the data stay cached."""
    seeded_database(tmp_path / "site.db").close()
    budget = 65_536
    with replicas(tmp_path, 1, {"rate_limit": "off", "sql_answer_max_bytes": budget}) as (served,):
        process, base = nginx_in_front(tmp_path, served.port)
        try:
            with httpx.Client(base_url=base) as client:
                for target in ("/site.json?sql=select+count(*)+from+news", "/site.json?%73ql=select+1", "/site/news.json?_where=id>0"):
                    for _ in range(2):
                        answer = client.get(target)
                        assert answer.status_code == 200, answer.text[:300]
                        assert answer.headers["cache-control"].startswith("private"), (target, answer.headers)
                        assert answer.headers["x-cache"] != "HIT", target
                huge = "/site.json?sql=select+printf('%25.*c',+999000,+'x')+from+news"
                for _ in range(2):
                    refused = client.get(huge)
                    assert refused.status_code == 400 and refused.headers["cache-control"] == "no-store"
                    assert refused.headers["content-type"] == "application/problem+json"
                    assert f"{budget:,} bytes" in refused.json()["detail"] and refused.headers["x-cache"] != "HIT"
                page = [client.get("/site/news.json?_size=2").headers["x-cache"] for _ in range(2)]
                assert page[1] == "HIT", page  # Datasette's own pages of the data are cached as before
        finally:
            stop(process)


def test_a_flood_of_header_fields_is_a_problem_through_the_shipped_nginx(tmp_path):
    """More than 100 header fields: the replica's server (granian) refuses them with a bare 431 before
    qsite sees the request; the shipped nginx answers it as qsite's problem, readable by a browser script."""
    seeded_database(tmp_path / "site.db").close()
    flood = {f"x-field-{n}": "1" for n in range(120)}
    with replicas(tmp_path, 1, {"rate_limit": "off"}) as (served,):
        direct = httpx.get(served.url("/api/v1/stats"), headers=flood)
        assert direct.status_code == 431  # the server's own refusal, without qsite's document
        process, base = nginx_in_front(tmp_path, served.port)
        try:
            with httpx.Client(base_url=base) as client:
                assert_nginx_problem(client.get("/api/v1/stats", headers=flood), 431, "header-fields-too-large")
                assert_nginx_problem(client.get("/site/news.json", headers=flood), 431, "header-fields-too-large")
                assert client.get("/api/v1/stats", headers=dict(list(flood.items())[:60])).status_code == 200
                gone = client.get("/api/v1/health")  # qsite's own answers pass as they are (a 503 when the data is old)
                assert "x-qsite-version" in gone.headers
        finally:
            stop(process)
