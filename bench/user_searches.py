"""News searches as users send them: the shapes of ``q`` and the filters they come with, each with its share.

The bench's searches (the uncached mixes, :mod:`bench.uncached`) and the SQL
timing by kind (:func:`bench.sql_timing.time_search_kinds`) draw from here.
A search is a *shape* of ``q`` and a *filter*, drawn independently:

- shapes (:data:`SHAPES`): one word, two words, two words joined by ``OR``,
  a word and an excluded word (``-``). Most searches people type are one or two
  words, operators are rare (docs/performance.md, "The searches users send");
- filters (:data:`FILTERS`): none, a ``tag``, a ``source``, a ``since``; a
  search of a news API often comes with one, since a client keeps to its topic,
  its publishers or what is new.

Words are drawn as people find them: half from a random item's text, so common
words come often, half from the vocabulary at random, so rare names do too (two
words at random seldom meet, the costly case of an AND). A ``since`` is within
the last 30 days half of the time (what is new), else anywhere in the span. A
fifth of the searches are a later page (a cursor, as a ``next`` link gives).
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

from qsite.db.model import TAGS

#: The shapes of ``q`` and their shares: a quarter two words, a tenth each an ``OR`` and an excluded word.
SHAPES = {"one word": 0.55, "two words": 0.25, "an OR": 0.10, "an excluded word": 0.10}
#: The filters a search comes with and their shares (at most one of them; pages mix them freely).
FILTERS = {"no filter": 0.40, "tag": 0.20, "source": 0.20, "since": 0.20}
#: Share of searches that ask for a later page (a cursor from a next link).
LATER_PAGE_SHARE = 0.2
#: A recent ``since``: within this many seconds of the newest item, half of the time.
RECENT_S = 30 * 86400


def kinds() -> list[str]:
    """Every kind of search, ``"<shape>, <filter>"``, shape by shape."""
    return [f"{shape}, {filtered}" for shape in SHAPES for filtered in FILTERS]


def share(kind: str) -> float:
    """The share of ``kind`` (:func:`kinds`) among the searches users send."""
    shape, _, filtered = kind.partition(", ")
    return SHAPES[shape] * FILTERS[filtered]


def _pick(rng: random.Random, shares: dict[str, float]) -> str:
    return rng.choices(list(shares), weights=list(shares.values()))[0]


def draw_kind(rng: random.Random) -> str:
    """A kind of search, drawn with the users' shares."""
    return f"{_pick(rng, SHAPES)}, {_pick(rng, FILTERS)}"


def word(sample, rng: random.Random) -> str:
    """A word as people search: half from a random item (common words often), half from the vocabulary."""
    return rng.choice(sample.item_words(rng) if rng.random() < 0.5 else sample.news_words)


def query(sample, rng: random.Random, shape: str) -> str:
    """A ``q`` of ``shape``."""
    if shape == "one word":
        return word(sample, rng)
    if shape == "two words":
        if rng.random() < 0.5:  # two words of one item: they meet
            words = sorted(set(sample.item_words(rng)))
            return " ".join(rng.sample(words, 2)) if len(words) > 1 else words[0]
        return f"{word(sample, rng)} {word(sample, rng)}"
    if shape == "an OR":
        return f"{word(sample, rng)} OR {word(sample, rng)}"
    if shape == "an excluded word":  # a word to find and one to leave out, as a user narrows a search
        return f"{word(sample, rng)} -{rng.choice(sample.news_words)}"
    raise ValueError(f"no shape of q {shape!r}; the shapes are {', '.join(SHAPES)}")


def since(sample, rng: random.Random) -> str:
    """A ``since``: within the last 30 days half of the time, else anywhere in the items' span."""
    low, high = sample.span
    start = max(low, high - RECENT_S) if rng.random() < 0.5 else low
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rng.randrange(start, high)))


def search(sample, rng: random.Random, kind: str | None = None):
    """A :class:`bench.uncached.NewsRequest` of ``kind`` (:func:`kinds`), drawn with the users' shares when ``None``."""
    from bench.uncached import NewsRequest
    from qsite.service.api.cursors import Position

    shape, _, filtered = (kind or draw_kind(rng)).partition(", ")
    if filtered not in FILTERS:
        raise ValueError(f"no filter {filtered!r}; the filters are {', '.join(FILTERS)}")
    request = NewsRequest(q=query(sample, rng, shape))
    if filtered == "tag":
        request = replace(request, tag=rng.choice(TAGS))
    elif filtered == "source":
        request = replace(request, sources=(rng.choice(sample.sources),))
    elif filtered == "since":
        request = replace(request, since=since(sample, rng))
    if rng.random() < LATER_PAGE_SHARE:
        at, item_id = rng.choice(sample.items)[:2]
        if request.since is None or at > request.since:
            request = replace(request, cursor=Position(at, item_id))
    return request
