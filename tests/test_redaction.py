"""No credential of a configured URL and no local path reaches a public page, a log line or ``qsite status``.

Issue 13, section 4. Real processes throughout: ``qsite ingest all`` fetches
a site export and feeds from a loopback HTTP server through URLs carrying
credentials (userinfo, ``?token=``, an ``?apikey=`` taken from the
environment with ``${FEED_KEY}``, a failing feed's ``?signature=``) and a feed
from a local file; then ``qsite status`` and ``qsite serve`` run. Every
Datasette page, JSON and CSV of every table (``sources``, ``ingest_runs`` and
``export_state`` included), the introspection pages and the API are searched
for the credentials and for local paths; every log line and the status output
for the credentials. Researchers still see each publisher's name and public URL.
A database written before redaction is cleaned by its migration.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from pathlib import Path

import httpx
import pytest

from qsite.db.redact import redact_urls
from tests.support.config_files import write_config
from tests.support.local_server import Reply
from tests.support.paths import FEEDS, ROOT, SITE_EXPORT
from tests.support.processes import qsite_serve, run_qsite

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow

FIGURES = Path(os.environ.get("QSITE_FIGURES", "/tmp/qsite-reliability")) / "redaction.json"
EXPORT_USER = "exportuser-Q7"
EXPORT_PASSWORD = "pw-Xyzzy-SECRET1"
EXPORT_TOKEN = "tok-Plugh-SECRET2"
FEED_KEY = "key-Frobozz-SECRET3"
FEED_SIGNATURE = "sig-Grue-SECRET4"
SECRETS = (EXPORT_USER, EXPORT_PASSWORD, EXPORT_TOKEN, FEED_KEY, FEED_SIGNATURE)


def leaks(text: str, forbidden) -> list[str]:
    return [value for value in forbidden if value in text]


def test_credentials_and_local_paths_stay_out_of_every_public_page_log_and_status(http_server, tmp_path):
    http_server.routes["/export.json"] = Reply(200, SITE_EXPORT.read_bytes(), {"Content-Type": "application/json"})
    http_server.routes["/feed.xml"] = Reply(200, (FEEDS / "lab-notes.xml").read_bytes(), {"Content-Type": "application/rss+xml"})
    base = http_server.url("")
    export_url = f"http://{EXPORT_USER}:{EXPORT_PASSWORD}@127.0.0.1:{http_server.port}/export.json?token={EXPORT_TOKEN}&v=1"
    config = write_config(
        tmp_path,
        site_export={"source": export_url},
        news={
            "sources": [
                {"name": "Quantum Lab Notes", "url": base + "/feed.xml?apikey=${FEED_KEY}&lang=en", "tag": "Science"},
                {"name": "Gone Wire", "url": base + f"/gone.xml?X-Amz-Signature={FEED_SIGNATURE}", "tag": "Industry"},
                {"name": "Quantum Capital Brief", "url": str(FEEDS / "capital-brief.rdf"), "tag": "Investing"},
            ]
        },
        api={"rate_limit": "off"},
    )
    assert FEED_KEY not in config.read_text()  # the config file itself holds no key
    env = {"QSITE_LOG_LEVEL": "DEBUG", "FEED_KEY": FEED_KEY}
    ingest = run_qsite("ingest", "all", "--config", str(config), env=env)
    assert ingest.returncode == 1, ingest.stderr  # Gone Wire answers 404; the others are stored
    seen = [request.path for request in http_server.requests]
    assert f"/feed.xml?apikey={FEED_KEY}&lang=en" in seen  # the key from the environment was used
    assert any(request.headers.get("authorization", "").startswith("Basic ") for request in http_server.requests)
    logs = [ingest.stdout + ingest.stderr]
    status = [run_qsite("status", "--config", str(config), env=env), run_qsite("status", "--json", "--config", str(config), env=env)]
    assert all(result.returncode == 0 for result in status), status[0].stderr
    logs += [result.stdout + result.stderr for result in status]

    # What researchers keep: publishers' names and public URLs.
    db = sqlite3.connect(tmp_path / "site.db")
    sources = dict(db.execute("SELECT name, url FROM sources"))
    assert sources == {
        "Quantum Lab Notes": base + "/feed.xml?apikey=REDACTED&lang=en",
        "Gone Wire": base + "/gone.xml?X-Amz-Signature=REDACTED",
        "Quantum Capital Brief": "capital-brief.rdf",
    }
    (site_run,) = db.execute("SELECT source FROM ingest_runs WHERE kind = 'site'").fetchall()
    assert site_run[0] == f"http://127.0.0.1:{http_server.port}/export.json?token=REDACTED&v=1"
    assert db.execute("SELECT count(*) FROM news").fetchone()[0] > 0
    db.close()

    local = [str(tmp_path), str(config), str(ROOT), sys.prefix, sys.base_prefix]
    public_pages = [
        "/-/metadata", "/-/metadata.json", "/-/databases", "/-/databases.json", "/-/settings.json", "/-/threads",
        "/-/threads.json", "/-/versions.json", "/-/plugins.json", "/.json", "/site", "/site.json",
        "/api/v1", "/api/v1/stats", "/api/v1/news?limit=100", "/api/v1/openapi.json",
    ]
    checked = 0
    with qsite_serve(config, tmp_path / "serve.log", env=env) as served, httpx.Client(base_url=served.base, timeout=20) as client:
        tables = [table["name"] for table in client.get("/site.json").json()["tables"]]
        assert {"sources", "ingest_runs", "export_state"} <= set(tables)
        for table in tables:
            public_pages += [f"/site/{table}", f"/site/{table}.json?_shape=array&_size=max", f"/site/{table}.csv?_size=max"]
        for path in public_pages:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            assert not leaks(response.text, SECRETS), (path, leaks(response.text, SECRETS))
            assert not leaks(response.text, local), (path, leaks(response.text, local))
            checked += 1
        metadata = client.get("/-/metadata.json").json()
        databases = client.get("/-/databases.json").json()
        assert "plugins" not in metadata and all("path" not in database for database in databases)
        # as Datasette's own page lists them: the served database, never its _internal catalog
        assert [database["name"] for database in databases] == ["site"]
    logs.append((tmp_path / "serve.log").read_text())
    lines = "\n".join(logs).splitlines()
    assert any("127.0.0.1" in line and "feed.xml" in line for line in lines), "the DEBUG log should name the fetched URLs"
    for line in lines:
        assert not leaks(line, SECRETS), line
    assert checked > 60
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text(json.dumps({"secrets": len(SECRETS), "responses": checked, "log_and_status_lines": len(lines)}))


@pytest.mark.parametrize(
    "text, redacted",
    [
        ("http://127.0.0.1:8201/loop?apikey=K: more than 5 redirects", "http://127.0.0.1:8201/loop?apikey=REDACTED: more than 5 redirects"),
        ("tried http://h.example/a?token=K, http://h.example/b?token=K; gave up", "tried http://h.example/a?token=REDACTED, http://h.example/b?token=REDACTED; gave up"),
        ("(see http://u:pw@h.example/x?token=K).", "(see http://h.example/x?token=REDACTED)."),
        ("at http://h.example/feed?apikey=K.", "at http://h.example/feed?apikey=REDACTED."),
        ("http://h.example/a:b.c?token=K!", "http://h.example/a:b.c?token=REDACTED!"),  # only the end is given back
    ],
)
def test_a_url_in_text_ends_before_trailing_punctuation(text, redacted):
    """The punctuation after a URL was read as part of it: a log line lost its ``:`` to ``apikey=REDACTED``."""
    assert redact_urls(text) == redacted


def test_trailing_punctuation_keeps_redaction_linear():
    started = time.perf_counter()
    for text in ("a://" + ":" * 400_000, "a://." * 100_000, ("a://" + "." * 40 + " ") * 10_000):
        redact_urls(text)
    assert time.perf_counter() - started < 1  # about 0.05 s; a quadratic reading takes minutes


def test_the_migration_redacts_what_was_stored_before(qsite, tmp_path):
    config = write_config(tmp_path)
    assert qsite("migrate", "--config", str(config)).returncode == 0
    db = sqlite3.connect(tmp_path / "site.db")
    with db:
        db.execute("DELETE FROM _sqlite_migrations WHERE name = 'm004_redact_locations'")
        db.execute(
            "INSERT INTO sources (name, url, tag, last_error) VALUES (?, ?, ?, ?)",
            ["Lab", f"https://u:{EXPORT_PASSWORD}@feeds.example/rss?apikey={FEED_KEY}", "Science",
             f"Client error '404 Not Found' for url 'https://feeds.example/rss?apikey={FEED_KEY}'"],
        )
        db.execute("INSERT INTO sources (name, url, tag) VALUES ('Files', ?, 'Industry')", [str(tmp_path / "feeds" / "wire.atom")])
        db.execute(
            "INSERT INTO ingest_runs (kind, source, started_at, status, error) VALUES ('site', ?, '2026-11-20T08:00:00Z', 'failed', ?)",
            [f"https://feeds.example/export.json?token={EXPORT_TOKEN}", f"cannot read {tmp_path}/export.json"],
        )
        db.execute("INSERT INTO ingest_runs (kind, source, started_at, status) VALUES ('news', 'Lab', '2026-11-20T08:00:00Z', 'ok')")
        for when, location in (("2026-11-20T08:00:00Z", f"https://feeds.example/export.json?token={EXPORT_TOKEN}"),
                               ("2026-11-21T08:00:00Z", "https://feeds.example/export.json?token=new")):
            db.execute("INSERT INTO export_state (source, etag, fetched_at) VALUES (?, ?, ?)", [location, when, when])
    db.close()
    assert qsite("migrate", "--config", str(config)).returncode == 0
    db = sqlite3.connect(tmp_path / "site.db")
    assert dict(db.execute("SELECT name, url FROM sources")) == {
        "Lab": "https://feeds.example/rss?apikey=REDACTED", "Files": "wire.atom",
    }
    assert db.execute("SELECT last_error FROM sources WHERE name = 'Lab'").fetchone()[0] == (
        "Client error '404 Not Found' for url 'https://feeds.example/rss?apikey=REDACTED'"
    )
    assert db.execute("SELECT kind, source, error FROM ingest_runs ORDER BY id").fetchall() == [
        ("site", "https://feeds.example/export.json?token=REDACTED", "cannot read export.json"),
        ("news", "Lab", None),
    ]
    # two locations that now read the same: the newest state stays
    assert db.execute("SELECT source, etag FROM export_state").fetchall() == [
        ("https://feeds.example/export.json?token=REDACTED", "2026-11-21T08:00:00Z")
    ]
    everything = json.dumps([db.execute(f"SELECT * FROM {table}").fetchall() for table in ("sources", "ingest_runs", "export_state")])
    assert not leaks(everything, SECRETS + (str(tmp_path),))
    db.close()


def test_an_unset_environment_variable_is_an_error_naming_key_and_variable(tmp_path):
    config = write_config(tmp_path, site_export={"source": "https://export.example/site.json?token=${QSITE_TEST_UNSET_TOKEN}"})
    result = run_qsite("status", "--config", str(config), env={"QSITE_TEST_UNSET_TOKEN_OTHER": "x"})
    assert result.returncode == 2
    assert "site_export.source: environment variable QSITE_TEST_UNSET_TOKEN is not set" in result.stderr
