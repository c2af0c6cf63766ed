"""The shipped ``deploy/nginx.conf`` in front of a real ``qsite serve``: what a shared cache behind it would keep.

Issue 13, section 6. nginx runs the shipped file, with only its upstream and
listening address pointed at loopback. A response a cache may keep must carry
no ``RateLimit`` headers (a cache would replay one client's budget to
everyone), while 429s and errors keep them; and a forged ``Host`` must never
reach Datasette's absolute ``next_url``, which a cache keyed without the host
would hand to everyone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.known_data import seeded_database
from tests.support.paths import ROOT
from tests.support.processes import free_port, qsite_serve, stop, wait_until
from tests.support.programs import PROGRAMS

SHIPPED = ROOT / "deploy" / "nginx.conf"


def nginx_in_front(folder: Path, upstream_port: int) -> tuple[subprocess.Popen, int]:
    """nginx running the shipped config against ``127.0.0.1:upstream_port``; returns it and its port."""
    nginx = PROGRAMS["nginx"].path()
    port = free_port()
    site = SHIPPED.read_text(encoding="utf-8").replace("server api:8001", f"server 127.0.0.1:{upstream_port}")
    site = re.sub(r"listen\s+80\b", f"listen 127.0.0.1:{port}", site)
    site = site.replace('"localhost:8001"', f'"127.0.0.1:{port}"')  # the public address, as the comment asks
    site = site.replace("/var/cache/nginx/qsite", str(folder / "nginx-cache"))
    (folder / "site.conf").write_text(site, encoding="utf-8")
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
    include {folder / "site.conf"};
}}
""",
        encoding="utf-8",
    )
    process = subprocess.Popen([nginx, "-c", str(folder / "nginx.conf"), "-p", str(folder)], stderr=subprocess.PIPE)

    def answers():
        try:
            return httpx.get(f"http://127.0.0.1:{port}/-/static/app.css", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    if not wait_until(answers, 15):
        stop(process)
        pytest.fail(f"nginx did not start: {process.stderr.read().decode()[-2000:]}")
    return process, port


@pytest.mark.slow
@pytest.mark.requires("nginx")
def test_the_shipped_nginx_keeps_ratelimit_off_cacheable_responses_and_pins_the_host(tmp_path):
    seeded_database(tmp_path / "site.db").close()
    config = tmp_path / "qsite.yml"
    config.write_text(  # a day's window: see tests/test_ratelimit.py, DAY_WINDOW
        json.dumps({"database": str(tmp_path / "site.db"), "site_export": {"source": "x.json"}, "api": {"rate_limit": "4/day"}}),
        encoding="utf-8",
    )
    with qsite_serve(config, tmp_path / "serve.log", ready="/-/static/app.css") as served:
        process, port = nginx_in_front(tmp_path, served.port)
        try:
            base = f"http://127.0.0.1:{port}"
            direct = httpx.get(served.url("/api/v1/stats"))
            assert direct.status_code == 200 and "ratelimit" in direct.headers  # the service sends them

            cacheable = httpx.get(base + "/api/v1/stats")
            assert cacheable.status_code == 200 and cacheable.headers["cache-control"].startswith("public")
            assert "ratelimit" not in cacheable.headers and "ratelimit-policy" not in cacheable.headers
            # a forged Host never reaches Datasette's absolute links
            page = httpx.get(base + "/site/news.json?_size=1", headers={"Host": "forged.example"})
            assert page.status_code == 200
            assert page.json()["next_url"].startswith(f"http://127.0.0.1:{port}/site/news.json?")
            assert "ratelimit" not in page.headers

            error = httpx.get(base + "/api/v1/nope")  # no-store: nothing caches it, so the budget is shown
            assert error.status_code == 404 and error.headers["ratelimit"].startswith('"default";r=')
            refused = httpx.get(base + "/api/v1/news?limit=3")  # not cached: it reaches the limiter
            assert refused.status_code == 429 and refused.headers["cache-control"] == "no-store"
            assert refused.headers["ratelimit"] == '"default";r=0;t=' + refused.headers["ratelimit"].split("t=")[1]
            assert refused.headers["ratelimit-policy"] == '"default";q=4;w=86400'
        finally:
            stop(process)
