"""What researchers see first, in a real browser: the home page's link to the dashboard, and its charts.

A real ``qsite serve`` over the ingested samples; the machine's Chromium (the
Debian package ``make test`` installs) driven by Playwright. Every chart must be
drawn from the data in the database, and the browser must report no console
error or warning, no uncaught exception and no failed request.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

import pytest
import yaml
from playwright.sync_api import sync_playwright

from tests.support.paths import FEEDS, ROOT
from tests.support.processes import qsite_serve, run_qsite
from tests.support.programs import PROGRAMS

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.requires("chromium")]

SOURCES = [
    {"name": "Quantum Lab Notes", "url": str(FEEDS / "lab-notes.xml"), "tag": "Science"},
    {"name": "Qubit Industry Wire", "url": str(FEEDS / "industry-wire.atom"), "tag": "Industry"},
    {"name": "Quantum Capital Brief", "url": str(FEEDS / "capital-brief.rdf"), "tag": "Investing"},
]
# No connections but to the server under test (the machine has no other network).
CHROMIUM_ARGS = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Timeouts in ms for the browser's waits: generous, because the 2-core machine may be busy.
WAIT_MS = 60_000


def bar_labels(page, chart: str) -> list[dict[str, str]]:
    """The bars Vega-Lite drew in ``#chart-<chart>``, each as its ARIA label's ``{field title: value}``."""
    labels = page.eval_on_selector_all(f"#chart-{chart} g.mark-rect path", "bars => bars.map(bar => bar.getAttribute('aria-label'))")
    return [dict(part.split(": ", 1) for part in label.split("; ")) for label in labels]


def bar_colours(page, chart: str) -> list[tuple[dict[str, str], str]]:
    """Each bar of :func:`bar_labels` with the colour it is filled with."""
    bars = page.eval_on_selector_all(
        f"#chart-{chart} g.mark-rect path", "bars => bars.map(bar => [bar.getAttribute('aria-label'), bar.getAttribute('fill')])"
    )
    return [(dict(part.split(": ", 1) for part in label.split("; ")), fill) for label, fill in bars]


def totals(bars: list[dict[str, str]], key: str, value: str) -> dict[str, int]:
    counted: Counter = Counter()
    for bar in bars:
        counted[bar[key]] += int(bar[value])
    return dict(counted)


@pytest.fixture
def database_and_config(make_config, tmp_path):
    # a database not called `site`: the charts follow the configured database whatever its file is called
    database = tmp_path / "my.db"
    path = make_config(database=str(database), news={"sources": SOURCES}, api={"cache_max_age": 60, "rate_limit": "off"})
    done = run_qsite("ingest", "all", "--config", str(path), "--quiet")
    assert done.returncode == 0, done.stderr
    return database, path


def test_dashboard_linked_from_home_draws_every_chart_from_the_data(database_and_config, tmp_path):
    database, config = database_and_config
    chromium = PROGRAMS["chromium"].path()
    dashboard = yaml.safe_load((ROOT / "datasette.yaml").read_text(encoding="utf-8"))["plugins"]["datasette-dashboards"]["overview"]
    db = sqlite3.connect(database)

    problems: list[str] = []
    data_answers: list[str] = []

    def on_console(message):
        if message.type in ("error", "warning"):
            problems.append(f"console {message.type}: {message.text}")

    def on_response(response):
        if response.status >= 400:
            problems.append(f"HTTP {response.status}: {response.url}")
        if ".json?sql=" in response.url:
            data_answers.append(response.url)

    with qsite_serve(config, tmp_path / "serve.log") as served, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.set_default_timeout(WAIT_MS)
            page.on("console", on_console)
            page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
            page.on("requestfailed", lambda request: problems.append(f"failed: {request.url} {request.failure}"))
            page.on("response", on_response)

            page.goto(served.url("/"))
            page.get_by_role("link", name="Start with the dashboard").click()
            page.wait_for_url(re.compile(r"/-/dashboards/overview$"))
            assert page.get_by_role("heading", level=1).inner_text() == dashboard["title"]
            page.wait_for_function(
                "n => document.querySelectorAll('.dashboard-card-chart svg.marks').length === n",
                arg=sum(chart["library"] == "vega-lite" for chart in dashboard["charts"].values()),
            )
            metric = page.locator("#chart-terms-linked p")
            metric.wait_for()
            page.wait_for_load_state("networkidle")

            by_tag = bar_labels(page, "news-by-tag")
            by_source = bar_labels(page, "news-by-source")
            tag_fills, source_fills = bar_colours(page, "news-by-tag"), bar_colours(page, "news-by-source")
            slides = bar_labels(page, "slides-per-course")
            coverage = bar_labels(page, "lesson-coverage")
            terms = bar_labels(page, "terms-per-course")
            metric_text = metric.inner_text()
        finally:
            browser.close()

    assert problems == []
    assert len(data_answers) == len(dashboard["charts"])  # one query per chart, each answered (no 4xx above)

    # Each chart shows what the database holds, counted here without the charts' SQL.
    assert totals(by_tag, "Tag", "News items") == dict(db.execute("select tag, count(*) from news group by tag").fetchall())
    assert totals(by_source, "Source", "News items") == dict(db.execute("select source, count(*) from news group by source").fetchall())
    assert set(totals(by_source, "Source", "News items")) == {source["name"] for source in SOURCES}
    # Each tag has one colour, the same in both charts of the news.
    by_tag_colours = dict(sorted({(bar["Tag"], colour) for bar, colour in tag_fills}))
    by_source_colours = dict(sorted({(bar["Tag"], colour) for bar, colour in source_fills}))
    assert len(set(by_tag_colours.values())) == len(by_tag_colours) == 3
    assert by_source_colours == by_tag_colours
    weeks = {bar["Week (from Monday)"] for bar in by_tag}
    assert len(weeks) > 1 and all(re.fullmatch(r"\w{3} \d\d, \d{4}", week) for week in weeks)
    assert {(bar["Course"], int(bar["Slides"])) for bar in slides} == set(db.execute("select title, slide_count from courses").fetchall())
    assert totals(coverage, "Course", "Lessons (sections)") == dict(
        db.execute("select courses.title, count(*) from sections join courses on courses.id = sections.course_id group by courses.id").fetchall()
    )
    linked, total = db.execute("select count(section_id), count(*) from glossary").fetchone()
    assert sum(int(bar["Glossary terms"]) for bar in terms) == total
    assert metric_text == f"{linked} of {total}"
