"""The data model both sides share: the values writers store and readers serve.

Dependency-free on purpose: the pipeline (which writes), the service (which
reads) and the config (which both load) build on it, so nothing here may import
from any of them.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from importlib import metadata

#: The distribution's version, as installed (``qsite --version``, the User-Agent).
try:
    VERSION = metadata.version("qsite")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"

#: The three categories a news item can carry (spec part 2), in the order documents list them.
TAGS = ("Science", "Industry", "Investing")

#: A news item's id is the first this-many hex digits (lower case) of the SHA-256 of
#: its canonical URL: the pipeline makes them so, and the API refuses a cursor
#: naming an id of any other shape.
ITEM_ID_DIGITS = 32

#: The longest image URL an item carries (a longer one is not kept: no real image link needs it).
IMAGE_URL_MAX = 2048
#: How many author names an item carries at most, and the longest name (cut with an ellipsis).
AUTHORS_MAX = 20
AUTHOR_CHARS = 200

#: The rows of ``data_versions``: each is bumped by the transaction that changes its data.
CATALOG = "catalog"
GLOSSARY = "glossary"
NEWS = "news"
TOTALS = "totals"
DATASETS = (CATALOG, GLOSSARY, NEWS, TOTALS)


#: The shape of a time as stored and served (:func:`format_time`): RFC 3339, UTC, whole seconds, ``Z``.
STORED_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)  # any script's digits otherwise


def is_stored_time(text: str) -> bool:
    """Whether ``text`` is a time as :func:`format_time` writes it, and a real moment (no 30 February, no 25 o'clock)."""
    if not STORED_TIME.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text)  # the shape is checked: a 30th of the time strptime takes
    except ValueError:
        return False
    return True


def format_time(moment: datetime) -> str:
    """``moment`` as stored and served: RFC 3339 in UTC with a ``Z``, to the second."""
    moment = moment.astimezone(timezone.utc)
    # Not strftime("%Y"): it writes year 1 (a placeholder date real feeds carry) as "1", not "0001".
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


def utc_now() -> str:
    """The current time as :func:`format_time` writes it."""
    return format_time(datetime.now(timezone.utc))
