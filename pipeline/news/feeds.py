"""Parsing fetched feed bytes with feedparser, guarded, into normalised items.

feedparser is only ever given bytes that :mod:`qsite.pipeline.fetch` already
fetched (never a URL, and never a bare string it might take for a file
name). Whatever it makes of them is judged here: an exception or a document
that is not a feed is that source's error; a ``bozo`` (not well-formed) feed
that still yields entries is a warning and its entries are kept.

:func:`read_feed` is the unit of work a process pool runs: it takes plain
data in and gives plain data back, so parsing can use every core.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import feedparser
from feedparser.exceptions import CharacterEncodingOverride, NonXMLContentType
from w3lib.encoding import read_bom

from qsite.pipeline.news.dates import DateReader
from qsite.pipeline.news.encoding import check_encoding
from qsite.pipeline.news.media import feed_logos
from qsite.pipeline.news.normalise import FeedContext, is_empty, normalise_entry, parse_time, shared_links
from qsite.pipeline.news.people import entry_authors
from qsite.pipeline.store.records import Item
from qsite.pipeline.news.tracking import providers
from qsite.pipeline.news.urls import canonical_url, is_web_link


#: Most entries read from one feed per fetch: the first ones in document order, since feeds list
#: the newest first. Far above real feeds (the longest of tests/data/realfeeds lists 162): a
#: hostile feed of 300,000 entries stored them all (104 s, 336 MB) and made every later run slow.
MAX_ENTRIES = 1000

#: bozo reasons that say nothing about whether the feed was read right: a charset header
#: contradicting the XML declaration, or a server that sends no or a wrong Content-Type.
HARMLESS = (CharacterEncodingOverride, NonXMLContentType)


class FeedError(Exception):
    """The bytes are not a feed we can read; the message says why."""


@dataclass(frozen=True)
class FeedJob:
    """Everything needed to turn one fetched body into items."""

    source: str
    tag: str
    rules: tuple[tuple[str, str], ...]
    body: bytes
    headers: dict[str, str]
    location: str
    #: When this run first saw the feed (RFC 3339); the date of undated entries.
    seen_at: str
    #: Whether the source still has items stored before migration 3, which its entries may claim
    #: (then each item carries its :func:`qsite.pipeline.news.legacy.legacy_id`).
    legacy: bool = True


@dataclass
class FeedResult:
    """What :func:`read_feed` made of one body: items, or an error."""

    items: list[Item] = field(default_factory=list)
    #: Entries dropped because they had no usable link (reported as ``skipped_no_link``).
    skipped: int = 0
    #: Entries with nothing in them (:func:`qsite.pipeline.news.normalise.is_empty`): no stories, so not
    #: skipped ones either (reported as ``empty``).
    empty: int = 0
    warning: str | None = None
    error: str | None = None


def parse(body: bytes, headers: dict[str, str] | None = None):
    """feedparser's reading of ``body``; raise :class:`FeedError` if it is not a usable feed.

    ``headers`` are the HTTP response headers (for the declared charset, and a
    ``Content-Location``). The URL the body came from is not given to
    feedparser: relative links are resolved later, against it, by
    :func:`qsite.pipeline.news.urls.canonical_url` (feedparser would resolve every URI
    in the document, a fifth of its parse time). The result's
    ``encoding_warning`` says when the document's own encoding had to win
    (:mod:`qsite.pipeline.news.encoding`).
    """
    response_headers = {name.lower(): value for name, value in (headers or {}).items()}
    parsed = _feedparser(body, response_headers)
    check = check_encoding(body, parsed.get("encoding"))
    if check.text is not None:
        # Read again from the text as the document declares it; the HTTP charset is left out.
        headers_without_type = {k: v for k, v in response_headers.items() if k != "content-type"}
        parsed = _feedparser(check.text.encode("utf-8"), headers_without_type)
    parsed["encoding_warning"] = check.warning
    if parsed.entries:
        return parsed
    problem = _problem(parsed)
    if not parsed.get("version"):
        kind = response_headers.get("content-type", "").split(";")[0].strip()
        details = [f"content type {kind}"] if kind else []
        details += [f"{problem}"] if problem else []
        raise FeedError("not an RSS or Atom feed" + (f" ({'; '.join(details)})" if details else ""))
    if problem:
        raise FeedError(f"not a readable feed: {problem}")
    return parsed


class InvalidReference(ValueError):
    """The document refers to characters that do not exist (see :func:`_valid_references`)."""


def _feedparser(body: bytes, response_headers: dict[str, str]):
    """The parsed feed; one that fails on references to no character is mended (:func:`_valid_references`) and read again.

    Mended only after a failure: the same text in a CDATA section or a comment is no
    reference at all, and a well-formed feed that holds it must not be called broken.
    """
    try:
        return _parse(body, response_headers)
    except FeedError:
        body, mended = _valid_references(body)
        if not mended:
            raise
    parsed = _parse(body, response_headers)
    if _problem(parsed) is None:
        # Mended, the document may be well-formed; as sent it was not, and the source is told so.
        parsed["bozo"] = 1
        parsed["bozo_exception"] = InvalidReference(f"character references to no character, read as U+FFFD: {mended}")
    return parsed


def _parse(body: bytes, response_headers: dict[str, str]):
    try:
        # HTML inside entries is made plain text later (qsite.pipeline.text), so feedparser's own
        # (slow) sanitising and link rewriting of that HTML would be wasted work.
        return feedparser.parse(
            io.BytesIO(body), response_headers=response_headers, sanitize_html=False, resolve_relative_uris=False
        )
    except MemoryError:
        raise  # past a pool worker's memory limit: the pool names the limit (qsite.pipeline.news.parse_pool)
    except Exception as exc:  # feedparser's failure modes are not a documented set
        raise FeedError(f"feed could not be parsed: {type(exc).__name__}: {exc}") from None


#: A numeric character reference as feedparser's lenient parser (sgmllib) reads one: decimal or hex, with its ``;``.
_REFERENCE = re.compile(rb"&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));")
#: U+FFFD REPLACEMENT CHARACTER, what a reference to no character becomes.
_REPLACEMENT = b"&#xFFFD;"


def _valid_references(body: bytes) -> tuple[bytes, int]:
    """``body`` with every reference to a surrogate (U+D800 to U+DFFF) or past U+10FFFF made ``&#xFFFD;``.

    Such a reference names no character. The XML parser refuses it (the feed is
    not well-formed), and feedparser's lenient parser, which then reads the
    document, makes each reference a character with ``chr`` and encodes it as
    UTF-8 (``feedparser.mixin.handle_charref``, feedparser 6.0): a surrogate
    raises UnicodeEncodeError, ``&#x110000;`` ValueError, ``&#99999999999;``
    OverflowError, and the whole feed was lost for one bad title. The
    replacement keeps the feed's other entries and shows where the text was
    broken, as a decoder does with bytes it cannot read. Every other reference
    is left as written. References are ASCII, so they are found in the bytes of
    any encoding that keeps ASCII as it is; a UTF-16 or UTF-32 document (told
    by its byte-order mark) is read as text, mended and written back. Also
    returns how many references were replaced.
    """
    encoding, mark = read_bom(body)
    if encoding and encoding.startswith(("utf-16", "utf-32")):
        try:
            text = body[len(mark):].decode(encoding)
        except UnicodeDecodeError:
            return body, 0  # feedparser cannot read it as text either
        mended, count = _valid_references(text.encode("utf-8"))
        return (mark + mended.decode("utf-8").encode(encoding), count) if count else (body, 0)
    if b"&#" not in body:
        return body, 0
    mended = _REFERENCE.sub(_mend, body)
    return mended, mended.count(_REPLACEMENT) - body.count(_REPLACEMENT)


def _mend(reference: re.Match) -> bytes:
    hexadecimal, decimal = reference.groups()
    digits = (hexadecimal or decimal).lstrip(b"0")
    # Seven digits hold U+10FFFF in either base; more would only cost int() time (or its 4300-digit limit).
    if len(digits) > 7:
        return _REPLACEMENT
    code = int(digits or b"0", 16 if hexadecimal else 10)
    return _REPLACEMENT if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF else reference.group(0)


def feed_context(parsed, job: FeedJob) -> FeedContext:
    """What the entries of ``parsed`` are normalised with: the base for relative links, the feed's own URLs."""
    location = parsed.get("headers", {}).get("content-location")
    base = location or (job.location if is_web_link(job.location) else None)
    channel = parsed.feed.get("link") or ""
    selves = [link.get("href") for link in parsed.feed.get("links") or () if link.get("rel") == "self"]
    if base is None:
        # A feed read from a file (feedparser already applied any xml:base) has only its own
        # channel link, else its rel="self" link, left to resolve relative item links against.
        base = next((link for link in [channel, *selves] if is_web_link(link)), None)
    # The document's own URLs: where it was fetched, where it says it lives, and the base
    # feedparser resolved its links against (its xml:base, else Content-Location), which is
    # what an empty href="" becomes (WordPress: .../wp-atom.php).
    own = {canonical_url(job.location)} if is_web_link(job.location) else set()
    own |= {canonical_url(link, base) for link in [location, *selves, *_document_bases(parsed.feed)]}
    own.discard(None)
    atom = parsed.get("version", "").startswith("atom")
    return FeedContext(
        tag=job.tag,
        rules=job.rules,
        base=base,
        first_seen=parse_time(job.seen_at),
        own_urls=frozenset(own),
        dates=DateReader(parsed.feed.get("language")),
        legacy=job.legacy,
        shared_links=shared_links(parsed.entries, base),
        logos=feed_logos(parsed.feed, base),
        # RFC 4287 4.2.1: an Atom feed's authors are its entries' when they name none; RSS has no such rule
        authors=entry_authors(parsed.feed, atom=True) if atom else (),
        atom=atom,
    )


def _document_bases(feed) -> set[str]:
    """The bases feedparser resolved the feed's own elements against (it keeps them only in each ``*_detail``)."""
    details = [value for key, value in feed.items() if key.endswith("_detail") and isinstance(value, dict)]
    return {detail["base"] for detail in details if isinstance(detail.get("base"), str) and detail["base"]}


def prepare() -> None:
    """Load what every parse needs once (the tracking rules, about 0.2 s), so that forked workers inherit it."""
    providers()


def read_feed(job: FeedJob) -> FeedResult:
    """Parse and normalise one fetched body; never raises, an unusable feed comes back as ``error``."""
    try:
        parsed = parse(job.body, job.headers)
    except FeedError as exc:
        return FeedResult(error=str(exc))
    listed = len(parsed.entries)
    if listed > MAX_ENTRIES:
        parsed["entries"] = parsed.entries[:MAX_ENTRIES]  # all that is read below, feed_context included
    context = feed_context(parsed, job)
    result = FeedResult()
    for entry in parsed.entries:
        if is_empty(entry):
            result.empty += 1
            continue
        item = normalise_entry(entry, context)
        if item is None:
            result.skipped += 1
        else:
            result.items.append(item)
    problem = _problem(parsed)
    if problem and not result.items:
        # Broken XML whose "entries" hold no usable link is not a feed we can read: failing
        # the source keeps it retried, instead of stored as unchanged and healthy.
        return FeedResult(error=f"not a readable feed: {problem}; none of its {len(parsed.entries)} entries had a usable link")
    warnings = [parsed["encoding_warning"]] if parsed.get("encoding_warning") else []
    if problem:
        warnings.append(f"feed is not well-formed ({problem}); read {len(parsed.entries)} entries anyway")
    if listed > MAX_ENTRIES:
        warnings.append(f"the feed lists {listed:,} entries; read the first {MAX_ENTRIES:,}, {listed - MAX_ENTRIES:,} left out")
    result.warning = "; ".join(warnings) or None
    return result


def _problem(parsed) -> Exception | None:
    problem = parsed.get("bozo_exception") if parsed.get("bozo") else None
    return None if isinstance(problem, HARMLESS) else problem
