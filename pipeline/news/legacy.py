"""The ids items had before migration 3, to recognise them when their feed is read again.

Until then an item's id was the hash of its entry's ``link`` in the old
canonical form (fragment dropped, a fixed list of tracking parameters
removed), and entries sharing that form were merged into one item. Items
stored that way have no entry key (``news.entry_key`` is null). When their
feed is next read, the first entry (in feed order) whose old-rule id is such
an item's id takes that item over: the item keeps its id and url and gains
the entry's key; later entries that the old rules merged into it become
items of their own. :func:`legacy_id` is the old rule, frozen: it must give
exactly the ids the old code gave, so it is never to be "improved".
"""

from __future__ import annotations

import hashlib
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

#: The tracking parameters of the old rule (frozen; the rule in use is :mod:`qsite.pipeline.news.tracking`).
_OLD_TRACKING = frozenset(
    {
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid", "igshid",
        "mc_cid", "mc_eid", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
        "vero_id", "vero_conv", "wickedid", "rb_clickid", "s_cid", "ncid", "sr_share", "at_medium",
        "at_campaign", "ref_src", "spm", "__s",
    }
)
_OLD_TRACKING_PREFIXES = ("utm_", "pk_", "hsa_", "piwik_", "matomo_", "itm_")


def old_canonical_url(link: str | None, base: str | None = None) -> str | None:
    """The canonical URL as the pipeline wrote it before migration 3 (and ``None`` where it skipped the entry)."""
    if not isinstance(link, str) or not link.strip():
        return None
    link = link.strip()
    if base and not link.startswith(("http://", "https://")):
        link = urljoin(base, link)
    try:
        parts = urlsplit(link)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    netloc = host.lower()
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        netloc += f":{port}"
    kept = [pair for pair in parts.query.split("&") if pair and not _old_tracking(pair)]
    return urlunsplit((scheme, netloc, parts.path or "/", "&".join(kept), ""))


def _old_tracking(pair: str) -> bool:
    name = unquote(pair.split("=", 1)[0]).lower()
    return name in _OLD_TRACKING or name.startswith(_OLD_TRACKING_PREFIXES)


def legacy_id(link: str | None, base: str | None) -> str | None:
    """The id the old rules gave an entry whose ``link`` is this (``None``: it had no item)."""
    url = old_canonical_url(link, base)
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:32] if url else None
