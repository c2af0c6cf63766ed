"""/api/v1/news.atom and /api/v1/news.json: the news as feeds a reader can follow, filters and all.

The same filters as /api/v1/news (tag, source, since, until, q, limit), run
through the same canned query, newest first; a feed has no cursor (readers
poll its newest items). Every entry credits its publisher: the publisher's
name as the entry's author and the original article as its link (Atom also
names it in ``atom:source``, JSON Feed in ``_qsite.source``).

Links to qsite itself are relative in Atom, whose reader resolves them against the
feed's own address, and absolute in JSON Feed, which has nothing to resolve them
against: made for the address each request was made to (:data:`JSON_FEED_LINKS`).

Atom is written by feedgen (lxml underneath), a kept library, rather than by
hand. JSON Feed 1.1 is a JSON document with a handful of keys: no library is
needed to write it (feedgen has none for it), only the spec's field names.
"""

from __future__ import annotations

import mimetypes
import re
from urllib.parse import quote, urlencode, urlsplit

from feedgen.feed import FeedGenerator

from qsite.service.api.bodies import Build
from qsite.service.api.news_bodies import news_filters, page_rows
from qsite.service.api.publishers import check_sources
from qsite.service.api.responses import BASE_URL_PLACEHOLDER, parse_stored_time
from qsite.service.http.problems import API_PREFIX

ATOM = "application/atom+xml"
JSON_FEED = "application/feed+json"
JSON_FEED_VERSION = "https://jsonfeed.org/version/1.1"
#: The absolute links to this instance a JSON Feed starts with: home_page_url and feed_url (:func:`json_feed`).
JSON_FEED_LINKS = 2
#: The tagging entity of every feed and entry id (RFC 4151 ``tag:`` URIs): ids must be
#: absolute and permanent, and qsite does not know the address it is served at.
TAG_AUTHORITY = "tag:qsite,2026:"


#: What XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/U+FFFF): a publisher's
#: name or a search given with one would make lxml refuse the whole document.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot carry."""
    return _NOT_XML.sub("", text)


def items(build: Build) -> list[dict]:
    """The newest ``limit`` items matching the filters, as /api/v1/news's first page lists them.

    None, with a ``source`` no publisher has: a 400 (:func:`~qsite.service.api.publishers.check_sources`), as on /news.
    """
    filters = news_filters(build.values)
    found = page_rows(build, filters, False, "", "", build.values["limit"])
    if not found:
        check_sources(build)
    return found


def query_text(build: Build, values: dict | None = None) -> str:
    """The canonical query string of the request (every parameter with a value, in table order).

    :param values: the canonical values to write instead of the request's.
    """
    values = build.values if values is None else values
    pairs = [pair for param in build.endpoint.params if values[param.name] is not None for pair in param.link_pairs(values[param.name])]
    return urlencode(pairs, quote_via=quote)


def feed_id(build: Build) -> str:
    """The Atom feed's id: its path and canonical query, the same whatever ``limit`` is (feeds have no cursor).

    An id names a feed for good (RFC 4287 4.2.6), and ``limit`` only says how many of its
    newest items to show: with it, the same feed at another limit read as another feed.
    Written with ``limit`` at its default rather than without it: ids were made from the
    whole query before, which every reader that gave no ``limit`` (or the default) holds
    with the default in it, so their ids do not change; only readers of another limit see
    a new id, once, the same as everyone else's.
    """
    limit = next(param for param in build.endpoint.params if param.name == "limit")
    return f"{TAG_AUTHORITY}{build.endpoint.url}?{query_text(build, {**build.values, 'limit': limit.default})}"


def title(build: Build) -> str:
    """``qsite news``, and what the filters keep: a reader shows this as the feed's name."""
    values, kept = build.values, []
    if values["tag"]:
        kept.append(values["tag"])
    if values["source"]:
        kept.append(", ".join(values["source"]))
    if values["q"]:
        kept.append(f"“{values['q']}”")
    return "qsite news" + (": " + " · ".join(kept) if kept else "")


def entry_id(item: dict) -> str:
    return f"{TAG_AUTHORITY}news/{item['id']}"


def publisher_feed(source: str, path: str) -> str:
    """qsite's own feed of one publisher's items: where an entry's ``atom:source`` points."""
    return f"{API_PREFIX}{path}?{urlencode([('source', source)], quote_via=quote)}"


def atom(build: Build):
    """The Atom 1.0 document (RFC 4287), as bytes."""
    query = query_text(build)
    feed = FeedGenerator()
    feed.load_extension("media")
    feed.id(feed_id(build))  # percent-encoded: plain ASCII
    feed.title(xml_text(title(build)))
    feed.updated(parse_stored_time(build.updated_at))
    feed.author({"name": "qsite"})
    feed.link(href=f"{build.endpoint.url}?{query}", rel="self", type=ATOM)
    feed.link(href=f"{API_PREFIX}/news?{query}", rel="alternate", type="application/json")
    feed.subtitle("News items qsite follows; each belongs to its publisher, linked as the entry's link.")
    feed.rights("News items belong to their original publishers. Use is for education and research only.")
    for item in items(build):
        entry = feed.add_entry(order="append")
        entry.id(entry_id(item))
        entry.title(xml_text(item["title"]))
        entry.link(href=xml_text(item["url"]), rel="alternate", type="text/html")
        entry.summary(xml_text(item["summary"]))
        entry.published(parse_stored_time(item["published_at"]))
        entry.updated(parse_stored_time(item["updated_at"]))  # when qsite last changed what it serves of it
        entry.author({"name": xml_text(item["source"])})
        entry.category(term=item["tag"], label=item["tag"])
        if item.get("image_url"):
            # Media RSS's media:content (which feedparser and qsite's own pipeline read as the item's image), not
            # an Atom enclosure link: feedgen 1.0 writes an entry's links without their rel and type, so an
            # enclosure would read as a second alternate link.
            entry.media.content(url=xml_text(item["image_url"]), medium="image", group=None, **image_type(item["image_url"]))
        entry.source(url=publisher_feed(item["source"], build.endpoint.path), title=xml_text(item["source"]))
    return feed.atom_str(pretty=False, encoding="UTF-8", xml_declaration=True), ()


def image_type(url: str) -> dict:
    """``{"type": ...}`` when the address's file name says what image it is, else nothing (Atom's type is optional)."""
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    return {"type": guessed} if guessed and guessed.startswith("image/") else {}


def json_feed(build: Build):
    """The JSON Feed 1.1 document (https://www.jsonfeed.org/version/1.1/)."""
    results = [
        {
            "id": entry_id(item),
            "url": item["url"],
            "title": item["title"],
            "summary": item["summary"],
            "content_text": item["summary"],
            "date_published": item["published_at"],
            "date_modified": item["updated_at"],
            "authors": [{"name": item["source"], "url": item["url"]}],
            "tags": [item["tag"]],
            **({"image": item["image_url"]} if item.get("image_url") else {}),
            "_qsite": {"id": item["id"], "source": item["source"], "tag": item["tag"]},
        }
        for item in items(build)
    ]
    document = {
        "version": JSON_FEED_VERSION,
        # Absolute, as JSON Feed has no base to resolve a relative one against: written with the
        # placeholder, each answer has the address it was asked at put there (Endpoint.absolute_links):
        # in these two only, first in the body after the constant version, before any publisher's text.
        # The documentation page, not the site root: it says what the feed is, its filters and the
        # terms of use, reads no data (public under any permissions) and has no script; the root is
        # Datasette's view of the tables, for researchers.
        "home_page_url": f"{BASE_URL_PLACEHOLDER}{API_PREFIX}/docs",
        # the feed as asked, canonical, as the Atom feed's self link
        "feed_url": f"{BASE_URL_PLACEHOLDER}{build.endpoint.url}?{query_text(build)}",
        "title": title(build),
        "description": "News items qsite follows; each belongs to its publisher, credited as the item's author "
        "with the original article as its url.",
        "user_comment": "News items belong to their original publishers. Use is for education and research only.",
        "authors": [{"name": "qsite"}],
        "items": results,
        "_qsite": {"updated_at": build.updated_at, "api": f"{API_PREFIX}/news?{query_text(build)}"},
    }
    return document, ()
