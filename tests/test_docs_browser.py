"""/api/v1/docs in a real browser: headless Chromium loads it from a real ``qsite serve``.

Checks what a person's browser does with the page: the language and direction
it declares (``dir="rtl"`` for Arabic), and that it loads nothing from another
host: Chromium's own network log lists every request it made, and Chromium may
resolve no name but the loopback address.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.support.known_data import seeded_database
from tests.support.processes import qsite_serve
from tests.support.programs import PROGRAMS

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.requires("chromium")]

CHROMIUM = PROGRAMS["chromium"].path()


def chromium(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            # nothing but the test server can be reached, whatever the page asks for
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def served(make_config, tmp_path):
    seeded_database(tmp_path / "site.db").close()
    with qsite_serve(make_config(api={"rate_limit": "off"}), tmp_path / "serve.log") as server:
        yield server


@pytest.mark.parametrize(("code", "direction"), [("en", "ltr"), ("ar", "rtl"), ("ja", "ltr")])
def test_the_browser_sees_the_language_and_direction(served, tmp_path, code, direction):
    netlog = tmp_path / "netlog.json"
    result = chromium(f"--log-net-log={netlog}", "--dump-dom", served.url(f"/api/v1/docs?lang={code}"))
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert f'<html lang="{code}" dir="{direction}">' in dom
    assert "<script" not in dom
    assert "/api/v1/news?limit=2" in dom  # a real example request, and its answer below it
    assert '"results": [' in dom
    # Chromium's own housekeeping (update checks, ...) is logged too; the page's requests are
    # those whose network isolation key is the page's site: the document and all it loads.
    site = "http://127.0.0.1"
    requested = {
        event["params"]["url"]
        for event in json.loads(netlog.read_text() or "{}").get("events", [])
        if isinstance(event.get("params"), dict)
        and str(event["params"].get("network_isolation_key", "")).startswith(site)
        and "url" in event["params"]
    }
    assert served.url(f"/api/v1/docs?lang={code}") in requested, requested
    foreign = sorted(url for url in requested if not url.startswith(served.base + "/"))
    assert not foreign, f"the page made the browser ask another host: {foreign}"
    # and nothing in the page could: every address it names is on this host
    addresses = re.findall(r'(?:src|href|action|srcset|poster|data)\s*=\s*"([^"]*)"', dom) + re.findall(r"url\(([^)]*)\)", dom)
    assert addresses and all(address.startswith(("/", "#")) for address in addresses), sorted(set(addresses))


def test_a_screenshot_shows_the_arabic_page(served, tmp_path):
    """The page renders (a PNG of real size); people look at these, see docs/i18n.md."""
    shot = tmp_path / "ar.png"
    result = chromium("--hide-scrollbars", "--window-size=1000,1400", f"--screenshot={shot}", served.url("/api/v1/docs?lang=ar"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
