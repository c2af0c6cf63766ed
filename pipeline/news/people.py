"""An item's authors, from its feed entry: names only, never an email address.

feedparser gathers an entry's Atom ``<author>`` elements, its RSS ``<author>``
and ``dc:creator`` and its ``itunes:author`` into ``authors``, each a name and
an email where it could tell them apart (RSS writes ``jane@x.org (Jane Doe)``).
Only names are kept, and cleaned: an email address anywhere in a name is
removed with what encloses it (``Jane Doe <jane@x.org>`` is ``Jane Doe``), and
what is left with no letter or digit (a bare address) is dropped. Names are
kept as written otherwise (``Doe, Jane`` is one name: no list is split on
commas), once each (ignoring letter case), at most :data:`~db.model.AUTHORS_MAX` of
them and :data:`~db.model.AUTHOR_CHARS` characters each.
"""

from __future__ import annotations

import re
from typing import Mapping

from db.model import AUTHOR_CHARS, AUTHORS_MAX

from pipeline.text import one_line, shorten

#: An email address, with a ``mailto:`` before it and brackets around it if there are any.
_EMAIL = re.compile(r"[(<\[]?\s*(?:mailto:)?[^\s()<>\[\]@,;:\"']+@[^\s()<>\[\]@,;:\"']+\s*[)>\]]?", re.IGNORECASE)
#: A space an address left before a separator (``A (a@x.org), B`` is ``A, B``).
_LOOSE_SEPARATOR = re.compile(r"\s+([,;])")
#: A web address alone is no one's name (some feeds put the site's URL in ``dc:creator``).
_BARE_LINK = re.compile(r"https?://\S*", re.IGNORECASE)
#: What a name may not start or end with once an address is gone from it.
_EDGES = " \t,;:-/|()<>[]"


def clean_name(name: object) -> str | None:
    """``name`` without email addresses, on one line; ``None`` when no name is left."""
    if not isinstance(name, str):
        return None
    text = _LOOSE_SEPARATOR.sub(r"\1", one_line(_EMAIL.sub(" ", name))).strip(_EDGES).strip()
    if not any(char.isalnum() for char in text) or _BARE_LINK.fullmatch(text):
        return None
    return shorten(text, AUTHOR_CHARS)


def entry_authors(entry: Mapping) -> tuple[str, ...]:
    """The entry's author names, cleaned, in the feed's order."""
    raw = [author.get("name") for author in entry.get("authors") or () if isinstance(author, Mapping)]
    if not raw:
        raw = [entry.get("author")]
    names: dict[str, str] = {}
    for name in map(clean_name, raw):
        if name and name.casefold() not in names and len(names) < AUTHORS_MAX:
            names[name.casefold()] = name
    return tuple(names.values())
