"""Golden files: what a feed of tests/data/realfeeds (or syntheticfeeds) must land as, item by item.

A golden is ``<feed file>.json`` in the ``golden/`` folder beside the feed:
its items in feed order (an entry repeated within the feed counts once),
each with ``url``, ``title``, ``published_at`` (``"first seen"`` when the
feed gives no date that reads right) and ``summary`` (its first
:data:`SUMMARY_CHARS` characters), plus the ``warning`` the source gets when
the file is read as it is (no HTTP headers), the entries skipped for want of
a link (``skipped_no_link``) and, where the feed has any, the entries with
nothing in them (``empty``: no stories, not counted as skipped).

Regenerate them all after a deliberate change of the rules, then review the
diff by hand against the feeds (``git diff tests/data``)::

    .venv-test/bin/python -m tests.support.goldens
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

from qsite.pipeline.news.feeds import FeedJob, read_feed
from tests.support.paths import ROOT

REAL = ROOT / "tests" / "data" / "realfeeds"
SYNTHETIC = ROOT / "tests" / "data" / "syntheticfeeds"
#: Characters of each summary kept in a golden.
SUMMARY_CHARS = 80
#: What a golden says for an item dated with the time it was first seen.
FIRST_SEEN = "first seen"
#: The first-seen time the goldens are made with (after every date in the corpus).
SEEN_AT = "2030-01-01T00:00:00Z"
#: Where a feed with relative links really lives; its HTTP replies name it in ``Content-Location``.
HOMES = {"intertwingly.atom": "http://intertwingly.net/blog/index.atom"}


#: Feeds whose reading takes seconds: every date of oui-design.rss ("05/20 7:03 am") lacks a year, and
#: dateparser tries each of its locales on each one (within the reader's budget). Left out of make test-fast.
SLOW_FEEDS = {"oui-design.rss"}


def feed_params(feeds: list[Path]) -> list:
    """``feeds`` as pytest parameters named by file, those of :data:`SLOW_FEEDS` marked ``slow``."""
    return [pytest.param(feed, id=feed.name, marks=[pytest.mark.slow] if feed.name in SLOW_FEEDS else []) for feed in feeds]


def feed_files() -> list[Path]:
    """Every feed with a golden: the real ones, then the synthetic ones."""
    return [
        path
        for folder in (REAL, SYNTHETIC)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.suffix in (".rss", ".rdf", ".atom")
    ]


def golden_path(feed: Path) -> Path:
    return feed.parent / "golden" / f"{feed.name}.json"


def item_record(title: str, url: str, published_at: str, summary: str, dated: bool) -> dict:
    """One item as a golden shows it."""
    return {
        "url": url,
        "title": title,
        "published_at": published_at if dated else FIRST_SEEN,
        "summary": summary[:SUMMARY_CHARS],
    }


@functools.cache  # a pure reading of the file's bytes: the tests reading the corpus (goldens, media, markup) share it
def read_items(feed: Path):
    """The pipeline's reading of ``feed`` from its bytes alone: the result, and its items once each (by entry key)."""
    job = FeedJob(source=feed.name, tag="Science", rules=(), body=feed.read_bytes(), headers={}, location=str(feed), seen_at=SEEN_AT)
    result = read_feed(job)
    if result.error:
        raise AssertionError(f"{feed.name}: {result.error}")
    items, keys = [], set()
    for item in result.items:
        if item.key not in keys:
            keys.add(item.key)
            items.append(item)
    return result, items


def read_golden_of(feed: Path) -> dict:
    """What the pipeline makes of ``feed`` read from its bytes alone, as a golden."""
    result, items = read_items(feed)
    records = [item_record(item.title, item.url, item.published_at, item.summary, item.dated) for item in items]
    empty = {"empty": result.empty} if result.empty else {}  # only where a feed has them: the other goldens stay as they are
    return {"file": feed.name, "warning": result.warning, "skipped_no_link": result.skipped, **empty, "items": records}


def load_golden(feed: Path) -> dict:
    return json.loads(golden_path(feed).read_text(encoding="utf-8"))


def write_json(path: Path, data: dict) -> None:
    """A golden file as the goldens are written: UTF-8 as is, one space of indent, a final newline."""
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_golden(feed: Path) -> None:
    write_json(golden_path(feed), read_golden_of(feed))


if __name__ == "__main__":
    for feed in feed_files():
        write_golden(feed)
        print(f"wrote {golden_path(feed).relative_to(ROOT)}", file=sys.stderr)
