"""Cursors: the opaque position of the last item of a page, as ``next`` links carry it.

A cursor is base64url of a small JSON array (a stored time or a sync walk's
change key, an item id, and for an oldest-first listing a direction), checked
on the way back in down to the shape of each part, so only cursors this
service wrote are taken (:class:`service.api.parameters.Cursor`).
"""

from __future__ import annotations

import base64
import binascii
import re

import orjson

from db.model import ITEM_ID_DIGITS, STORED_TIME, is_stored_time
from db.news_sync import COUNTER_DIGITS

#: A sync walk's cursor holds a change key instead: a stored time, ``#`` and a counter (:mod:`db.news_sync`).
_CHANGE_KEY = re.compile(rf"({STORED_TIME.pattern})#\d{{{COUNTER_DIGITS}}}")
#: An item id as the pipeline makes them (:func:`pipeline.store.records.item_id`).
ITEM_ID = re.compile(rf"^[0-9a-f]{{{ITEM_ID_DIGITS}}}$")
#: The length of every cursor :func:`encode_cursor` writes (a stored time, an item id, the direction).
_CURSOR_MAX = 96


#: The third member of an oldest-first cursor (``sort=published_at``); a newest-first one has two.
OLDEST_FIRST = "asc"


def encode_cursor(published_at: str, item_id: str, oldest_first: bool = False) -> str:
    """The opaque ``cursor`` for the page after the item ``(published_at, item_id)``.

    It says which way the listing runs: a newest-first cursor is the pair (as it
    always was, so cursors handed out before ``sort`` existed still work), an
    oldest-first one carries :data:`OLDEST_FIRST` too. A cursor is a position in
    one order only; :func:`service.api.bodies.news` refuses it with the other ``sort``.
    """
    parts = [published_at, item_id, OLDEST_FIRST] if oldest_first else [published_at, item_id]
    # orjson: compact and UTF-8, the bytes json.dumps(separators=(",", ":"), ensure_ascii=False) wrote
    # (cursors handed out before keep working), in a fifth of the time
    raw = orjson.dumps(parts)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(value: str) -> tuple | None:
    """What :func:`encode_cursor` wrote into a cursor, exactly, else None.

    ``(published_at, item_id)`` for a newest-first cursor, ``(published_at,
    item_id, True)`` for an oldest-first one. Down to the shape of each part: a
    stored time that is a real moment (or a sync walk's change key of one,
    :mod:`db.news_sync`), an item id as the pipeline makes them
    (:data:`~db.model.ITEM_ID_DIGITS` hex digits), and the one encoding of
    those. Anything else cannot come from a ``next`` link; refusing it keeps
    made-up cursors from building and caching pages that no client will ask for again.
    """
    if len(value) > _CURSOR_MAX:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        published_at, item_id, *direction = orjson.loads(raw)
    except (binascii.Error, ValueError, TypeError):  # orjson.JSONDecodeError is a ValueError, bad UTF-8 too
        return None
    if not (isinstance(published_at, str) and isinstance(item_id, str)) or direction not in ([], [OLDEST_FIRST]):
        return None
    change = _CHANGE_KEY.fullmatch(published_at)
    moment = change.group(1) if change else published_at
    if not (is_stored_time(moment) and ITEM_ID.fullmatch(item_id)):
        return None
    if encode_cursor(published_at, item_id, bool(direction)) != value:
        return None
    return (published_at, item_id, True) if direction else (published_at, item_id)
