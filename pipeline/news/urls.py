"""The one spelling of a link that identifies a story: RFC 3986 normal form, without tracking.

Two links name the same story when they are equivalent by RFC 3986 sections
6.2.2 (syntax-based: scheme and host in lower case, percent-encoding in upper
case, unreserved characters decoded, dot segments removed) and 6.2.3
(scheme-based: the default port dropped, an empty path made ``/``), once
the tracking parameters of :mod:`qsite.pipeline.news.tracking` are gone. Everything else
is kept as the publisher wrote it: the other parameters and their order, the
fragment (a post on a page of many posts is that page plus its fragment,
``#p1``, ``#p2``), and empty path segments. A fragment that only navigates
within the page or tracks (:func:`kept_fragment`) names no post: it goes. Characters a URI cannot hold as they are (spaces,
non-ASCII letters) are percent-encoded as UTF-8, so one link has one spelling
whether the feed wrote it as an IRI or already encoded.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urljoin, urlsplit

from qsite.pipeline.news.tracking import remove_tracking

WEB_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}

#: RFC 3986 2.3: the characters never worth escaping.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: What a path, query or fragment may hold unescaped (RFC 3986 3.3 to 3.5), plus ``%`` for escapes.
_URI_SAFE = "-._~!$&'()*+,;=:@/?%"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]")


def _normal_escape(match: re.Match) -> str:
    char = chr(int(match.group(1), 16))
    return char if char in _UNRESERVED else "%" + match.group(1).upper()


def normal_component(text: str) -> str:
    """RFC 3986 6.2.2.1 and 6.2.2.2 for one component: escapes in upper case, unreserved ones decoded."""
    if _NEEDS_QUOTING.search(text):
        text = quote(text, safe=_URI_SAFE)
    if "%" not in text:
        return text
    # A "%" that starts no escape is a percent sign, which a URI writes as %25.
    return _ESCAPE.sub(_normal_escape, _STRAY_PERCENT.sub("%25", text))


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4: ``/a/./b/../c`` is ``/a/c``; empty segments (``//``) stay."""
    if "." not in path:
        return path
    output: list[str] = []
    segments = path.split("/")
    for segment in segments[1:] if path.startswith("/") else segments:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")  # "/a/b/.." is the folder "/a/", not the file "/a"
    return ("/" if path.startswith("/") else "") + "/".join(output)


#: Fragments that never tell posts apart: WordPress's comment form and comment list (``#respond``,
#: ``#comments``), its "read more" anchor (``#more-1234``), the top of the page, and AT Internet's
#: ``xtor=`` campaign marker (``#xtor=RSS-3208``), which many European publishers' feeds add.
_NAVIGATION = re.compile(r"respond|comments|top|more-[0-9]+|xtor=.*", re.IGNORECASE | re.DOTALL)


def kept_fragment(fragment: str) -> str:
    """``fragment`` without what only navigates or tracks; ``""`` when nothing is left.

    A fragment directive (``:~:``, text fragments: ``#:~:text=...``, ``#intro:~:text=...``) is the
    reader's highlight, not the page's: it and what follows go. ``utm_`` parameters after ``#``
    go with the tracking rules (:mod:`qsite.pipeline.news.tracking`).
    """
    fragment = fragment.partition(":~:")[0]
    return "" if _NAVIGATION.fullmatch(fragment) else fragment


def is_web_link(link: str | None) -> bool:
    """Whether ``link`` is an absolute http(s) URL as written (before any resolving)."""
    return bool(link) and link.strip().lower().startswith(("http://", "https://"))


def canonical_url(link: str | None, base: str | None = None, *, redirected: bool = False) -> str | None:
    """The one spelling of ``link`` that identifies a story, or ``None`` if it is not a web link.

    A relative ``link`` is resolved against ``base`` first. User names and
    passwords are dropped (a feed has no business sending them). A link the
    rules say only redirects (``google.com/url?q=...``) is replaced by its
    target, once: ``redirected`` is set for the target, whose own
    redirections are not followed.
    """
    if not link or not link.strip():
        return None
    link = link.strip()
    if base and not is_web_link(link):
        link = urljoin(base, link)
    try:
        parts = urlsplit(link)
        host = parts.hostname
        port = parts.port
        scheme = parts.scheme.lower()
        if scheme not in WEB_SCHEMES or not host:
            return None
        host = normal_component(host.lower())
    except (ValueError, UnicodeError):
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    origin = f"{scheme}://{netloc}"
    url = origin + (remove_dot_segments(normal_component(parts.path)) or "/")
    if parts.query:
        url += "?" + normal_component(parts.query)
    fragment = kept_fragment(parts.fragment)
    if fragment:
        url += "#" + normal_component(fragment)
    cleaned, target = remove_tracking(url, origin, follow=not redirected)
    return canonical_url(target, redirected=True) if target else cleaned
