"""Each item's image and authors, from real publishers' feeds: as their media goldens say, and as the API serves them.

The goldens (``golden-media/<feed>.json``, :mod:`tests.support.media_goldens`)
cover every real feed of tests/data/realfeeds (BBC's ``media:thumbnail``,
the Guardian's several untyped ``media:content`` sizes, NASA's image
enclosures, YouTube's video ``media:content`` beside its thumbnail, podcasts'
per-episode ``itunes:image`` that repeats the show art, WordPress.com's author
Gravatar beside each post's picture, RSS ``<author>``
written ``email (Name)`` or as a bare address, ``dc:creator``, Atom authors)
and the synthetic ``media-edge.atom`` for what none of them carries (an Atom
``rel="enclosure"`` image, relative and tracked; a ``data:`` and an ``ftp:``
image; a URL as an author).
"""

from __future__ import annotations

import json

import pytest

from qsite.config import load_config
from qsite.pipeline.news.feeds import FeedJob, read_feed
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.news.media import is_avatar
from qsite.pipeline.news.people import clean_name
from qsite.pipeline.store import open_database
from tests.support.goldens import REAL, SYNTHETIC, feed_files, feed_params
from tests.support.feeds import RSS_TYPE
from tests.support.local_server import Reply
from tests.support.media_goldens import load_media_golden, read_media_of

FEEDS = feed_files()


@pytest.mark.parametrize("feed", feed_params(FEEDS))
def test_feed_media_reads_as_its_golden(feed):
    assert read_media_of(feed) == load_media_golden(feed)


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("jane@x.org (Jane Doe)", "Jane Doe"),
        ("Jane Doe <jane@x.org>", "Jane Doe"),
        ("Jane Doe (mailto:jane@x.org)", "Jane Doe"),
        ("jane@x.org", None),
        ("  <jane@x.org>  ", None),
        ("https://media.example/", None),
        ("Doe, Jane", "Doe, Jane"),
        ("A (a@x.org), B", "A, B"),
        ("Η ΝΑΥΤΕΜΠΟΡΙΚΗ", "Η ΝΑΥΤΕΜΠΟΡΙΚΗ"),
        ("Jane (Editor)", "Jane (Editor)"),  # a name's own brackets stay
        ("Jane (Editor) (jane@x.org)", "Jane (Editor)"),
        ("Nick Ames (now), Ben Fisher (earlier)", "Nick Ames (now), Ben Fisher (earlier)"),
        ("(Jane Doe)", "Jane Doe"),
        ("[Jane Doe", "Jane Doe"),
        ("/u/jane_doe", "/u/jane_doe"),  # Reddit's: a name's own separators at its edge stay
        ("-b-", "-b"),  # a separator at a name's end always goes (ugyanmar-blogspot.atom's Blogger author)
        ("jane@x.org / Jane Doe", "Jane Doe"),  # where an address was cut, the separator it leaves goes
        ("/u/jane_doe (jane@x.org)", "/u/jane_doe"),
    ],
)
def test_author_names_never_keep_an_email_address(written, name):
    assert clean_name(written) == name


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("Jane Doe,", "Jane Doe"),
        ("Jane Doe |", "Jane Doe"),
        ("Jane Doe -", "Jane Doe"),
        ("- Jane", "Jane"),
        (", Jane Doe", "Jane Doe"),
        ("/u/jane_doe,", "/u/jane_doe"),
        ("/u/jane_doe", "/u/jane_doe"),
        (":jane", ":jane"),
    ],
)
def test_a_name_starts_with_a_separator_of_its_own_only_and_never_ends_with_one(written, name):
    """A separator a letter or digit follows directly is the name's own (Reddit's ``/u/jane``); any other is punctuation."""
    assert clean_name(written) == name


def test_a_separator_after_a_name_makes_no_second_author():
    """Authors are one when equal ignoring case: ``dc:creator`` "Jane Doe," beside "Jane Doe" is that one author."""
    items = "".join(
        f"<item><title>Item {n}</title><link>http://pub.example/{n}</link>{authors}</item>"
        for n, authors in enumerate([
            "<author>jane@x.org (Jane Doe)</author><dc:creator>Jane Doe,</dc:creator>",
            "<dc:creator>- Jane Doe</dc:creator><dc:creator>jane doe |</dc:creator>",
        ])
    )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<channel><title>T</title><link>http://pub.example/</link>{items}</channel></rss>"
    )
    job = FeedJob(source="T", tag="Science", rules=(), body=body.encode(), headers={}, location="http://pub.example/feed", seen_at="2030-01-01T00:00:00Z")
    assert [list(item.authors) for item in read_feed(job).items] == [["Jane Doe"], ["Jane Doe"]]


@pytest.mark.parametrize(
    ("url", "avatar"),
    [
        ("http://2.gravatar.com/avatar/24e7eca63ff2e063c326cc0746560eb9?s=96&d=identicon&r=G", True),
        ("https://secure.gravatar.com/avatar/24e7eca63ff2e063c326cc0746560eb9", True),
        ("https://gravatar.com/userimage/1234/abcd.jpeg", True),
        ("http://wildclassyfit.files.wordpress.com/2014/03/img_0642.jpg?w=112", False),
        ("https://notgravatar.com/avatar/1.png", False),
        ("https://gravatar.com.example/avatar/1.png", False),
    ],
)
def test_an_avatar_is_told_by_its_host(url, avatar):
    assert is_avatar(url) is avatar


def test_no_golden_author_holds_an_address_and_every_image_is_a_web_link():
    goldens = [load_media_golden(feed) for feed in FEEDS]
    authors = [name for golden in goldens for item in golden["items"] for name in item["authors"]]
    images = [item["image_url"] for golden in goldens for item in golden["items"] if item["image_url"]]
    assert len(authors) > 500 and len(images) > 200
    assert not [name for name in authors if "@" in name]
    assert all(image.startswith(("http://", "https://")) for image in images)
    by_file = {golden["file"]: golden["items"] for golden in goldens}
    # RSS "email (Name)" keeps the name; a bare address is no author at all.
    assert by_file["acnnewswire-ko.rss"][0]["authors"] == ["Tim Mckinnon"]
    assert all(item["authors"] == [] for item in by_file["kinder-ru.rss"])
    # feedparser's own split of "email (Name)" cuts a domain ending longer than four letters
    assert all(item["authors"] == ["Jonas Große Sundrup"] for item in by_file["insanity-industries.rss"])
    # an Atom entry without an author has its feed's; an RSS item never its channel's managingEditor
    assert all(item["authors"] == ["Russ Cox"] for item in by_file["research-rsc.atom"])
    # Reddit names its authors /u/name: the slash is theirs
    assert by_file["reddit-homelab.atom"][0]["authors"] == ["/u/Remarkable_Housing61"]
    assert all(item["authors"][0].startswith("/u/") for item in by_file["reddit-frontpage.atom"])
    assert all(item["authors"] == [] for item in by_file["apology-line-podcast.rss"])  # its channel: "iwonder@wondery.com (Wondery)"
    # The widest of the Guardian's sizes; never a podcast's show art repeated in its episodes.
    assert "w=460" in by_file["guardian-us.rss"][0]["image_url"]
    assert all(item["image_url"] is None for item in by_file["apology-line-podcast.rss"])
    # An author's Gravatar, listed as one more media:content image of each WordPress.com post, is no story's image.
    assert by_file["torontonian-wordpress.rss"][0]["image_url"] is None
    assert all("gravatar.com" not in image for image in images)
    assert all("files.wordpress.com" in item["image_url"] for item in by_file["torontonian-wordpress.rss"][1:])
    # A video's media:content is not its image; its thumbnail is.
    assert all("ytimg.com" in item["image_url"] for item in by_file["youtube-channel.atom"])


def test_images_and_authors_are_stored_and_served(make_config):
    """Ingested end to end into a real database, then read through the canned query the API serves."""
    feeds = [REAL / "guardian-us.rss", REAL / "acnnewswire-ko.rss", SYNTHETIC / "media-edge.atom"]
    config = load_config(make_config(news={"sources": [{"name": f.name, "url": str(f), "tag": "Science"} for f in feeds]}))
    db = open_database(config.database_path)
    assert all(report.status in ("ok", "warning") for report in ingest_news(db, config, parse_workers=0))
    stored = {
        (row[0], row[1]): (row[2], json.loads(row[3]))
        for row in db.execute("SELECT source, title, image_url, authors FROM news")
    }
    for feed in feeds:
        for item in load_media_golden(feed)["items"]:
            assert stored[(feed.name, item["title"])] == (item["image_url"], item["authors"])


#: An item's ``<author>`` and ``dc:creator`` as written, and the authors it must have.
WRITTEN_AUTHORS = [
    # feedparser cuts a domain ending longer than four letters, and the rest became a name ("nce")
    ("<author>jane@quantum.science</author><dc:creator>Jane</dc:creator>", ["Jane"]),
    ("<dc:creator>Jane</dc:creator><author>jane@quantum.science</author>", ["Jane"]),
    ("<author>news@firm.technology (Jane Doe)</author><dc:creator>Joe</dc:creator>", ["Jane Doe", "Joe"]),
    ("<author>news@firm.technology (Jane Doe)</author>", ["Jane Doe"]),
    # a four-letter ending that was not cut keeps the name beside it
    ("<author>Jane Doe &lt;jane@x.info&gt;</author><dc:creator>Joe</dc:creator>", ["Jane Doe", "Joe"]),
    ("<author>Jane jane@x.info</author><dc:creator>Joe</dc:creator>", ["Jane", "Joe"]),
]


def test_an_address_feedparser_cut_leaves_no_name_behind(http_server, make_config):
    items = "".join(
        f"<item><title>Item {n}</title><link>http://pub.example/{n}</link>{authors}</item>"
        for n, (authors, _) in enumerate(WRITTEN_AUTHORS)
    )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<channel><title>T</title><link>http://pub.example/</link>{items}</channel></rss>"
    )
    http_server.routes["/feed"] = Reply(200, body.encode(), RSS_TYPE)
    config = load_config(make_config(news={"sources": [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]}))
    db = open_database(config.database_path)
    assert [report.status for report in ingest_news(db, config, parse_workers=0)] == ["ok"]
    stored = {title: json.loads(authors) for title, authors in db.execute("SELECT title, authors FROM news")}
    assert stored == {f"Item {n}": names for n, (_, names) in enumerate(WRITTEN_AUTHORS)}


def test_atom_authors_are_never_put_back_together(http_server, make_config):
    """Atom names and addresses are elements of their own: a lower-case name beside a four-letter ending stays."""
    people = "".join(f"<author><name>{name}</name><email>{email}</email></author>" for name, email in (
        ("admin", "admin@example.blog"), ("editor", "news@site.info"), ("Other Person", "other@example.org")))
    body = (
        '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>T</title>'
        '<id>urn:t</id><updated>2026-11-20T08:00:00Z</updated><entry><title>Item</title><id>urn:t:1</id>'
        f'<link href="http://pub.example/1"/><updated>2026-11-20T08:00:00Z</updated>{people}</entry></feed>'
    )
    http_server.routes["/feed"] = Reply(200, body.encode(), {"Content-Type": "application/atom+xml"})
    config = load_config(make_config(news={"sources": [{"name": "T", "url": http_server.url("/feed"), "tag": "Science"}]}))
    db = open_database(config.database_path)
    reports = ingest_news(db, config, parse_workers=0)
    assert [report.status for report in reports] == ["ok"], [report.line() for report in reports]
    (authors,) = db.execute("SELECT authors FROM news").fetchone()
    assert json.loads(authors) == ["admin", "editor", "Other Person"]

