"""Tracking parameters out of links, by the ClearURLs rule set.

The rules are not ours: they are the community-kept `ClearURLs
<https://docs.clearurls.xyz/latest/specs/rules/>`_ rule set (LGPL-3.0),
vendored in ``pipeline/news/data/clearurls/`` with its licence and the commit
it came from (``SOURCE``; ``tools/refresh_clearurls.py`` brings a newer one).
No library's cleaner is used (unalix, which ships the same rules, tries all
~200 providers' patterns for every link, which would cost more than parsing
the feed: docs/performance.md, "Measurements behind the code"). Here a provider's ``urlPattern`` is
tried once per site (origin) and remembered, and each provider's many
patterns are joined into one regex, so a link costs a few microseconds.

What a provider does, as the specification says: a link it applies to (its
``urlPattern`` matches and none of its ``exceptions`` does) is replaced by
the target of a matching ``redirection``; its ``rawRules`` are deleted from
the link; query and fragment parameters whose *name* fully matches one of its
``rules`` or ``referralMarketing`` patterns (case-insensitively) are removed,
the others keep their order and spelling. ``completeProvider`` (blocking a
whole site) does not apply to a feed's links and is ignored.

:data:`ADDITIONS` holds the only rules that are ours, in the same format,
for tracking and redirectors in feed links that the rule set does not cover
(see its comment).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import unquote

#: The vendored ClearURLs rules.
RULES_FILE = Path(__file__).parent / "data" / "clearurls" / "data.min.json"

#: Ours, in ClearURLs' format, for what the rule set misses in feed links:
#: ``src=rss`` and ``partner=rss`` (a link's "came from the RSS feed" marker; removed
#: only with that value, since ``src`` and ``partner`` are real parameters elsewhere); the BBC's AT Internet
#: ``at_*`` parameters on bbc.co.uk (the rule set has them for bbc.com only); AddThis's address-bar
#: sharing fragment, ``#.`` and 11 characters of base64url (``#.VtCA1eS6FaQ``), sometimes followed by the
#: service (``.facebook``) and ``;`` text, as AddThis's own code for AMP recognises it (ampproject/amphtml,
#: ``extensions/amp-addthis/0.1/addthis-utils/fragment.js``): it names a share, not a place on the page;
#: and Google News's redirector ``news.google.com/news/url?...&url=<target>`` (the rule set follows
#: ``google.com/url?`` only, whose path is ``/url``).
ADDITIONS = {
    "qsite feed markers": {
        "urlPattern": r"^https?://",
        "rawRules": [r"(?<=[?&])(?:src|partner)=rss(?:&|(?=#)|$)", r"#\.[a-z0-9_-]{11}(?:\.[a-z0-9_]+)?(?:;[^#]*)?$"],
    },
    "bbc.co.uk": {"urlPattern": r"^https?:\/\/(?:[a-z0-9-]+\.)*?bbc\.co\.uk", "rules": ["at_[a-z_]+"]},
    "news.google.com": {
        "urlPattern": r"^https?:\/\/news\.google\.com",
        "redirections": [r"^https?:\/\/news\.google\.com\/news\/url\?(?:[^#]*?&)?url=(https?[^&#]+)"],
    },
}


def _any(patterns: list[str], anchored: bool = False) -> re.Pattern | None:
    """One case-insensitive regex matching any of ``patterns`` (``None`` for none)."""
    if not patterns:
        return None
    joined = "|".join(f"(?:{pattern})" for pattern in patterns)
    return re.compile(f"^(?:{joined})$" if anchored else joined, re.IGNORECASE)


def _exceptions(patterns: list[str]) -> Callable[[str], bool] | None:
    """A test for ``patterns``: the ``^``-anchored ones (most) tried at the start only, the rest anywhere.

    One unanchored search over many alternatives would try each at every position of the link.
    """
    anchored = _any([p for p in patterns if p.startswith("^")])
    anywhere = _any([p for p in patterns if not p.startswith("^")])
    if anchored is None and anywhere is None:
        return None
    return lambda url: bool((anchored and anchored.match(url)) or (anywhere and anywhere.search(url)))


@dataclass(frozen=True)
class Provider:
    """One ClearURLs provider, its patterns compiled."""

    name: str
    url_pattern: re.Pattern
    #: Whether ``urlPattern`` looks at more than the scheme and host (then it is tried per link).
    per_link: bool
    #: Whether the rule set makes an exception of a link (``None``: it never does).
    exceptions: Callable[[str], bool] | None
    redirections: tuple[re.Pattern, ...]
    raw_rules: re.Pattern | None
    #: ``rules`` and ``referralMarketing``: parameter names, matched in full.
    names: re.Pattern | None

    @classmethod
    def from_rules(cls, name: str, rules: dict) -> Provider:
        pattern = rules["urlPattern"]
        # The part after the scheme and host names a path when it has an (escaped) slash.
        host_part = re.sub(r"^\^?https\??:\\?/\\?/", "", pattern)
        return cls(
            name=name,
            url_pattern=re.compile(pattern, re.IGNORECASE),
            per_link="/" in host_part,
            exceptions=_exceptions(rules.get("exceptions", [])),
            redirections=tuple(re.compile(r, re.IGNORECASE) for r in rules.get("redirections", [])),
            raw_rules=_any(rules.get("rawRules", [])),
            names=_any(rules.get("rules", []) + rules.get("referralMarketing", []), anchored=True),
        )


@functools.cache
def providers() -> tuple[Provider, ...]:
    """The ClearURLs providers, then :data:`ADDITIONS`; read and compiled once per process."""
    data = json.loads(RULES_FILE.read_text(encoding="utf-8"))["providers"]
    return tuple(Provider.from_rules(name, rules) for name, rules in [*data.items(), *ADDITIONS.items()])


@functools.lru_cache(maxsize=4096)
def _site_providers(origin: str) -> tuple[Provider, ...]:
    """The providers whose host-only ``urlPattern`` matches ``origin`` (``scheme://host``)."""
    return tuple(p for p in providers() if not p.per_link and p.url_pattern.match(origin + "/"))


@functools.cache
def _per_link_providers() -> tuple[re.Pattern, tuple[Provider, ...]]:
    """The few providers whose ``urlPattern`` names a path too, and one regex matching any of them.

    They are tried on each link, so the joined regex rules most links out in one step.
    """
    per_link = tuple(p for p in providers() if p.per_link)
    return _any([p.url_pattern.pattern for p in per_link]) or re.compile("(?!)"), per_link


def remove_tracking(url: str, origin: str, follow: bool = True) -> tuple[str, str | None]:
    """``url`` without what the rules call tracking, and the target when a redirection rule matched.

    :param url: an absolute http(s) URL, already normalised (percent-encoding and case).
    :param origin: its ``scheme://host[:port]``.
    :param follow: whether redirection rules apply (not to a redirection's own target).
    :returns: ``(cleaned, None)``, or ``(url, target)`` where ``target`` (an http(s) URL) still
        needs normalising and cleaning.
    """
    candidates = _site_providers(origin)
    any_per_link, per_link = _per_link_providers()
    if any_per_link.match(url):
        candidates += tuple(p for p in per_link if p.url_pattern.match(url))
    for provider in candidates:
        changed = _apply(provider, url, follow)
        if changed is None or (provider.exceptions is not None and provider.exceptions(url)):
            continue  # nothing to do, or the rule set makes an exception of this link
        if isinstance(changed, tuple):
            return changed
        url = changed
    return url, None


def _apply(provider: Provider, url: str, follow: bool) -> str | tuple[str, str] | None:
    """What ``provider`` makes of ``url``: a cleaned link, ``(url, target)`` for a redirection, or ``None``."""
    for redirection in provider.redirections if follow else ():
        match = redirection.search(url)
        if match and match.group(1):
            target = unquote(match.group(1))
            if target.lower().startswith(("http://", "https://")):
                return url, target
    cleaned = url
    if provider.raw_rules is not None:
        cleaned = _tidy(provider.raw_rules.sub("", cleaned))
    if provider.names is not None and ("?" in cleaned or "#" in cleaned):
        cleaned = _remove_names(cleaned, provider.names)
    return cleaned if cleaned != url else None


def _remove_names(url: str, names: re.Pattern) -> str:
    rest, hash_, fragment = url.partition("#")
    head, question, query = rest.partition("?")
    if question:
        query = _kept(query, names)
    if hash_ and "=" in fragment:
        fragment = _kept(fragment, names)
    return head + ("?" + query if query else "") + ("#" + fragment if hash_ and fragment else "")


def _kept(params: str, names: re.Pattern) -> str:
    """``params`` (``a=1&b=2``) without those whose decoded name matches ``names``; order and spelling kept."""
    return "&".join(pair for pair in params.split("&") if pair and not names.match(unquote(pair.split("=", 1)[0])))


def _tidy(url: str) -> str:
    """No ``?`` or ``&`` left dangling by a raw rule, and no empty parameters."""
    if "?" not in url:
        return url
    rest, hash_, fragment = url.partition("#")
    head, question, query = rest.partition("?")
    query = "&".join(pair for pair in query.split("&") if pair)
    return head + ("?" + query if query else "") + (hash_ + fragment if fragment else "")
