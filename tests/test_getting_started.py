"""docs/getting-started.md's "Use your own data" walk, run as written: a feed file written by hand,
a config of one's own, a database not called ``site``, and at the end a server whose home page,
dashboard charts and API answer from that data.

The blocks run with bash in a folder laid out as the checkout (``pipeline/`` linked, ``config/``
and ``db/`` empty, ``.venv`` the environment running this test), so nothing of the real checkout
changes. Only the server's port differs from the page, a free one instead of 8001.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import yaml

from tests.support.paths import ROOT
from tests.support.processes import free_port, stop_group, wait_until

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "getting-started.md"


def walk_blocks() -> list[str]:
    """The ``sh`` blocks of the page's "Use your own data" section, in order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Use your own data\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.S)


def inline_commands() -> list[str]:
    """The ``.venv/bin/qsite ...`` commands the section's prose gives in-line."""
    section = PAGE.read_text(encoding="utf-8").split("\n## Use your own data\n", 1)[1].split("\n## ", 1)[0]
    prose = re.sub(r"```.*?```", "", section, flags=re.S)
    return re.findall(r"`(\.venv/bin/qsite [^`]+)`", prose)


@pytest.fixture
def checkout(tmp_path):
    folder = tmp_path / "checkout"
    (folder / "config").mkdir(parents=True)
    (folder / "db").mkdir()
    (folder / "pipeline").symlink_to(ROOT / "pipeline")
    (folder / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return folder


def run(command: str, folder: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-e", "-c", command], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "QSITE_CONFIG"})
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


def start(command: str, folder: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as output:
        return subprocess.Popen(["bash", "-c", command], cwd=folder, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True, env={k: v for k, v in os.environ.items() if k != "QSITE_CONFIG"})


def test_the_own_data_walk_ends_with_the_dashboard_and_the_api_on_that_data(checkout, tmp_path):
    feed, config_and_ingest, serve, keep_fresh = walk_blocks()
    run(feed, checkout)
    ingested = run(config_and_ingest, checkout)
    assert "news My Lab News: ok" in ingested.stdout, ingested.stdout
    assert (checkout / "db" / "my.db").exists() and not (checkout / "db" / "site.db").exists()

    port = free_port()
    (line,) = [line for line in serve.splitlines() if line.strip()]
    server = start(f"{line} --port {port}", checkout, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            try:
                return httpx.get(base + "/api/v1", timeout=5).status_code == 200
            except httpx.HTTPError:
                return server.poll() is not None

        assert wait_until(up, 60, 0.2) and server.poll() is None, (tmp_path / "serve.log").read_text()
        with httpx.Client(base_url=base, timeout=30) as client:
            home = client.get("/").text
            assert "Start with the dashboard" in home and 'href="/-/dashboards/overview"' in home
            assert client.get("/-/dashboards/overview").status_code == 200
            # every chart's query, as the dashboard's page sends it, against the database it is configured over
            charts = yaml.safe_load((ROOT / "datasette.yaml").read_text(encoding="utf-8"))["plugins"]["datasette-dashboards"]["overview"]["charts"]
            dashboard = client.get("/-/dashboards/overview").text
            assert '"db": "my"' in dashboard and '"db": "site"' not in dashboard
            for name, chart in charts.items():
                answer = client.get(f"/my.json?sql={quote(chart['query'])}&_shape=objects")
                assert answer.status_code == 200, (name, answer.text[:300])
            tags = client.get("/my.json?sql=" + quote("select tag, sum(items) as items from news_counts where span = 'day' group by tag") + "&_shape=objects").json()
            assert tags["rows"] == [{"tag": "Science", "items": 1}]
            news = client.get("/api/v1/news", params={"tag": "science"}).json()
            assert [item["title"] for item in news["results"]] == ["Our first two-qubit gate"]
    finally:
        stop_group(server)

    for line in (line for line in keep_fresh.splitlines() if line.strip()):
        command = line.split("#")[0].strip()
        if " schedule " in command:
            scheduler = start(command, checkout, tmp_path / "schedule.log")
            try:
                assert wait_until(lambda: scheduler.poll() is not None, 4) is False, (tmp_path / "schedule.log").read_text()
            finally:
                stop_group(scheduler)
        else:
            assert "My Lab News" in run(command, checkout).stdout
    (now,) = inline_commands()
    assert "news My Lab News: unchanged" in run(now, checkout).stdout
