"""Property-based tests (hypothesis) of what makes a news item (its URL, its text and its date) and of response JSON.

Examples are bounded for ``make test``; ``make soak`` raises them through
``QSITE_SOAK`` (see :data:`EXAMPLES`).
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl, urlsplit

import pytest
import sqlite_utils
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from qsite.db.migrations import migrations
from qsite.pipeline.news.dates import DateReader
from qsite.pipeline.news.normalise import FUTURE_TOLERANCE, SUMMARY_LIMIT, FeedContext, normalise_entry, published_at
from qsite.pipeline.store.records import item_id
from qsite.pipeline.text import _MARKUP, one_line
from qsite.pipeline.text import html_to_text as plain_text
from qsite.pipeline.text import plain_text as summary_text
from qsite.pipeline.text import shorten
from qsite.pipeline.news.urls import canonical_url
from qsite.service.api.cursors import Position, decode_cursor, encode_cursor
from qsite.service.api.kinds import Refused, parse_since
from qsite.service.api.parameter_table import Q_MAX
from qsite.service.api.search_language import MISPLACED_OR, NOTHING_INCLUDED, Words, fts_query
from qsite.service.api.responses import dumps

SOAK = bool(os.environ.get("QSITE_SOAK"))
EXAMPLES = 3000 if SOAK else 150
bounded = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

# -- strategies --------------------------------------------------------------

label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).filter(
    lambda s: not s.startswith("-") and not s.endswith("-")
)
# Reserved names only: a real site (medium.com, say) may have tracking rules of its own.
hosts = st.builds(lambda parts, tld: ".".join(parts + [tld]), st.lists(label, min_size=1, max_size=3), st.sampled_from(["example", "test", "invalid"]))
# Raw whitespace is not valid in a URL (a link ending in it is trimmed, one before a query is not).
path_segment = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Z", "C"), exclude_characters="/?#%"), max_size=10
).filter(lambda segment: not any(char.isspace() for char in segment))
paths = st.lists(path_segment, max_size=4).map(lambda parts: "/" + "/".join(parts))
#: Parameters the tracking rules (ClearURLs' global ones, for any site) remove.
TRACKING = ["utm_source", "utm_medium", "UTM_Campaign", "fbclid", "gclid", "mc_cid", "mc_eid", "_hsenc", "mkt_tok", "yclid", "msclkid", "wt_mc"]
param_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda name: "?" in canonical_url(f"https://site.example/p?{name}=v")  # what the rules keep
)
params = st.lists(st.tuples(param_names, st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=6)), max_size=4)
tracking = st.lists(
    st.tuples(st.sampled_from(TRACKING), st.text(alphabet="abc123", max_size=5)),
    max_size=3,
)


def build_url(scheme, host, path, kept, fragment=""):
    query = "&".join(f"{k}={v}" for k, v in kept)
    return f"{scheme}://{host}{path}" + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")


# -- URL canonicalisation ---------------------------------------------------


@bounded
@given(st.text(max_size=200), st.one_of(st.none(), st.just("https://base.example/feed/"), st.text(max_size=40)))
@example("http://[::1", None)
@example("http://%zz/", None)
@example("//no-scheme.example/x", "https://base.example/")
@example("https://a.example:99999/", None)
def test_canonical_url_never_raises_and_is_a_web_link_or_none(link, base):
    url = canonical_url(link, base)
    if url is not None:
        parts = urlsplit(url)
        assert parts.scheme in ("http", "https") and parts.hostname
        assert parts.netloc == parts.netloc.lower()
        assert not re.search(r"%(?![0-9A-F]{2})|[\s<>\"]", url)  # escapes in upper case, nothing left unescaped


@bounded
@given(st.text(max_size=200), st.one_of(st.none(), st.just("https://base.example/a/b")))
def test_canonical_url_is_idempotent(link, base):
    url = canonical_url(link, base)
    if url is not None:
        assert canonical_url(url) == url
        assert item_id(canonical_url(url)) == item_id(url)


@bounded
@given(st.sampled_from(["http", "https", "HTTP", "Https"]), hosts, paths, params, tracking, st.text(max_size=8))
def test_tracking_and_case_never_make_a_new_story_and_the_fragment_stays(scheme, host, path, kept, noise, fragment):
    clean = canonical_url(build_url(scheme.lower(), host, path, kept))
    # Tracking parameters interleaved at the front and back, host in capitals, the default port.
    noisy = canonical_url(build_url(scheme, host.upper() + (":443" if scheme.lower() == "https" else ":80"), path, noise + kept + noise))
    assert clean is not None and noisy == clean
    assert item_id(noisy) == item_id(clean)
    remaining = [name for name, _ in parse_qsl(urlsplit(clean).query, keep_blank_values=True)]
    assert remaining == [name for name, _ in kept]  # every other parameter kept, in order
    with_fragment = canonical_url(build_url(scheme, host, path, kept, fragment.replace("#", "")))
    assert with_fragment.startswith(clean) and urlsplit(with_fragment).fragment == urlsplit(canonical_url(with_fragment)).fragment


@bounded
@given(hosts, paths, params, params)
def test_different_real_parameters_stay_different_stories(host, path, first, second):
    one = canonical_url(build_url("https", host, path, first))
    two = canonical_url(build_url("https", host, path, second))
    assert (one == two) == (first == second)


# -- summary cleaning --------------------------------------------------------

tags = st.sampled_from(["p", "div", "b", "i", "a href='x'", "script", "style", "img src=x", "br/", "li", "span class='y'"])
words = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "Zs", "P")), min_size=0, max_size=30)


@st.composite
def markup(draw):
    pieces = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            pieces.append(draw(words).replace("<", " ").replace("&", " "))
        elif kind == 1:
            tag = draw(tags)
            pieces.append(f"<{tag}>")
        elif kind == 2:
            pieces.append(f"</{draw(tags).split()[0].rstrip('/')}>")
        else:
            pieces.append(draw(st.sampled_from(["&amp;", "&nbsp;", "&#233;", "&lt;", "&quot;", "\n\t ", "&eacute;"])))
    return "".join(pieces)


@bounded
@given(st.text(max_size=3000))
def test_plain_text_is_one_trimmed_line(text):
    plain = plain_text(text)
    assert plain == plain.strip()
    assert "  " not in plain and "\n" not in plain and "\t" not in plain


@bounded
@given(markup())
@example("<script>alert(1)</script>safe")
@example("<p>One</p><p>Two</p>")
def test_plain_text_removes_every_tag_it_was_given(text):
    plain = plain_text(text)
    assert not re.search(r"<\s*/?\s*(p|div|b|i|a|script|style|img|br|li|span)\b", plain)
    assert "alert(1)" not in plain or "<script>" not in text


#: Pieces of text around a code sample: tags, tags cut short, comments, quotes, markup escaped once or twice,
#: <xmp> (raw text: a code element in it is text, an element again at the next read). None can make a code
#: sample (code, pre, kbd, samp) of its own.
around = st.lists(
    st.sampled_from(
        ["<", ">", "</", "/>", "&lt;", "&gt;", "&lt;/", "&amp;lt;", "&amp;gt;", "&amp;", "<!--", "&lt;!--", "-->", '"', "'", "=", " ",
         "b", "i", "img", "div", "a", " src=x", " onerror=", "x", "<b>", "</b>", "<xmp>", "<div>", "</div>"]
    ),
    max_size=12,
).map("".join)
#: A code sample's text: the same pieces, escaped once as a feed writes a sample inside <code>.
sample_text = st.lists(st.sampled_from(["<", ">", "</", "/>", "&lt;", "!--", "-->", '"', "=", " ", "b", "i", "img", " src=x", "x"]), max_size=12).map("".join)


@bounded
@given(around, sample_text, around)
@example('&lt;img src=x onerror="', "alert(1)", '"&gt; hi')
@example("&lt;", "img src=x onerror=y>", "")
@example("<b>", "<b class=x>", "")
def test_only_a_code_sample_looks_like_markup_in_a_summary(before, sample, after):
    """Whatever surrounds a code sample, any markup left in a summary is the sample's own text.

    A summary is plain text; a code sample's text is the one exception, shown as written. Markup
    started around it, cut across it or pieced together at its edges is never let through.
    """
    # Plain text is read as HTML at most three times: markup escaped twice inside an <xmp> (raw text, one
    # more level) is as deep as it goes.
    assume(before.count("<xmp>") + after.count("<xmp>") <= 1)
    escaped = sample.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    summary = summary_text(f"{before}<code>{escaped}</code>{after}", "text/html")
    assert all(match.group() in one_line(sample) for match in _MARKUP.finditer(summary))


@bounded
@given(st.text(max_size=2000), st.integers(min_value=2, max_value=600))
def test_shorten_respects_the_limit_and_keeps_a_prefix(text, limit):
    short = shorten(text, limit)
    assert len(short) <= limit
    if len(text) <= limit:
        assert short == text
    else:
        assert short.endswith("…") and text.startswith(short[:-1])


@bounded
@given(markup(), st.text(max_size=100), st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)))
def test_normalised_entry_summary_is_bounded_plain_text(summary, title, seen):
    seen = seen.replace(tzinfo=timezone.utc, microsecond=0)
    entry = {"link": "https://news.example/a?utm_source=x", "title": title, "summary": summary * 20}
    item = normalise_entry(entry, FeedContext("Science", (), None, seen))
    assert item is not None and item.url == "https://news.example/a"
    assert len(item.summary) <= SUMMARY_LIMIT and len(item.title) > 0
    assert "\n" not in item.summary + item.title


# -- dates --------------------------------------------------------------------

struct_times = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).map(lambda moment: moment.timetuple()),
    st.tuples(*[st.integers(-10, 10_000)] * 6).map(lambda parts: time.struct_time(parts + (0, 1, 0))),
)


# A third of the examples: each builds a DateReader, whose dateparser parsers take about 40 ms.
@settings(bounded, max_examples=EXAMPLES // 3)
@given(struct_times, struct_times, st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1)))
# Go's zero time, which real feeds carry as a placeholder date; strftime("%Y") writes it as "1".
@example(time.struct_time((1, 1, 1, 0, 0, 0, 0, 1, 0)), None, datetime(2026, 11, 20))
@pytest.mark.slow
def test_published_at_is_utc_rfc3339_and_never_far_in_the_future(published, updated, seen):
    seen = seen.replace(tzinfo=timezone.utc, microsecond=0)
    # The raw text feedparser read each from, written back as ISO 8601, so that it agrees.
    raw = {name: "%04d-%02d-%02dT%02d:%02d:%02dZ" % tuple(value[:6]) for name, value in (("published", published), ("updated", updated)) if value}
    entry = {"published_parsed": published, "updated_parsed": updated, **raw}
    value, _ = published_at(DateReader().read(entry), seen)
    assert RFC3339_Z.match(value)
    moment = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert moment - seen <= FUTURE_TOLERANCE


@bounded
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2099, 1, 1)), st.integers(0, 10 * 365 * 86400))
def test_a_believable_published_date_is_kept_exactly(moment, age):
    moment = moment.replace(microsecond=0, tzinfo=timezone.utc)
    seen = moment + timedelta(seconds=age)
    assert published_at(moment, seen) == (moment.strftime("%Y-%m-%dT%H:%M:%SZ"), True)


@bounded
@given(
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(9998, 12, 30), timezones=st.timezones()),
    st.sampled_from(["T", "t"]),
    st.booleans(),
)
def test_since_parameter_reads_any_rfc3339_offset_as_the_same_utc_instant(moment, separator, fraction):
    text = moment.replace(microsecond=123456 if fraction else 0).isoformat(sep=separator)
    if moment.utcoffset() is None or moment.utcoffset().seconds % 60 or moment.utcoffset().microseconds:
        return  # RFC 3339 offsets are whole minutes
    expected = moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert parse_since(text.replace("+00:00", "Z") if fraction else text) == expected


@bounded
@given(st.text(max_size=80))
def test_since_parameter_never_raises_on_garbage(text):
    value = parse_since(text)
    assert value is None or RFC3339_Z.match(value)


@bounded
@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)),
    st.binary(min_size=16, max_size=16),
    st.text(max_size=40),
    st.text(max_size=60),
)
def test_cursor_round_trips_and_garbage_is_refused(moment, digest, item, garbage):
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    real_id = digest.hex()  # the shape the pipeline gives ids
    assert decode_cursor(encode_cursor(stamp, real_id)) == Position(stamp, real_id)
    # an id of any other shape is refused, as is anything not written by encode_cursor
    assert decode_cursor(encode_cursor(stamp, item)) is None or re.fullmatch("[0-9a-f]{32}", item)
    decoded = decode_cursor(garbage)
    assert decoded is None or (RFC3339_Z.match(decoded[0]) and encode_cursor(*decoded) == garbage)


# -- searches (q) ----------------------------------------------------------------

#: What a hostile or hurried search is made of: words, FTS5's syntax and operators in both cases,
#: the index's column and facet names, letters lower() changes in length or not at all, other scripts.
SEARCH_PIECES = ["qubit", "Photon", "OR", "or", "AND", "NOT", "NEAR", "-", "--", '"', "(", ")", "*", ":", "^", "+", "{", "}",
                 "science", "facets", "s1", "t1science", "_", "'", "é", "Straße", "İstanbul", "日本語", "Wi-Fi", " ", " ", "  ", "\t"]
search_pieces = st.lists(st.sampled_from(SEARCH_PIECES), max_size=60).map("".join).filter(lambda text: len(text) <= Q_MAX)


@functools.cache
def search_index():
    """An empty database of the real schema: ``news_search`` (``detail=column``) and ``glossary_fts``."""
    db = sqlite_utils.Database(memory=True)
    migrations.apply(db)
    return db.conn


@bounded
@given(st.one_of(st.text(max_size=Q_MAX), search_pieces))
def test_a_search_reads_back_as_itself_and_never_longer(text):
    """Its canonical text is what next links carry and the cache keys: read again, it is itself, within Q_MAX."""
    words = Words(Q_MAX)
    try:
        canonical = words.parse(text)
    except Refused as refused:
        assert refused.detail in (MISPLACED_OR, NOTHING_INCLUDED)
        return
    assert (canonical is None) == (not text.strip())
    if canonical is not None:
        assert len(canonical) <= max(len(text), 2) and words.parse(canonical) == canonical


@bounded
@given(search_pieces)
@example('"qubit OR" NEAR(a b) -"x y" science: ^t1science* OR {facets}: -İstanbul')
def test_a_search_runs_only_its_words_and_the_operators_written_for_it(text):
    try:
        canonical = Words(Q_MAX).parse(text)
    except Refused:
        return
    if canonical is None:  # blank: no search, and no MATCH in the canned queries
        return
    expression = fts_query(canonical)
    # every word quoted, and no operator but those fts_query writes
    assert not re.sub(r'"[^\W_]+"|""|[()\s]|\b(?:AND|OR|NOT)\b', "", expression), expression
    conn = search_index()
    for match in ("- facets: (" + expression + ")", "{science}: (" + expression + ")"):
        conn.execute("SELECT count(*) FROM news_search WHERE news_search MATCH ?", [match]).fetchone()
    conn.execute("SELECT count(*) FROM glossary_fts WHERE glossary_fts MATCH ?", [expression]).fetchone()


# -- response bodies -----------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(st.characters(exclude_categories=["Cs"])),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@bounded
@given(json_values)
@example({"t": "\x00\x1f\x7f\u2028\u2029\u00e9\"\\/\U0001f600", "n": [2**63 - 1, -(2**63), None, True]})
def test_response_json_is_the_standard_encoders_bytes(payload):
    """orjson, for speed, writes what ``json.dumps`` wrote before it: control characters, U+2028 and all."""
    assert dumps(payload) == json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
