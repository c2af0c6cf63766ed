"""Cursors: the opaque position of the last item of a page, as ``next`` links carry it.

A cursor is base64url of a small JSON array (a stored time or a sync walk's
change key, an item id, for an oldest-first listing a direction, and the
listing's count with its seal), checked on the way back in down to the shape
of each part, so only cursors this service wrote are taken
(:class:`qsite.service.api.kinds.Cursor`).

Why the count rides along: a listing's count does not depend on the page, yet
every later page counted again what the first one had counted, most of a later
search's SQL (docs/performance.md, "Measurements behind the code"). A ``next`` link therefore carries the count with a seal: a
keyed hash (BLAKE2b) of the count query's name and parameters, the data
versions it was read at and the count itself (:func:`count_seal`). A later page
takes the count from its cursor when the seal is right for its own filters and
the data now served, and counts again otherwise (the data changed, the filters
were swapped, another key wrote the cursor, or the cursor predates counts).
The key comes from the deployer's Datasette secret
(:func:`qsite.service.datasette.state.cursor_key`), so nobody else can make the API
say a count it did not count.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import NamedTuple

import orjson

from qsite.db.model import ITEM_ID_DIGITS, STORED_TIME, is_stored_time
from qsite.db.news_sync import COUNTER_DIGITS

#: A sync walk's cursor holds a change key instead: a stored time, ``#`` and a counter (:mod:`qsite.db.news_sync`).
_CHANGE_KEY = re.compile(rf"({STORED_TIME.pattern})#\d{{{COUNTER_DIGITS}}}", re.ASCII)
#: An item id as the pipeline makes them (:func:`qsite.pipeline.store.records.item_id`).
ITEM_ID = re.compile(rf"^[0-9a-f]{{{ITEM_ID_DIGITS}}}$")
#: Bytes of a seal: 72 bits, twelve characters of base64url.
SEAL_BYTES = 9
_SEAL = re.compile(rf"[A-Za-z0-9_-]{{{SEAL_BYTES * 4 // 3}}}")
#: The largest count a cursor carries (a listing of every item counts them all; this only bounds the digits).
COUNT_MAX = 2**31 - 1
#: The length of every cursor :func:`encode_cursor` writes (a change key, an item id, the direction, a count and its seal).
_CURSOR_MAX = 160

#: The third member of an oldest-first cursor (``sort=published_at``); a newest-first one has none.
OLDEST_FIRST = "asc"


class Position(NamedTuple):
    """What a cursor holds: the last item of a page, the order, and the listing's count with its seal."""

    at: str
    item_id: str
    oldest_first: bool = False
    #: The listing's count as the page that wrote the cursor read it (None: not carried).
    count: int | None = None
    #: :func:`count_seal` of ``count`` ("" when no count is carried).
    seal: str = ""

    @property
    def in_change_order(self) -> bool:
        """Whether a walk in change order wrote it (the sync walk, /news/removed): its ``at`` is a change key."""
        return _CHANGE_KEY.fullmatch(self.at) is not None


def keyset(cursor: Position | None) -> tuple[str, str]:
    """Where a page resumes: the cursor's ``(at, item_id)``, or ``("", "")`` (the canned queries' start) without one."""
    return (cursor.at, cursor.item_id) if cursor is not None else ("", "")


def encode_cursor(at: str, item_id: str, oldest_first: bool = False, count: int | None = None, seal: str = "") -> str:
    """The opaque ``cursor`` for the page after the item ``(at, item_id)``.

    It says which way the listing runs: a newest-first cursor starts with the
    pair (as it always did, so cursors handed out before ``sort`` existed still
    work), an oldest-first one carries :data:`OLDEST_FIRST` too. A cursor is a
    position in one order only; :func:`qsite.service.api.news_bodies.news` refuses it with
    the other ``sort``. ``count`` and its ``seal`` come last, when given.
    """
    parts: list = [at, item_id, OLDEST_FIRST] if oldest_first else [at, item_id]
    if count is not None:
        parts += [count, seal]
    # orjson: compact and UTF-8, the bytes json.dumps(separators=(",", ":"), ensure_ascii=False) wrote
    # (cursors handed out before keep working), in a fifth of the time
    raw = orjson.dumps(parts)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(value: str) -> Position | None:
    """What :func:`encode_cursor` wrote into a cursor, exactly, else None.

    Down to the shape of each part: a stored time that is a real moment (or a
    sync walk's change key of one, :mod:`qsite.db.news_sync`), an item id as the
    pipeline makes them (:data:`~qsite.db.model.ITEM_ID_DIGITS` hex digits), a count
    of at most :data:`COUNT_MAX` with a seal of its shape, and the one encoding
    of those. Anything else cannot come from a ``next`` link; refusing it keeps
    made-up cursors from building and caching pages that no client will ask for
    again. Whether the seal is right is for the page to say (:func:`count_seal`).
    """
    if len(value) > _CURSOR_MAX:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        at, item_id, *rest = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError):  # orjson.JSONDecodeError is a ValueError, bad UTF-8 too
        return None
    oldest_first = rest[:1] == [OLDEST_FIRST]
    rest = rest[1:] if oldest_first else rest
    count, seal = rest if len(rest) == 2 else (None, "")
    if not (isinstance(at, str) and isinstance(item_id, str)) or len(rest) not in (0, 2):
        return None
    if count is not None and not (type(count) is int and 0 <= count <= COUNT_MAX and isinstance(seal, str) and _SEAL.fullmatch(seal)):
        return None
    change = _CHANGE_KEY.fullmatch(at)
    moment = change.group(1) if change else at
    if not (is_stored_time(moment) and ITEM_ID.fullmatch(item_id)):
        return None
    found = Position(at, item_id, oldest_first, count, seal)
    if encode_cursor(*found) != value:
        return None
    return found


def count_seal(key: bytes, query: str, params: dict, versions: list, count: int) -> str:
    """The seal of ``count``: what ``query`` with ``params`` counted at the data ``versions``, under ``key``.

    A keyed BLAKE2b (a MAC by design, and cheap at this size), so that a seal cannot be
    made without the key; over everything the count depends on, so that it is
    right only where counting again would give the same number.
    """
    message = orjson.dumps([query, sorted(params.items()), versions, count])
    digest = hashlib.blake2b(message, key=key, digest_size=SEAL_BYTES).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")
