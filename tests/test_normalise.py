"""The pure rules of what a news item looks like: its link, identity, plain text, tag and date."""

import time
import unicodedata
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qsite.pipeline.news.normalise import (
    SUMMARY_LIMIT,
    FeedContext,
    classify,
    entry_key,
    entry_link,
    is_empty,
    normalise_entry,
    published_at,
    shared_links,
)
from qsite.pipeline.text import html_to_text, plain_text, shorten, text_of
from qsite.pipeline.news.urls import canonical_url
from qsite.pipeline.store.records import item_id

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)


def context(base=None, **fields) -> FeedContext:
    return FeedContext(tag="Science", rules=(), base=base, first_seen=NOW, **fields)


@pytest.mark.parametrize(
    "link, base, expected",
    [
        # The fragment is the publisher's: a post on a page of many posts.
        ("https://Example.COM/a/b?id=3#p2", None, "https://example.com/a/b?id=3#p2"),
        # a fragment that only navigates or tracks names no post: it goes (the rest stays)
        ("https://Example.COM/a/b?id=3#comments", None, "https://example.com/a/b?id=3"),
        ("https://example.com/a#intro:~:text=qubit", None, "https://example.com/a#intro"),
        ("https://example.com/a#xtor=RSS-3208-[titre]", None, "https://example.com/a"),
        ("https://example.com/a#more-1234", None, "https://example.com/a"),
        ("https://example.com/a#more", None, "https://example.com/a#more"),
        ("/news/1?utm_source=rss&utm_medium=feed&page=2", "https://site.example.org/feed.xml", "https://site.example.org/news/1?page=2"),
        ("story.html", "https://site.example.org/stories/feed.atom", "https://site.example.org/stories/story.html"),
        ("https://x.example/p?fbclid=AB&gclid=CD&mc_cid=1&mc_eid=2&keep=yes", None, "https://x.example/p?keep=yes"),
        ("https://x.example/p?UTM_Campaign=a", None, "https://x.example/p"),
        # RFC 3986 6.2.3: default ports and an empty path.
        ("http://x.example:80/p", None, "http://x.example/p"),
        ("https://x.example:443", None, "https://x.example/"),
        ("https://x.example:8443/p", None, "https://x.example:8443/p"),
        # RFC 3986 6.2.2: escapes upper-cased, unreserved ones decoded, dot segments removed; empty segments kept.
        ("http://x.example/%7Euser/a", None, "http://x.example/~user/a"),
        ("http://x.example/%7euser/./b/../c", None, "http://x.example/~user/c"),
        ("http://x.example/a%2fb?q=%e2%82%ac", None, "http://x.example/a%2Fb?q=%E2%82%AC"),
        ("http://x.example/2004/12/28//", None, "http://x.example/2004/12/28//"),
        ("http://x.example/café", None, "http://x.example/caf%C3%A9"),
        # Tracking by the ClearURLs rules; real parameters keep their order and spelling.
        ("http://www.heise.de/a.html?wt_mc=rss.developer.beitrag.atom", None, "http://www.heise.de/a.html"),
        ("https://medium.com/@w/post-1a2b?source=rss-1a2b----4", None, "https://medium.com/@w/post-1a2b"),
        ("https://www.youtube.com/watch?v=dQw4w9WgXcQ&feature=youtube_gdata", None, "https://www.youtube.com/watch?v=dQw4w9WgXcQ"),
        ("https://n.example/s?id=42&src=rss&p=7&DOI=10.1000%2F182&gift=Ab3", None, "https://n.example/s?id=42&p=7&DOI=10.1000%2F182&gift=Ab3"),
        ("https://www.bbc.co.uk/news/c0?at_medium=RSS&at_campaign=rss", None, "https://www.bbc.co.uk/news/c0"),
        ("https://x.example/p?q=a%20b&ref=home", None, "https://x.example/p?q=a%20b"),
        ("https://www.google.com/url?rct=j&url=https://ex.example/a%3Futm_source%3Dx&ct=ga", None, "https://ex.example/a"),
        # Google News's redirector (tests/data/realfeeds/google-news-top-stories.rss): its target, cleaned, escapes kept.
        ("http://news.google.com/news/url?fd=R&sa=T&url=http%3A%2F%2Fwww.bloomberg.com%2Fapps%2Fnews%3Fpid%3D20601102%26sid%3DalTEErVe0CIs&usg=AFQ",
         None, "http://www.bloomberg.com/apps/news?pid=20601102&sid=alTEErVe0CIs"),
        ("https://news.google.com/news/url?url=https%3A%2F%2Fex.example%2Fa%3Futm_medium%3Drss", None, "https://ex.example/a"),
        ("https://news.google.com/news?pz=1&ned=us&hl=en", None, "https://news.google.com/news?pz=1&ned=us&hl=en"),
        # AddThis's address-bar sharing fragment (tests/data/realfeeds/daring-fireball.atom) names a share, not a place.
        ("http://blog.erratasec.com/2016/02/early-internet-services-considered.html#.VtCA1eS6FaQ", None,
         "http://blog.erratasec.com/2016/02/early-internet-services-considered.html"),
        ("https://x.example/p?id=1#.WNU1xGHp7QE.facebook", None, "https://x.example/p?id=1"),
        ("https://x.example/p#.WNU1xGHp7QE;text", None, "https://x.example/p"),
        ("https://x.example/p#.short", None, "https://x.example/p#.short"),
        ("https://x.example/p#section-2.WNU1xGHp7QE", None, "https://x.example/p#section-2.WNU1xGHp7QE"),
        ("  https://x.example/p  ", None, "https://x.example/p"),
    ],
)
def test_canonical_url(link, base, expected):
    assert canonical_url(link, base) == expected


@pytest.mark.parametrize("link", [None, "", "   ", "mailto:desk@example.com", "javascript:alert(1)", "/relative-without-base", "tag:x.example,2020:1"])
def test_canonical_url_refuses_what_is_not_a_web_link(link):
    assert canonical_url(link) is None


def test_one_story_whatever_the_spelling():
    spellings = ["http://www.example.edu/~user/x", "http://WWW.example.edu:80/%7Euser/x", "http://www.example.edu/%7euser/x?utm_source=a"]
    assert len({canonical_url(link) for link in spellings}) == 1


@pytest.mark.parametrize(
    "markup, expected",
    [
        ("<p>One &amp; <b>two</b></p><p>Three</p>\n\n  <script>alert(1)</script>", "One & two Three"),
        ("Qubits &lt; 100 &mdash; for now", "Qubits < 100 — for now"),
        ("T<sub>1</sub> of 1 ms<br>next", "T1 of 1 ms next"),
        # Every block element ends a word.
        ("<dl><dt>by X</dt></dl>The Google", "by X The Google"),
        ("<dl><dt>Time</dt><dd>2018-11-19</dd><dt>Location</dt><dd>32.4°N</dd></dl>", "Time 2018-11-19 Location 32.4°N"),
        # Self-closed raw-text elements end where they stand; what a browser does not show is dropped.
        ('<p>Not over <iframe src="https://v.example/e"/> over yet! </p><p>More</p>', "Not over over yet! More"),
        ("A <textarea/> B <xmp/> C <noscript/> <em>D</em>", "A B C D"),
        ("Before<noscript><img src=x> enable scripts</noscript> after", "Before after"),
        ("A <xmp><b>as written</b></xmp> B", "A <b>as written</b> B"),
        ('-subj "/CN=&lt;your nick&gt;"', '-subj "/CN=<your nick>"'),
        (None, ""),
        ("", ""),
    ],
)
def test_html_to_text(markup, expected):
    assert html_to_text(markup) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # Reddit's self-text, escaped twice: what reading the HTML once leaves.
        ('<!-- SC_OFF --><div class="md"><p>A threesome</p> </div><!-- SC_ON --> submitted by', "A threesome submitted by"),
        # Escaped three times: read until no markup is left.
        ("&lt;p&gt;x&lt;/p&gt; <p>It&#39;s <b>bold</b></p>", "x It's bold"),
        ("<!-- a comment --> text", "text"),
        ("wiki text <!-- ==== NoMoreLinks ==== and the rest", "wiki text"),
        ("1 < 2 && <b>not bold</b>", "1 < 2 && not bold"),
        ("line<br/>break", "line break"),
        # Text that mentions a tag (no closing tag, no attributes), or angle brackets that are no HTML, stays.
        ("Draw on a <canvas> element, with std::vector<bool> and <your nick>", "Draw on a <canvas> element, with std::vector<bool> and <your nick>"),
        ('<ref name="a">b</ref> &amp; x<y', '<ref name="a">b</ref> &amp; x<y'),
    ],
)
def test_plain_text_reads_markup_left_in_text_as_html(text, expected):
    assert plain_text(text) == expected


@pytest.mark.parametrize(
    "value, kind, expected",
    [
        # HTML shows a code sample as written: an escaped iframe in one is no iframe, and is kept.
        ('<p>Embed it:</p><pre><code>&lt;iframe src="v"&gt;&lt;/iframe&gt;</code></pre>', "text/html", 'Embed it: <iframe src="v"></iframe>'),
        ("Type <kbd>&lt;br/&gt;</kbd>, see <samp>&lt;p class=x&gt;</samp>", "text/html", "Type <br/>, see <p class=x>"),
        # Text around it that still holds markup is read again all the same.
        ("&lt;b&gt;bold&lt;/b&gt; <code>&lt;/b&gt;</code>", "text/html", "bold </b>"),
        # Escaped twice, the code sample is an element at the second read, and its text stays.
        ("<p>&lt;p&gt;Use &lt;code&gt;&amp;lt;/div&amp;gt;&lt;/code&gt;&lt;/p&gt;</p>", "text/html", "Use </div>"),
        ('<div>&lt;!-- SC_OFF --&gt;&lt;div class="md"&gt;&lt;p&gt;Self-text&lt;/p&gt;&lt;/div&gt;</div>', "text/html", "Self-text"),
        # Typed as plain text, HTML in it is read, code samples as written.
        ("<p>A <pre>&lt;/p&gt;</pre></p>", "text/plain", "A </p>"),
    ],
)
def test_plain_text_keeps_code_samples_as_written(value, kind, expected):
    assert plain_text(value, kind) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        # A tag that starts before a code sample and ends after it is one tag, dropped with the sample.
        ('&lt;img src=x onerror="<code>alert(1)</code>"&gt; hi', "hi"),
        ("&lt;!-- <code>x</code> --&gt; rest", "rest"),
        # A code element the feed never closed is no code sample: it would keep all that follows as written.
        ("<code>&lt;script&gt;alert(1)&lt;/script&gt; rest &lt;b&gt;bold&lt;/b&gt;", "rest bold"),
        ("<code>&lt;b&gt;x&lt;/b&gt;</code><b class=\"", "x"),
        # What <xmp> shows is markup all the same, inside a code sample too.
        ("<code><xmp><b>raw</b></xmp></code>", "raw"),
        # Markup made where a code sample meets the text beside it, or another sample, is no code sample.
        ("&lt;<code>img src=x onerror=alert(1)&gt;</code> hi", "hi"),
        ("<code>&lt;</code>img src=x onerror=alert(1)&gt; hi", "hi"),
        ("<code>&lt;img</code>&lt;b&gt;&lt;/b&gt;<code> src=x onerror=y&gt;</code> hi", "hi"),
        ("&lt;scr<code>ipt</code> src=x&gt;&lt;/script&gt;hi", "hi"),
        # A feed cannot make a placeholder repeat a code sample (U+FDD0 and U+FDD1 are noncharacters).
        ("<code>&lt;b&gt;</code>\ufdd00\ufdd1\ufdd00\ufdd1 x", "<b> x"),
    ],
)
def test_a_code_sample_lets_no_markup_through(value, expected):
    """Only a code sample's own text may look like markup (``<iframe ...>`` in dustri.org's ``<pre><code>``)."""
    assert plain_text(value, "text/html") == expected


@pytest.mark.parametrize(
    "value, kind",
    [
        ("&lt;im&#1;g src=x onerror=alert(1)&gt; hi", "text/html"),
        ("<im\x01g src=x onerror=alert(1)> hi", "text/plain"),
        ("&lt;b\ufeff class=x&gt;hi", "text/html"),
    ],
)
def test_a_control_character_hides_no_tag(value, kind):
    """A character plain text drops (U+0001, U+FEFF) is dropped before markup is looked for, not after."""
    assert plain_text(value, kind) == "hi"


def test_plain_text_values_are_never_decoded_again():
    assert text_of("Why std::vector<bool> is special", "text/plain") == "Why std::vector<bool> is special"
    assert text_of("AT&amp;T", "text/plain") == "AT&amp;T"
    assert text_of("悪霊 &lt;DVD版>", "text/plain") == "悪霊 &lt;DVD版>"
    assert text_of("AT&amp;T <b>x</b>", "text/html") == "AT&T x"
    assert text_of("A <b>b</b>", "application/xhtml+xml") == "A b"


def test_a_byte_order_mark_inside_text_is_dropped():
    # FC Utrecht's title (tests/data/realfeeds/fc-utrecht.rss), and the same in HTML
    assert text_of("Column: \ufeffWat een wedstrijd", "text/plain") == "Column: Wat een wedstrijd"
    assert text_of("<p>\ufeffWat</p> een", "text/html") == "Wat een"


@pytest.mark.parametrize("kind", ["text/plain", "text/html"])
def test_plain_text_never_holds_a_control_character(kind):
    controls = [chr(code) for code in range(0xA0) if unicodedata.category(chr(code)) == "Cc"]
    assert text_of("Ctrl \x01 char", kind) == "Ctrl char"
    assert text_of("a\x00b\x7fc\x9fd", kind) == "abcd"
    # Those that are whitespace (tab, line feed, U+001C to U+001F, U+0085) separate words as spaces do.
    assert text_of("a\tb\x1fc\x85d", kind) == "a b c d"
    assert not [char for char in text_of("x".join(controls), kind) if unicodedata.category(char) == "Cc"]


@given(st.text(max_size=2000))
@pytest.mark.slow
def test_shorten_never_exceeds_the_limit(text):
    cut = shorten(text, SUMMARY_LIMIT)
    assert len(cut) <= SUMMARY_LIMIT
    if len(text) <= SUMMARY_LIMIT:
        assert cut == text


def test_shorten_cuts_on_a_word_boundary_with_an_ellipsis():
    text = " ".join(f"word{i}" for i in range(200))
    cut = shorten(text, SUMMARY_LIMIT)
    assert cut.endswith("…") and len(cut) <= SUMMARY_LIMIT
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "


def test_classify_first_matching_rule_wins_else_default():
    rules = [(r"(?i)\b(raises|funding)\b", "Investing"), (r"(?i)\bfab\b", "Industry")]
    assert classify(rules, "Science", "Start-up raises $10m for fab", "", []) == "Investing"
    assert classify(rules, "Science", "New fab opens", "", []) == "Industry"
    assert classify(rules, "Science", "Qubit coherence", "nothing", ["Funding"]) == "Investing"
    assert classify(rules, "Science", "Qubit coherence", "nothing", ["Lab"]) == "Science"
    assert classify([], "Industry", "raises", "", []) == "Industry"


def test_published_at_is_the_date_else_first_seen_and_never_far_ahead():
    assert published_at(datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc), NOW) == ("2025-03-04T05:06:07Z", True)
    assert published_at(None, NOW) == ("2025-06-01T12:00:00Z", False)
    assert published_at(NOW + timedelta(hours=20), NOW) == ("2025-06-02T08:00:00Z", True)
    assert published_at(datetime(2099, 1, 7, tzinfo=timezone.utc), NOW) == ("2025-06-01T12:00:00Z", False)


def test_entry_link_order():
    ctx = context("https://feeds.example/feed.atom", own_urls=frozenset({"https://feeds.example/feed.atom"}))
    pdf = {"rel": "alternate", "type": "application/pdf", "href": "https://site.example/p.pdf"}
    page = {"rel": "alternate", "type": "text/html", "href": "https://site.example/p.html"}
    assert entry_link({"links": [pdf, page], "link": "https://site.example/p.pdf"}, ctx) == "https://site.example/p.html"
    # Only a PDF, and feedparser's link is the tag: id: the PDF.
    assert entry_link({"links": [pdf], "link": "tag:site.example,2020:1", "guidislink": True, "id": "tag:site.example,2020:1"}, ctx) == "https://site.example/p.pdf"
    # href="" resolved to the feed itself is never the item's url: an http(s) id is, else there is none.
    own = {"rel": "alternate", "href": "https://feeds.example/feed.atom"}
    assert entry_link({"links": [own], "link": "https://feeds.example/feed.atom", "id": "https://site.example/?p=7"}, ctx) == "https://site.example/?p=7"
    assert entry_link({"links": [own], "link": "https://feeds.example/feed.atom", "id": "tag:site.example,2020:7"}, ctx) is None
    assert entry_link({"links": [own], "link": "https://feeds.example/feed.atom"}, ctx) is None
    # A permalink guid, then an enclosure.
    assert entry_link({"id": "https://site.example/g", "guidislink": True}, ctx) == "https://site.example/g"
    episode = {"rel": "enclosure", "type": "audio/mpeg", "href": "https://cdn.example/e1.mp3"}
    assert entry_link({"id": "https://cdn.example/e1.mp3", "guidislink": False, "links": [episode]}, ctx) == "https://cdn.example/e1.mp3"
    assert entry_link({}, context()) is None


def test_entry_key_guid_else_link_and_enclosure_else_link_alone_or_if_shared_link_and_title_else_text():
    enclosure = {"rel": "enclosure", "href": "https://cdn.example/1.mp3"}
    assert entry_key({"id": "a"}, "https://x.example/", "T", "") != entry_key({"id": "b"}, "https://x.example/", "T", "")
    assert entry_key({"id": "a"}, "https://x.example/1", "T", "") == entry_key({"id": "a"}, "https://x.example/2", "U", "")
    one = entry_key({"links": [enclosure]}, "https://x.example/", "", "")
    assert one != entry_key({"links": [{**enclosure, "href": "https://cdn.example/2.mp3"}]}, "https://x.example/", "", "")
    # A link of its own is the entry, whatever its title says (a typo fixed is the same item).
    assert entry_key({}, "https://x.example/", "Tow", "") == entry_key({}, "https://x.example/", "Two", "")
    assert entry_key({}, "https://x.example/a", "Two", "") != entry_key({}, "https://x.example/b", "Two", "")
    # A link shared within the document: link and title, else link and text.
    shared = {"shared": True}
    assert entry_key({}, "https://x.example/", "Two", "", **shared) != entry_key({}, "https://x.example/", "Three", "", **shared)
    assert entry_key({}, "https://x.example/", "", "one text", **shared) != entry_key({}, "https://x.example/", "", "other text", **shared)
    assert entry_key({}, "https://x.example/", "Same", "one", **shared) == entry_key({}, "https://x.example/", "Same", "two", **shared)
    assert entry_key({}, "https://x.example/", "Two", "", **shared) != entry_key({}, "https://x.example/", "Two", "")
    # Only keys made without guid or enclosure may be a stored item's under another key.
    assert [entry_key(e, "https://x.example/", "T", "")[1] for e in ({"id": "a"}, {"links": [enclosure]}, {})] == [False, False, True]


def test_shared_links_are_those_of_two_entries_without_guid_or_enclosure():
    entries = [
        {"link": "/a", "title": "One"}, {"link": "https://x.example/a", "title": "Two"},
        {"link": "/b", "title": "Three"}, {"link": "/b", "id": "guid-b"},
        {"link": "/c", "links": [{"rel": "enclosure", "href": "https://cdn.example/1.mp3"}]}, {"link": "/c"},
    ]
    assert shared_links(entries, "https://x.example/feed") == {"https://x.example/a"}


def test_normalise_entry():
    entry = {
        "link": "/posts/1?utm_source=rss#part-2",
        "title": "Cat qubits &amp; <i>bit flips</i>",
        "title_detail": {"type": "text/html"},
        "content": [{"value": "<p>Stabilised <b>cat</b> states.</p>", "type": "text/html"}],
        "tags": [{"term": "Funding"}],
        "updated": "2025-01-02T03:04:05Z",
        "updated_parsed": time.struct_time((2025, 1, 2, 3, 4, 5, 0, 0, 0)),
    }
    item = normalise_entry(entry, FeedContext("Science", [("(?i)funding", "Investing")], "https://lab.example.org/feed", NOW))
    assert item.url == "https://lab.example.org/posts/1#part-2"
    assert item.title == "Cat qubits & bit flips"
    assert item.summary == "Stabilised cat states."
    assert item.tag == "Investing"
    assert (item.published_at, item.dated) == ("2025-01-02T03:04:05Z", True)
    assert item.legacy_id == item_id("https://lab.example.org/posts/1")


def test_entry_without_title_takes_its_summary_and_without_any_link_is_none():
    item = normalise_entry({"link": "https://x.example/a", "summary": "Only a summary here."}, context())
    assert item.title == "Only a summary here." and (item.published_at, item.dated) == ("2025-06-01T12:00:00Z", False)
    assert normalise_entry({"title": "No link", "summary": "x"}, context()) is None
    # Never the feed's site link: a homepage is not a news item.
    assert normalise_entry({"title": "No link", "summary": "x", "id": "urn:x:1"}, context("https://site.example/feed")) is None


@pytest.mark.parametrize(
    "entry, empty",
    [
        # feedparser's reading of <entry><content type="html"></content></entry> in a feed with an xml:base
        ({"content": [{"type": "text/html", "language": None, "base": "https://x.example/", "value": ""}], "summary": ""}, True),
        ({"links": [{"rel": "alternate", "type": "text/html", "title": "No address"}], "link": ""}, True),
        ({"links": [{"url": "", "length": "0", "type": "audio/mpeg", "rel": "enclosure"}]}, True),  # <enclosure url="">
        ({}, True),
        ({"content": [{"type": "text/html", "base": "https://x.example/", "src": "https://x.example/c", "value": ""}]}, False),
        ({"links": [{"rel": "enclosure", "href": "https://x.example/a.mp3", "type": "audio/mpeg"}]}, False),
        ({"title": "A title"}, False),
    ],
)
def test_an_entry_is_empty_when_nothing_holds_a_story_whatever_describes_it(entry, empty):
    assert is_empty(entry) is empty


def test_the_vendored_clearurls_rules_are_the_commit_their_source_names():
    import hashlib
    import json

    from qsite.pipeline.news import tracking

    folder = tracking.RULES_FILE.parent
    source = dict(line.split(": ", 1) for line in (folder / "SOURCE").read_text().splitlines() if ": " in line)
    assert source["repository"] == "https://github.com/ClearURLs/Rules" and len(source["commit"]) == 40
    assert hashlib.sha256(tracking.RULES_FILE.read_bytes()).hexdigest() == source["sha256"]
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in (folder / "LICENSE").read_text()
    rules = json.loads(tracking.RULES_FILE.read_text())["providers"]
    assert [p.name for p in tracking.providers()] == [*rules, *tracking.ADDITIONS]
    assert tracking.remove_tracking("https://example.org/a?utm_source=x&id=1", "https://example.org") == ("https://example.org/a?id=1", None)
