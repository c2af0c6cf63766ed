"""An item's authors, from its feed entry: names only, never an email address.

feedparser gathers an entry's Atom ``<author>`` elements, its RSS ``<author>``
and ``dc:creator`` and its ``itunes:author`` into ``authors``, each a name and
an email where it could tell them apart (RSS writes ``jane@x.org (Jane Doe)``).
Its own split of ``email (Name)`` only knows domain endings of two to four
letters (``jonas@insanity.industries (Jonas)`` came out as the name ``stries
(Jonas``), so an author it split out of the entry's ``author`` text is read
again from that text, or, when that text is another author's (an entry with
several), from the address and the name put back together. An Atom entry with
no author of its own has its feed's (RFC 4287, 4.2.1); an RSS channel's
``managingEditor`` is no item's author.

Only names are kept, and cleaned: an email address anywhere in a name is
removed with what encloses it (``Jane Doe <jane@x.org>`` is ``Jane Doe``), and
with the separators it leaves at the name's edge (``jane@x.org / Jane`` is
``Jane``); what is left with no letter or digit (a bare address) is dropped.
A name never ends with a separator (``Jane Doe,`` is ``Jane Doe``, so it is
one author beside ``Jane Doe``) and starts with one only when a letter or
digit follows it directly (Reddit's ``/u/jane``; ``- Jane`` is ``Jane``).
Names are kept as written otherwise (``Doe, Jane`` is one name: no list is
split on commas; ``Jane (Editor)`` keeps its brackets), once each (ignoring
letter case), at most :data:`~qsite.db.model.AUTHORS_MAX` of them and
:data:`~qsite.db.model.AUTHOR_CHARS` characters each.
"""

from __future__ import annotations

import re
from typing import Mapping

from qsite.db.model import AUTHOR_CHARS, AUTHORS_MAX

from qsite.pipeline.text import one_line, shorten

#: An email address, with a ``mailto:`` before it and brackets around it if there are any.
_EMAIL = re.compile(r"[(<\[]?\s*(?:mailto:)?[^\s()<>\[\]@,;:\"']+@[^\s()<>\[\]@,;:\"']+\s*[)>\]]?", re.IGNORECASE)
#: A space an address left before a separator (``A (a@x.org), B`` is ``A, B``).
_LOOSE_SEPARATOR = re.compile(r"\s+([,;])")
#: A web address alone is no one's name (some feeds put the site's URL in ``dc:creator``).
_BARE_LINK = re.compile(r"https?://\S*", re.IGNORECASE)
#: What a name may not end with, nor start with where an address was cut from its start.
_EDGES = " \t,;:-/|"
#: What a name's start loses where no address was cut from it: spaces, and each separator but one a letter
#: or digit follows directly. That one is the name's own (Reddit's ``/u/jane``); ``- Jane`` and ``, Jane``
#: start with a list's punctuation.
_LOOSE_START = re.compile(r"(?:\s|[,;:\-/|](?![^\W_]))*")
#: Brackets: each opening one's closer, and each closing one's opener. A name loses a pair that
#: encloses it whole, or one an address left unpaired at its edge, and keeps a pair of its own
#: (``Jane (Editor)``).
_CLOSER = {"(": ")", "<": ">", "[": "]"}
_OPENER = {closing: opening for opening, closing in _CLOSER.items()}


def clean_name(name: object) -> str | None:
    """``name`` without email addresses, on one line; ``None`` when no name is left."""
    if not isinstance(name, str):
        return None
    pieces = _EMAIL.split(name)  # the text between addresses
    text = _LOOSE_SEPARATOR.sub(r"\1", one_line(" ".join(pieces)))
    # The start an address was cut from is one that nothing of a name stood before.
    cut_start = len(pieces) > 1 and not any(char.isalnum() for char in pieces[0])
    text = _unbracketed(text, cut_start)
    if not any(char.isalnum() for char in text) or _BARE_LINK.fullmatch(text):
        return None
    return shorten(text, AUTHOR_CHARS)


def _unbracketed(text: str, cut_start: bool = False) -> str:
    """``text`` without separators at its edges, and without brackets enclosing it whole or left unpaired there.

    :param cut_start: an address was cut from the start of ``text``: every separator goes from there too,
        else one a letter or digit follows directly stays (:data:`_LOOSE_START`).
    """
    while text := (text.lstrip(_EDGES) if cut_start else text[_LOOSE_START.match(text).end() :]).rstrip(_EDGES):
        first, last = text[0], text[-1]
        if _CLOSER.get(first) == last and first not in text[1:-1] and last not in text[1:-1]:
            text = text[1:-1]  # (Jane Doe), from "jane@x.org (Jane Doe)"
        elif last in _CLOSER or (last in _OPENER and _OPENER[last] not in text):
            text = text[:-1]  # "Jane (", or "Jane)"
        elif first in _OPENER or (first in _CLOSER and _CLOSER[first] not in text):
            text = text[1:]  # ") Jane", or "(Jane"
        else:
            break
    return text


def entry_authors(entry: Mapping, atom: bool = False) -> tuple[str, ...]:
    """The entry's (or a feed's) author names, cleaned, in the feed's order.

    :param atom: the feed is Atom, whose names and addresses are elements of their own
        (``<name>``, ``<email>``): nothing was split from text, so nothing is put back.
    """
    written = entry.get("author")
    raw = [_written_name(author, written, atom) for author in entry.get("authors") or () if isinstance(author, Mapping)]
    if not raw:
        raw = [written]
    names: dict[str, str] = {}
    for name in map(clean_name, raw):
        if name and name.casefold() not in names and len(names) < AUTHORS_MAX:
            names[name.casefold()] = name
    return tuple(names.values())


#: The end of an address feedparser cut: its last label as long as feedparser takes one (four letters).
_CUT_ENDING = re.compile(r"\.([A-Za-z]{4})$")
#: The rest of that label, left at the start of the "name" (``nce`` of ``jane@quantum.science``,
#: ``nology (Jane Doe`` of ``news@firm.technology (Jane Doe)``): letters, then the end or a bracket.
_REST_OF_LABEL = re.compile(r"[A-Za-z]+(?=$|\s*\()")


def _written_name(author: Mapping, written: object, atom: bool = False) -> object:
    """``author``'s name; the text it was split from when that can be told (:func:`clean_name` splits it again).

    That text is the entry's ``author`` when the email is in it. An entry with
    several authors keeps only its last one's text there, so an address
    feedparser cut (its last label four letters, the rest of the label
    starting the name in the same letter case) is put back together with the
    name: ``jane@quantum.scie`` and ``nce`` are ``jane@quantum.science``, no
    name at all. feedparser keeps no other copy of the text, so this guess is
    ours: a name written before an address of a four-letter ending (``Jane
    jane@x.info``) looks the same, and is told apart by its capital (the rare
    name in lower case, ``jane jane@x.info``, is lost).
    """
    email, name = author.get("email"), author.get("name")
    if isinstance(email, str) and email and isinstance(written, str) and email in written:
        return written
    cut = _CUT_ENDING.search(email) if isinstance(email, str) and not atom else None
    rest = _REST_OF_LABEL.match(name) if cut and isinstance(name, str) else None
    if rest and _same_case(cut.group(1), rest.group()):
        return email + name
    return name


def _same_case(label: str, rest: str) -> bool:
    return (label.islower() and rest.islower()) or (label.isupper() and rest.isupper())
