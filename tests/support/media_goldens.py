"""Media goldens: each feed's item images and authors, item by item.

Beside the goldens of :mod:`tests.support.goldens` (url, title, date, summary),
``golden-media/<feed>.json`` holds, in the same feed order, each item's
``title`` (to read it by), ``image_url`` and ``authors`` as the pipeline makes
them from the feed's bytes alone. Kept apart so that a change of the link or
text rules and a change of the image or author rules each touch only their
own goldens. Regenerate after a deliberate change, then review the diff::

    .venv-test/bin/python -m tests.support.media_goldens
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.goldens import feed_files, read_items, write_json
from tests.support.paths import ROOT


def media_golden_path(feed: Path) -> Path:
    return feed.parent / "golden-media" / f"{feed.name}.json"


def read_media_of(feed: Path) -> dict:
    """What the pipeline makes of ``feed``'s images and authors, as a media golden."""
    _, items = read_items(feed)
    return {"file": feed.name, "items": [{"title": i.title, "image_url": i.image_url, "authors": list(i.authors)} for i in items]}


def load_media_golden(feed: Path) -> dict:
    return json.loads(media_golden_path(feed).read_text(encoding="utf-8"))


def write_media_golden(feed: Path) -> None:
    write_json(media_golden_path(feed), read_media_of(feed))


if __name__ == "__main__":
    for feed in feed_files():
        write_media_golden(feed)
        print(f"wrote {media_golden_path(feed).relative_to(ROOT)}", file=sys.stderr)
