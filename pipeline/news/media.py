"""An item's image, from its own feed entry: Media RSS, image enclosures, ``itunes:image``.

The candidates, in order (the first that is a usable image wins):

1. ``media:content`` that is an image (``medium="image"``, else an ``image/*``
   type, else, with neither, a file name an image type is known for), the
   widest first: publishers list several sizes of one picture;
2. ``media:thumbnail`` (always an image), the widest first;
3. an enclosure that is an image (RSS ``<enclosure>`` or Atom ``<link
   rel="enclosure">``, by type, else by file name);
4. the entry's own ``itunes:image``.

Usable means an http(s) URL (a relative one resolved against the feed's base),
made canonical as item links are (:func:`qsite.pipeline.news.urls.canonical_url`), of
at most :data:`IMAGE_URL_MAX` characters, and not the feed's own logo
(``<image>``, ``itunes:image`` of the channel, Atom ``logo`` and ``icon``):
a podcast repeating its show art in every episode gives its items no image
of their own, so they get none (``null``) rather than the logo. Nor is an
avatar, a picture of a person rather than of the story: WordPress.com lists
its author's Gravatar as one more ``media:content medium="image"`` of every
post, and a post with no picture of its own would show the author's face (or
an identicon). Every image Gravatar serves (``gravatar.com`` and its
subdomains: ``secure.``, ``www.``, ``0.`` to ``2.``) is one
(:data:`AVATAR_HOSTS`).
"""

from __future__ import annotations

import mimetypes
from typing import Iterable, Iterator, Mapping
from urllib.parse import urlsplit

from qsite.db.model import IMAGE_URL_MAX

from qsite.pipeline.news.urls import canonical_url

#: Hosts (with their subdomains) that serve only people's pictures, never a story's: Gravatar's
#: avatars (``/avatar/<hash>``) and profile images. No maintained list of such services was found,
#: so this names only the one feeds were seen to carry.
AVATAR_HOSTS = ("gravatar.com",)

#: Python's own table of file name extensions only (no files of the system's are read),
#: so that an untyped image is recognised the same on every machine.
_TYPES = mimetypes.MimeTypes(filenames=())


def _named_image(url: str) -> bool:
    """Whether the file ``url`` names has an image type by its extension."""
    try:
        path = urlsplit(url).path
    except ValueError:
        return False
    kind, _ = _TYPES.guess_type(path, strict=False)
    return bool(kind and kind.startswith("image/"))


def is_avatar(url: str) -> bool:
    """Whether ``url`` (canonical) is on a host of :data:`AVATAR_HOSTS` or one of its subdomains."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return any(host == avatar or host.endswith("." + avatar) for avatar in AVATAR_HOSTS)


def _is_image(url: str, kind: object, medium: object = None) -> bool:
    if isinstance(medium, str) and medium.strip():
        return medium.strip().lower() == "image"
    if isinstance(kind, str) and kind.strip():
        return kind.strip().lower().startswith("image/")
    return _named_image(url)


def _width(media: Mapping) -> int:
    try:
        return int(str(media.get("width") or "0").strip())
    except ValueError:
        return 0


def _widest(media: Iterable[Mapping]) -> list[Mapping]:
    # sorted() is stable: equal (or missing) widths keep the feed's order.
    return sorted(media, key=_width, reverse=True)


def _mappings(value: object) -> list[Mapping]:
    return [one for one in value if isinstance(one, Mapping)] if isinstance(value, (list, tuple)) else []


def _candidates(entry: Mapping) -> Iterator[str]:
    contents = [m for m in _mappings(entry.get("media_content")) if isinstance(m.get("url"), str)]
    for media in _widest(m for m in contents if _is_image(m["url"], m.get("type"), m.get("medium"))):
        yield media["url"]
    for media in _widest(_mappings(entry.get("media_thumbnail"))):
        yield media.get("url")
    for enclosure in _mappings(entry.get("enclosures")):
        href = enclosure.get("href")
        if isinstance(href, str) and _is_image(href, enclosure.get("type")):
            yield href
    image = entry.get("image")
    if isinstance(image, Mapping):
        yield image.get("href")


def feed_logos(feed: Mapping, base: str | None) -> frozenset[str]:
    """The feed's own pictures, canonical: never an item's image."""
    image = feed.get("image")
    links = [image.get("href"), image.get("url")] if isinstance(image, Mapping) else []
    links += [feed.get("logo"), feed.get("icon")]
    return frozenset(url for link in links if isinstance(link, str) for url in [canonical_url(link, base)] if url)


def entry_image(entry: Mapping, base: str | None, logos: frozenset[str] = frozenset()) -> str | None:
    """The entry's image URL, canonical, or ``None`` (see the module's docstring for the order)."""
    for candidate in _candidates(entry):
        if isinstance(candidate, str) and candidate.strip():
            url = canonical_url(candidate, base)
            if url is not None and len(url) <= IMAGE_URL_MAX and url not in logos and not is_avatar(url):
                return url
    return None
