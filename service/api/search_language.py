"""The search language of ``q`` (glossary, news), and the FTS5 query it becomes.

Promises: :func:`parse_search` reads a search as web search engines do (words all
required, ``-word`` excluded, ``OR`` in upper case between two terms) into a :class:`Search`,
or refuses it with :class:`~qsite.service.api.kinds.Refused` when its operators leave nothing to
match; :class:`Words` is the parameter kind whose canonical value is :meth:`Search.text`,
which reads back as the same search; :func:`fts_query` writes a canonical search as an FTS5
query in which every word is quoted, so the only operators are the ones written there and
no text is ever an FTS5 syntax error.

Relies on the full-text index's tokenizer (unicode61, ``detail=column``): words are split
as :data:`WORD` splits them, and a phrase is never asked of the index. What must not
change: a search of plain words keeps its FTS5 query (``"a" "b"``), so its SQL, plan and
the counts sealed in cursors stay valid across versions.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from qsite.service.api.kinds import Kind, Refused

#: What a search matches on: words, as the FTS tokenizer sees them.
#: A word as the full-text index's tokenizer (unicode61) reads one: letters and digits. Not ``\w``:
#: an underscore separates words there, so ``literal_error`` would be a phrase, which a
#: ``detail=column`` index cannot search.
WORD = re.compile(r"[^\W_]+")
#: A term of a search as written: a ``-`` that excludes it (only at the start or after a space, so
#: ``Wi-Fi`` keeps its hyphen as a separator), then a run in double quotes or a run of anything but
#: spaces and quotes. A quote left without its pair matches nothing here, and is passed over.
_TERM = re.compile(r'(?:(?<!\S)(-))?(?:"([^"]*)"|([^\s"]+))')


class Search(NamedTuple):
    """A search as :class:`Words` reads it: every group must match, and no excluded term.

    A term is a tuple of words, all of which must occur (a word, or words written as one:
    ``Wi-Fi``, ``"quantum computing"``). A group is its terms joined by ``OR``, any one of which
    must match; a group of one term is one word (a term of several words alone is as many
    groups: all its words must occur either way).
    """

    groups: tuple[tuple[tuple[str, ...], ...], ...]
    excluded: tuple[tuple[str, ...], ...]

    def text(self) -> str:
        """The canonical text: the groups, then the excluded terms; a term of several words in an
        ``OR`` or excluded is written with hyphens (``-wi-fi``), which reads back as one term.

        No words at all is ``""``, two quotes: an empty text would read back as no search, and a
        feed's self link of ``q=!!!`` was the unfiltered feed.
        """
        if not self.groups:
            return '""'
        groups = [" OR ".join("-".join(term) for term in group) for group in self.groups]
        return " ".join(groups + ["-" + "-".join(term) for term in self.excluded])


#: The 400s of a search whose operators leave it nothing to match.
NOTHING_INCLUDED = "needs at least one word to include: a word after - is only excluded"
MISPLACED_OR = "OR (in upper case) needs a word to include on each side; write or to search for the word"


def _words(text: str) -> tuple[str, ...]:
    """The words of ``text``, each lowercased where that keeps it one word.

    The index's tokenizer folds letter case one letter to one letter, as lower() does, never as
    casefold() does (``ß`` to ``ss``: ``Straße`` could not be found), and lower() can make a
    combining mark (``İ`` is ``i`` and U+0307), which the tokenizer takes as a separator.
    """
    return tuple(lower if WORD.fullmatch(lower := word.lower()) else word for word in WORD.findall(text))


@functools.lru_cache(maxsize=1024)
def parse_search(text: str) -> Search:
    """The :class:`Search` ``text`` asks for; :class:`Refused` when its operators leave it nothing to match.

    Kept for the last 1,024 texts: a request reads its ``q`` here once as given and once more as the
    FTS5 query of its canonical text (:func:`fts_query`), most often the same text.

    Terms are split at spaces (and quoted runs), a term's words as the index splits them; a
    term with no words (punctuation only) is passed over. A term that starts with ``-`` is
    excluded; ``OR``, upper case and alone, joins the terms on each side into a group, which
    binds tighter than the implicit AND between groups (as web search engines read it:
    ``quantum funding OR investment -series`` is quantum AND (funding OR investment) NOT series).
    Every other word is a word, lowercased: ``or``, ``and``, ``not``, ``NEAR`` and ``AND`` too.
    """
    groups: list[list[tuple[str, ...]] | None] = []
    excluded: list[tuple[str, ...]] = []
    # joining: an OR was read since the last term, and the next term to include joins the last group
    joining = False
    for minus, quoted, bare in _TERM.findall(text):
        if bare == "OR" and not minus:
            if joining or not groups or groups[-1] is None:
                raise Refused(MISPLACED_OR)
            joining = True
            continue
        words = _words(quoted or bare)
        if not words:
            continue
        if minus:
            if joining:
                raise Refused(MISPLACED_OR)
            excluded.append(words)
            groups.append(None)  # an excluded term between two others: neither is an OR's neighbour
        elif joining:
            groups[-1].append(words)
            joining = False
        else:
            groups.append([words])
    if joining:
        raise Refused(MISPLACED_OR)
    included = [group for group in groups if group is not None]
    if excluded and not included:
        raise Refused(NOTHING_INCLUDED)
    flat: list[tuple[tuple[str, ...], ...]] = []
    for group in included:
        if len(group) > 1:
            flat.append(tuple(group))
        else:  # a term of several words alone is as many groups of one word: the same search, one text
            flat.extend(((word,),) for word in group[0])
    return Search(tuple(flat), tuple(excluded))


class Words(Kind):
    """A full-text search of at most ``max_length`` characters; canonical: :meth:`Search.text` (:func:`parse_search`).

    Blank is no filter (``None``); only punctuation is no words, so nothing matches (``'""'``).
    The canonical text is never longer than the text it was read from (``'""'`` aside), so
    links keep within ``max_length``.
    """

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.detail = f"must be at most {max_length} characters"
        self.schema = {"type": "string", "maxLength": max_length}

    def parse(self, text: str) -> str | None:
        if len(text) > self.max_length:
            raise ValueError(text)
        if not text.strip():
            return None
        return parse_search(text).text()


@functools.lru_cache(maxsize=1024)
def fts_query(q: str | None) -> str:
    """A search (glossary, news), canonical as :class:`Words` makes it, as an FTS5 query.

    Every word is quoted, so it is a word whatever it spells (``NEAR``, ``AND``, a column's
    name), and the only operators are those written here: a group's terms joined by ``OR``,
    the groups by ``AND``, and the excluded terms after one ``NOT`` (FTS5's ``NOT`` is binary:
    ``(included) NOT (excluded OR ...)``). A search of words alone is written as it always was
    (``"a" "b"``), so its SQL, plan and sealed counts are unchanged. A search with no words at
    all becomes an empty phrase that matches nothing, never a syntax error. ``None`` is no
    search (the canned query's empty ``:q``).
    """
    # Not sqlite-utils' Database.quote_fts: it quotes raw text's space-separated bits, and a
    # bit such as ``foo_bar`` is then a phrase against the index (tests/test_news_search.py);
    # Words has already split ``q`` into the index's own words, so quoting each is all that is left.
    if q is None:
        return ""
    search = parse_search(q)  # canonical already: it cannot be refused again
    if not search.groups:
        return '""'
    if not search.excluded and all(len(group) == 1 for group in search.groups):
        return " ".join(f'"{word}"' for ((word,),) in search.groups)

    def term(words: tuple[str, ...]) -> str:  # a phrase of several words is what detail=column refuses
        return f'"{words[0]}"' if len(words) == 1 else "(" + " AND ".join(f'"{word}"' for word in words) + ")"

    included = " AND ".join(term(terms[0]) if len(terms) == 1 else "(" + " OR ".join(map(term, terms)) + ")"
                            for terms in search.groups)
    if not search.excluded:
        return included
    return f"({included}) NOT ({' OR '.join(map(term, search.excluded))})"
