"""Media goldens: each feed's item images and authors, item by item.

Beside the goldens of :mod:`tests.support.goldens` (url, title, date, summary),
``golden-media/<feed>.json`` holds, in the same feed order, each item's
``title`` (to read it by), ``image_url`` and ``authors`` as the pipeline makes
them from the feed's bytes alone. Kept apart so that a change of the link or
text rules and a change of the image or author rules each touch only their
own goldens. Regenerate after a deliberate change, then review the diff::

    .venv/bin/python -m tests.support.media_goldens
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pipeline.news.feeds import FeedJob, read_feed
from tests.support.goldens import SEEN_AT, feed_files
from tests.support.paths import ROOT


def media_golden_path(feed: Path) -> Path:
    return feed.parent / "golden-media" / f"{feed.name}.json"


def read_media_of(feed: Path) -> dict:
    """What the pipeline makes of ``feed``'s images and authors, as a media golden."""
    job = FeedJob(source=feed.name, tag="Science", rules=(), body=feed.read_bytes(), headers={}, location=str(feed), seen_at=SEEN_AT)
    result = read_feed(job)
    if result.error:
        raise AssertionError(f"{feed.name}: {result.error}")
    items, keys = [], set()
    for item in result.items:
        if item.key not in keys:
            keys.add(item.key)
            items.append({"title": item.title, "image_url": item.image_url, "authors": list(item.authors)})
    return {"file": feed.name, "items": items}


def load_media_golden(feed: Path) -> dict:
    return json.loads(media_golden_path(feed).read_text(encoding="utf-8"))


def write_media_golden(feed: Path) -> None:
    path = media_golden_path(feed)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(read_media_of(feed), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    for feed in feed_files():
        write_media_golden(feed)
        print(f"wrote {media_golden_path(feed).relative_to(ROOT)}", file=sys.stderr)
