"""qsite as a plugin in someone else's Datasette changes nothing outside /api/v1 and its own database.

A researcher's Datasette (no ``qsite serve``: the plugin setting ``own_server`` unset) serves
qsite's database beside one of their own with large values (a 2 MB blob, 1.5 MB of text), with
real third-party plugins from the lock's test extra loaded as every installed plugin is:
datasette-auth-tokens (actors from ``Authorization: Bearer`` and ``?_auth_token=``) and
datasette-atom (an output renderer), and a header-based actor plugin of an auth proxy's kind
registered here. The same requests are made with qsite's plugins loaded and with them taken out
of Datasette's plugin manager: the neighbour database, Datasette's own pages and errors answer
exactly alike. Actors open /api/v1 as they open the canned query's page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from datasette import hookimpl
from datasette.app import Datasette
from datasette.plugins import pm

from qsite.service.compat import datasette_1, datasette_kwargs
from qsite.service.datasette.metadata import load_datasette_config, load_metadata
from tests.support.processes import free_port, stop, wait_until

#: qsite's entry points (pyproject.toml), as Datasette registers them.
QSITE_PLUGINS = ("qsite", "qsite_ratelimit", "qsite_forwarded")
BLOB = bytes(range(256)) * (2 * 1024 * 1024 // 256)  # 2 MiB, past the 1 MB cap of qsite's database
TEXT = "x" * 1_500_000
TOKEN = "alice-token"
#: Where a database's arbitrary SQL is answered (1.0 moved it from ``/db.json?sql=``).
QUERY = "/-/query" if datasette_1() else ""
#: Datasette pages of the neighbour database and of the instance, each answered alike with and without qsite.
NEIGHBOUR_PATHS = (
    "/other/big",
    "/other/big.json",
    "/other/big.csv",
    "/other/big.json?_sort=nope",  # Datasette's own error (500 on 0.65), left as Datasette answers it
    "/other/big/1.blob?_blob_column=data",
    "/other" + QUERY + ".json?sql=select+id,+length(data),+length(body)+from+big",
    "/other" + QUERY + ".json?sql=select+data,+body+from+big",
    "/other" + QUERY + ".csv?sql=select+body+from+big",
    "/other" + QUERY + ".json?sql=select+zeroblob(1500000)+as+z",
    "/other" + QUERY + ".json?sql=select+nope",
    "/other" + QUERY + ".json?sql=select+1+/*+" + "x" * 16_000 + "+*/",  # a 16 KB request target
    "/-/metadata.json",
    "/-/databases.json",
    "/-/versions.json",
    "/-/settings.json",
    "/-/actor.json",
    "//example.com/",
    "//example.com",
    "/nowhere/at/all",
)


class HeaderActor:
    """An auth proxy's plugin: the actor is the ``X-Test-Actor`` header the proxy sets."""

    __name__ = "header_actor"

    @hookimpl
    def actor_from_request(self, request):
        name = request.headers.get("x-test-actor")
        return {"id": name} if name else None


@pytest.fixture
def header_actor():
    plugin = HeaderActor()
    pm.register(plugin, name="header_actor")
    try:
        yield
    finally:
        pm.unregister(plugin, name="header_actor")


@contextlib.contextmanager
def without_qsite():
    """Datasette's plugin manager without qsite's plugins while the block runs."""
    removed = [(name, pm.unregister(name=name)) for name in QSITE_PLUGINS if pm.get_plugin(name) is not None]
    assert removed, "qsite's plugins are not loaded through their entry points"
    try:
        yield
    finally:
        for name, plugin in removed:
            pm.register(plugin, name=name)


def neighbour_database(path: Path) -> Path:
    if path.exists():
        return path
    conn = sqlite3.connect(path)
    conn.execute("create table big (id integer primary key, data blob, body text)")
    conn.execute("insert into big values (1, ?, ?)", (BLOB, TEXT))
    conn.commit()
    conn.close()
    return path


def researchers_datasette(config_path: Path, folder: Path) -> Datasette:
    """site.db and other.db, the canned query api_news open to alice only, tokens for alice, qsite's plugin settings
    as a deployer writes them (no ``own_server``)."""
    config = load_datasette_config("site")
    config["databases"]["site"]["queries"]["api_news"]["allow"] = {"id": "alice"}
    config["plugins"] = {
        "qsite": {"config": str(config_path)},
        "datasette-auth-tokens": {"tokens": [{"token": TOKEN, "actor": {"id": "alice"}}], "param": "_auth_token"},
    }
    files = [str(folder / "site.db"), str(neighbour_database(folder / "other.db"))]
    return Datasette(files, **datasette_kwargs(load_metadata("site"), config))


@pytest.fixture
def config_path(make_config, seeded_config):
    # a tight fair-use limit: were it instance-wide, the neighbour's pages would soon be refused
    return make_config(api={"rate_limit": "3/minute"})


def get_all(datasette: Datasette, requests) -> list[httpx.Response | str]:
    """Each answer, or the name of the exception the app raised (Datasette 0.65's own error handler fails
    with rich installed, whether qsite is there or not)."""

    async def get(path, kwargs):
        try:
            return await datasette.client.get(path, **kwargs)
        except Exception as exc:
            return type(exc).__name__

    async def run():
        return [await get(path, kwargs) for path, kwargs in requests]

    return asyncio.run(run())


def comparable(response: httpx.Response | str):
    """What must be equal: status, header names and values but the date, and the body (JSON without its timing)."""
    if isinstance(response, str):
        return response
    headers = sorted((k, v) for k, v in response.headers.multi_items() if k not in ("date", "content-length"))
    kind = response.headers.get("content-type", "")
    if "json" in kind:
        body = without_timing(response.json())
    elif "html" in kind:
        body = None  # a page's CSRF token and timing change on every request; its status and headers are compared
        headers = [(k, v) for k, v in headers if k != "set-cookie"]
    else:
        body = response.content
    return response.status_code, headers, body


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in ("query_ms",)}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def test_the_neighbour_database_and_datasettes_pages_answer_as_without_qsite(config_path, tmp_path):
    # first the qsite database's page: Datasette 0.65's own permission checks of canned queries write each
    # query's "name" into its metadata (get_canned_queries), as qsite's checks of them at start do
    requests = [("/site", {})]
    requests += [(path, {}) for path in NEIGHBOUR_PATHS for _ in range(2)]  # twice: past the 3/minute limit
    requests.append(("/other", {"headers": {"cookie": "sso=" + "c" * 16_000}}))  # an SSO proxy's 16 KB cookie
    requests.append(("/other", {"headers": {"x-padding": "p" * 16_000}}))
    with_qsite = get_all(researchers_datasette(config_path, tmp_path), requests)
    with without_qsite():
        plain = get_all(researchers_datasette(config_path, tmp_path), requests)
    for (path, _), got, expected in zip(requests, with_qsite, plain):
        assert comparable(got) == comparable(expected), path[:80]
        assert isinstance(got, str) or "x-qsite-version" not in got.headers and "ratelimit" not in got.headers, path[:80]
    by_path = dict(zip((path for path, _ in requests), with_qsite))
    # the large values read whole: no cap on someone else's database
    assert by_path["/other/big/1.blob?_blob_column=data"].content == BLOB
    assert by_path["/other/big.json"].status_code == 200
    assert by_path["/other" + QUERY + ".csv?sql=select+body+from+big"].text.splitlines()[1] == TEXT
    # Datasette's own introspection pages keep what qsite serve's hides
    if not datasette_1():  # 1.0 shows them to the root actor only (and has no /-/metadata)
        assert all("path" in database for database in by_path["/-/databases.json"].json())
        assert "datasette-auth-tokens" in by_path["/-/metadata.json"].json()["plugins"]
    # // is Datasette's to answer (a redirect to a path of this instance, never a 404 of qsite's)
    assert by_path["//example.com/"].status_code != 404
    assert by_path["/other" + QUERY + ".json?sql=select+1+/*+" + "x" * 16_000 + "+*/"].status_code == 200


@pytest.mark.skipif(datasette_1(), reason="Datasette 1.0 shows /-/threads to the root actor only")
def test_threads_keep_their_tasks(config_path, tmp_path):
    (threads,) = get_all(researchers_datasette(config_path, tmp_path), [("/-/threads.json", {})])
    assert "tasks" in threads.json()


def test_the_api_keeps_its_own_limits_and_headers(config_path, tmp_path):
    requests = [
        ("/api/v1/stats", {}),
        ("/api/v1/stats?" + "&" * 8200, {}),
        ("/api/v1/stats", {"headers": {"x-padding": "p" * 9000}}),
        ("/site/news.json?_size=1", {}),
        ("/site" + QUERY + ".json?sql=select+zeroblob(2000000)", {}),  # qsite's own database keeps its cap
    ]
    stats, long_target, big_headers, table, too_big = get_all(researchers_datasette(config_path, tmp_path), requests)
    assert stats.status_code == 200 and stats.headers["x-qsite-version"] and stats.headers["ratelimit"]
    assert stats.headers["access-control-allow-origin"] == "*"
    assert long_target.status_code == 414 and big_headers.status_code == 431
    assert table.status_code == 200 and "access-control-allow-origin" not in table.headers
    assert too_big.status_code == 400


def test_actors_open_the_api_as_they_open_the_query_page(seeded_config, tmp_path, header_actor):
    datasette = researchers_datasette(seeded_config, tmp_path)
    cookie = {"ds_actor": datasette.sign({"a": {"id": "alice"}}, "actor")}
    as_alice = [
        ("header", {"headers": {"x-test-actor": "alice"}}, ""),
        ("token in the query", {}, f"?_auth_token={TOKEN}"),
        ("bearer token", {"headers": {"authorization": f"Bearer {TOKEN}"}}, ""),
        ("cookie", {"cookies": cookie}, ""),
    ]
    requests = []
    for _name, kwargs, query in as_alice:
        requests += [("/site/api_news.json" + query, kwargs), ("/api/v1/news" + query, kwargs), ("/api/v1/news" + query, {})]
    requests += [("/site/api_news.json", {}), ("/api/v1/news", {})]  # anonymous, after alice: nothing kept for her
    requests += [("/site/api_news.json", {"headers": {"x-test-actor": "bob"}}), ("/api/v1/news", {"headers": {"x-test-actor": "bob"}})]
    requests += [("/api/v1/courses", {"headers": {"x-test-actor": "alice"}})]
    answers = get_all(datasette, requests)
    for index, (name, _kwargs, query) in enumerate(as_alice):
        page, api, anonymous = answers[3 * index : 3 * index + 3]
        assert page.status_code == 200, name
        assert api.status_code == 200, (name, api.text[:300])
        assert api.json()["results"], name
        # answered because of who asked: no shared cache may keep it
        assert api.headers["cache-control"].startswith("private"), name
        if not query:  # the same URL without the actor's header or cookie: never her answer, kept or not
            assert anonymous.status_code == 403, name
    page, api = answers[12:14]
    assert page.status_code == 403 and api.status_code == 403
    page, api = answers[14:16]
    assert page.status_code == 403 and api.status_code == 403  # bob
    public = answers[16]
    assert public.status_code == 200 and public.headers["cache-control"].startswith("public")


DATASETTE = Path(sys.executable).with_name("datasette")


def test_plain_datasette_serve_takes_16_kb_targets_and_headers(config_path, tmp_path):
    """A real ``datasette serve site.db other.db`` with qsite installed: Datasette's pages take what
    researchers send, /api/v1 keeps its own limits, and // is Datasette's redirect."""
    neighbour_database(tmp_path / "other.db")
    metadata = tmp_path / "metadata.json"
    metadata.write_text(json.dumps({**load_metadata("site"), "plugins": {"qsite": {"config": str(config_path)}}}))
    port = free_port()
    args = [str(DATASETTE), "serve", str(tmp_path / "site.db"), str(tmp_path / "other.db"), "-m", str(metadata),
            "-h", "127.0.0.1", "-p", str(port)]
    env = {k: v for k, v in os.environ.items() if k not in ("QSITE_DATASETTE_CONFIG", "QSITE_CONFIG")}
    log = tmp_path / "datasette.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: _answers(base + "/-/versions.json"), 30, interval=0.1), log.read_text()[-2000:]
        with httpx.Client(base_url=base, timeout=10) as client:
            long_sql = "/other" + QUERY + ".json?sql=select+1+/*+" + "x" * 16_400 + "+*/"
            assert client.get(long_sql).status_code == 200
            assert client.get("/site" + QUERY + ".json?sql=select+1+/*+" + "x" * 16_400 + "+*/").status_code == 200
            assert client.get("/site", headers={"cookie": "sso=" + "c" * 16_400}).status_code == 200
            assert client.get("/other", headers={"x-padding": "p" * 16_400}).status_code == 200
            assert client.get("/api/v1/stats?" + "&" * 8200).status_code == 414
            assert client.get("/api/v1/stats", headers={"x-padding": "p" * 9000}).status_code == 431
            assert client.get("/api/v1/stats").status_code == 200
            assert client.get("/api/v1/stats").status_code == 429  # the fourth in a minute
            for _ in range(5):  # past the 3/minute limit: only /api/v1 counts
                assert client.get("/other/big.json").status_code == 200
            assert client.get("//example.com/", follow_redirects=False).status_code != 404
    finally:
        stop(process)
    # qsite's layers hand /metrics the status only on its own server; returned to uvicorn, it would close the connection
    assert "should return None" not in log.read_text()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
