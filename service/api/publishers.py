"""The publishers a ``source`` names: how the canned queries take them, and the 400 of a name no publisher has.

Promises: :func:`check_sources` raises :class:`~qsite.service.api.bodies.Invalid` on ``source``, one
error per name asked that no publisher has, with what was probably meant
(:meth:`Publishers.meant`) and where the exact names are listed; names themselves stay
exact (letter case is part of one), a near miss is only suggested. :func:`sources_param`
writes the names asked as the canned queries read them (a JSON array, so a name with a
comma stays one name).

Relies on rows of ``sources`` never being deleted: a name no publisher has matches nothing,
now or later, so an empty 200 would hide the client's mistake. What must not change: the
400 stays within the error body's size bound (:data:`SUGGESTIONS_MAX`,
:data:`SUGGESTED_NAMES_MAX`, names echoed through :func:`~qsite.service.api.parameters.echo`).
"""

from __future__ import annotations

import json

from qsite.service.api.bodies import Build, Invalid
from qsite.service.api.parameters import echo
from qsite.service.api.search_language import WORD
from qsite.service.http.problems import API_PREFIX


def sources_param(values: dict) -> str:
    """The names ``source`` asks for as the canned queries take them: a JSON array, ``''`` for none."""
    return json.dumps(list(values["source"]), ensure_ascii=False) if values["source"] else ""


#: What a 400 on an unknown ``source`` points to: where every publisher's exact name is.
SOURCES_LIST = f"{API_PREFIX}/sources"
#: At most this many names are suggested for one unknown name; more is no longer a suggestion.
SUGGESTIONS_MAX = 3
#: Only the first this many unknown names get suggestions: 20 names each with three suggestions
#: of 64 characters made a 400 of 6 KB, past the 4 KB every error body keeps within.
SUGGESTED_NAMES_MAX = 3


def _name_words(name: str) -> tuple[str, ...]:
    """A publisher's name as words, letter case aside: ``lab-notes`` and ``Lab Notes`` are both ``lab notes``."""
    return tuple(WORD.findall(name.casefold()))  # words as a search reads them: letters and digits


def _spaced(words: tuple[str, ...]) -> str:
    """``words`` written so that one run of words stands in another's text only as whole words: `` lab notes ``."""
    return " " + " ".join(words) + " "


class Publishers:
    """Every publisher's name, as a ``source`` no publisher has is compared with them: read once per 400.

    :param names: the publishers' names, exact.
    """

    def __init__(self, names: list[str]):
        self.known = set(names)
        #: Each name, in the forms :meth:`meant` compares: letter case folded, its words in order, its words sorted.
        self.compared = [
            (name, name.casefold(), _spaced(words), sorted(words)) for name in names for words in [_name_words(name)]
        ]
        #: The most pieces between commas one name has: a longer run of pieces is no name.
        self.pieces = 1 + max((name.count(",") for name in names), default=0)

    def meant(self, name: str) -> list[str]:
        """The publishers ``name`` probably meant, at most :data:`SUGGESTIONS_MAX` of them.

        Closest first, the first rule that finds any deciding: the same name in another letter case;
        the same words with other separators or in another order (``quantum-lab-notes``, a slug as
        other APIs' source ids are; ``Notes Quantum Lab``); the name's words side by side within a
        publisher's, or a publisher's within the name's (``lab-notes``; ``Quantum Lab Notes RSS``).
        No edit distance: a 200-character name against every publisher would cost the event loop
        milliseconds, and these rules find the misses the 400 is for (letter case, slugs, part of a name).
        """
        words = _name_words(name)
        folded, spaced, ordered = name.casefold(), _spaced(words), sorted(words)
        for rule in (
            lambda their_folded, _, __: their_folded == folded,
            lambda _, __, their_ordered: bool(words) and their_ordered == ordered,
            # a run of whole words within the other's (substring search of the spaced forms: C speed)
            lambda _, their_spaced, __: bool(words) and their_spaced.strip() != "" and (spaced in their_spaced or their_spaced in spaced),
        ):
            found = [publisher for publisher, *forms in self.compared if rule(*forms)]
            if found:
                return found if len(found) <= SUGGESTIONS_MAX else []
        return []

    def listed(self, name: str) -> bool:
        """Whether ``name`` is several publishers' names joined by commas (spaces around them aside).

        A name may hold commas itself (``Smith, Jones & Co``), so runs of the pieces between
        commas are tried as names, each no longer than :attr:`pieces`: linear in the pieces.
        """
        pieces = name.split(",")
        # whole[i]: the first i pieces are whole names
        whole = [True] + [False] * len(pieces)
        for end in range(1, len(pieces) + 1):
            whole[end] = any(
                whole[start] and ",".join(pieces[start:end]).strip() in self.known
                for start in range(max(0, end - self.pieces), end)
            )
        return len(pieces) > 1 and whole[-1]

    def unknown(self, name: str, suggest: bool = True) -> str:
        """The 400's detail for ``name``, no publisher's: what was probably meant (when ``suggest``), and where the names are."""
        said = f"no publisher is named {echo(name)!r}"
        if self.listed(name):
            # a comma-separated list, as NewsAPI's sources= takes: names are never split (they may hold commas)
            return f"{said}, though each name between its commas is one; write source= once per publisher"
        guesses = self.meant(name) if suggest else []
        if guesses:
            said += " (did you mean " + " or ".join(repr(echo(guess)) for guess in guesses) + "?)"
        return f"{said}; {SOURCES_LIST} lists them"


def check_sources(build: Build) -> None:
    """:class:`Invalid` on ``source`` when a name asked is no publisher's: one error per such name.

    Called only when an answer with sources came out empty (a count of 0, a feed of no
    items), so an answer with items pays nothing for it, and an empty one one small query
    (``api_source_names``). A name no publisher has matches nothing, now or later (rows of
    ``sources`` are never deleted), so an empty 200 would hide the client's mistake.
    Names stay exact (letter case is part of one): a near miss is only suggested.
    """
    asked = build.values["source"]
    if not asked:
        return
    names = [row["name"] for row in build.rows("source_names", {"sources": sources_param(build.values)})]
    # Compared here, not by the query's asked: SQLite's text ends at a NUL, which Python's does not,
    # and a name it cannot tell apart is no name to call unknown (nor to suggest as itself).
    known = set(names)
    unknown = [name for name in asked if name not in known]
    if unknown:
        publishers = Publishers(names)
        raise Invalid("source", *(publishers.unknown(name, n < SUGGESTED_NAMES_MAX) for n, name in enumerate(unknown)))
