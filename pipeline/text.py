"""Feed text as one line of plain text: HTML made text, plain text left as written.

Promises: a ``text/plain`` value (feedparser's ``title_detail``, ``summary_detail``,
``content[].type``) is already the text, its entities decoded once by the XML parser: it is only
re-spaced, never decoded again (``std::vector&lt;bool&gt;`` stays ``std::vector<bool>``). Only HTML
(``text/html``, ``application/xhtml+xml``) goes through :func:`html_to_text`, which parses with lxml
(libxml2's HTML parser closes a self-closed ``<iframe/>`` or ``<textarea/>`` where it stands, as the
author meant, where an HTML5 parser swallows the rest as raw text), drops embedded and scripted
content with everything inside it, separates words at every block-level element and not at inline
ones (``T<sub>1</sub>`` is ``T1``).

A summary is plain text whatever the feed did: :func:`plain_text` reads again, as HTML, text that
still carries markup once read (HTML escaped twice, as Reddit's feeds send, or HTML typed as plain
text). Never the text of a code sample (``<pre>``, ``<code>``, ``<kbd>``, ``<samp>``: :data:`LITERAL`),
which is an example of markup a second read would delete.

Must not change: that exception never lets markup through. The text around code samples is read
again as one text, each sample an opaque placeholder (a tag spanning a sample is dropped with it);
a code element the feed never closed is no code sample, nor is what an ``<xmp>`` or ``<textarea>``
inside one shows; and if markup still stands where a sample meets the text beside it
(``&lt;<code>img src=x onerror=y&gt;</code>``), the whole value is read again with no exception.
"""

from __future__ import annotations

import re
import unicodedata

import lxml.etree
import lxml.html
import lxml.html.defs

#: Types whose value is markup; anything else feedparser reports is text.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "html", "xhtml"})

#: Elements whose content is not text a reader sees in place (or is a fallback for what was embedded).
DROPPED = frozenset(
    "script style noscript iframe template head title object embed applet frame frameset noembed noframes "
    "svg math canvas audio video select button".split()
)
#: Block-level elements (HTML Living Standard, "rendering" section) and line breaks: each ends a word.
BLOCKS = frozenset(
    "address article aside blockquote br caption center dd details dialog dir div dl dt fieldset figcaption "
    "figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr legend li listing main menu nav ol p plaintext pre "
    "section summary table tbody td tfoot th thead tr ul xmp textarea option".split()
)

#: Code samples (preformatted text, code, keyboard input, program output): their text is code as written,
#: markup-like text included, and is never read as HTML again (:func:`plain_text`), provided the feed closed
#: the element (:func:`_read_html`). ``<xmp>`` and ``<textarea>`` are not among them: what they show is taken
#: as markup all the same (tests/data/syntheticfeeds).
LITERAL = frozenset({"pre", "code", "kbd", "samp"})
#: Elements whose content libxml2 reads as raw text (tags in it are text) that is markup all the same: their
#: text is never a code sample's, even inside one (``<code><xmp><b>x</b></xmp></code>`` is ``x``).
RAW = frozenset({"xmp", "textarea", "plaintext"})

#: Written after the markup, inside the wrapper, to learn which elements the markup left open: an element
#: still open at the end of the markup holds it (lxml closes what is left open only at the wrapper's end).
#: An unknown element, so that it closes nothing and is closed by nothing the feed wrote.
_END_TAG = "qsite-end"
_END = f"<{_END_TAG}></{_END_TAG}>"
#: What a raw-text element (:data:`RAW`) left open swallows as its text: the mark and the wrapper's end.
_SWALLOWED = _END + "</div>"

_PARSER = lxml.html.HTMLParser(
    recover=True, no_network=True, remove_comments=True, remove_pis=True, default_doctype=False, encoding="utf-8"
)


#: Dropped from plain text: U+FEFF and the C0 and C1 control characters that are not whitespace (NUL,
#: U+0001, DEL, U+0080...). They mean nothing on a page, an XML document cannot hold most of them
#: (the Atom feed would leave them out and disagree with the JSON), and NUL ends a C string.
#: Control characters that are whitespace (tab, line feed, U+001C to U+001F, U+0085) are spaces.
_INVISIBLE = dict.fromkeys(
    [0xFEFF, *(code for code in range(0xA0) if unicodedata.category(chr(code)) == "Cc" and not chr(code).isspace())]
)


def one_line(text: str | None) -> str:
    """``text`` with every run of whitespace made one space, trimmed, with no U+FEFF and no control character.

    U+FEFF (a byte order mark) inside text is an editor's leftover, invisible
    but not whitespace (FC Utrecht's ``Column: \\ufeffWat een wedstrijd``); as a
    joiner it has been deprecated since Unicode 3.2 (U+2060 took its place).
    Control characters (:data:`_INVISIBLE`) are dropped, so plain text never
    holds one, whichever way it was made.
    """
    return " ".join(text.translate(_INVISIBLE).split()) if text else ""


def html_to_text(markup: str | None) -> str:
    """HTML to one line of plain text (see the module's docstring for the rules)."""
    return one_line("".join(text for text, _ in _read_html(markup)))


def _read_html(markup: str | None) -> list[tuple[str, bool]]:
    """The text of ``markup`` read as HTML, in runs, each with whether it is shown as written (:data:`LITERAL`).

    Runs of one kind are joined; spaces stand where block elements end words.
    Text is shown as written only inside a code element the markup closed
    and outside any :data:`RAW` element; if the end of the markup was
    swallowed (an unclosed comment, attribute or raw-text element) so that it
    cannot be told which elements were closed, no text is.
    """
    if not markup:
        return []
    if "<" not in markup and "&" not in markup:
        return [(markup, False)]
    # Bytes, not str: lxml refuses a str that carries an encoding declaration.
    body = markup.replace("\x00", "").encode("utf-8", "surrogatepass")
    try:
        root = lxml.etree.fromstring(b"<div>" + body + _END.encode() + b"</div>", _PARSER)
    except (lxml.etree.LxmlError, ValueError):
        root = None
    if root is None:
        return [(markup, False)]
    # The last element in document order is the end mark, unless something swallowed it; every element that
    # holds it was left open by the feed. An unclosed <code> would otherwise make all that follows it a code
    # sample, markup included, and so a way around plain_text's second read.
    last = root
    while len(last):
        last = last[-1]
    if last.tag == _END_TAG and last.text is None and last.tail is None:
        left_open = set(last.iterancestors())
        samples = {element for element in root.iter(*LITERAL) if element not in left_open}
    else:
        samples = set()
    runs: list[tuple[list[str], bool]] = []  # each run's pieces, joined once at the end
    literal = 0  # how many code samples the walk is inside
    raw = 0  # how many raw-text elements the walk is inside

    def add(text: str) -> None:
        shown_as_written = literal > 0 and not raw
        if runs and runs[-1][1] == shown_as_written:
            runs[-1][0].append(text)
        else:
            runs.append(([text], shown_as_written))

    walker = lxml.etree.iterwalk(root, events=("start", "end"))
    for event, element in walker:
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in DROPPED:
                walker.skip_subtree()
                add(" ")
                continue
            if tag in BLOCKS:
                add(" ")
            literal += element in samples
            raw += tag in RAW
            if element.text:
                text = element.text
                if tag in RAW and text.endswith(_SWALLOWED):  # left open, it ran to the end of the input
                    text = text[: -len(_SWALLOWED)]
                add(text)
        else:
            if tag in BLOCKS:
                add(" ")
            literal -= element in samples
            raw -= tag in RAW
            if element.tail:
                add(element.tail)
    return [("".join(pieces), shown_as_written) for pieces, shown_as_written in runs]


#: The elements HTML defines (lxml's list), longest name first so that ``<br`` is not read as ``<b``.
_HTML_NAMES = "|".join(sorted(lxml.html.defs.tags, key=len, reverse=True))
#: What says text is still markup: a comment (an unclosed one runs to the end, as in HTML), or a
#: closing tag, a self-closed tag or a tag with attributes, of an element HTML defines. A bare ``<canvas>`` or ``std::vector<bool>`` in text is
#: taken as written: text that mentions a tag rarely closes it or gives it attributes.
_MARKUP = re.compile(
    rf"<!--|</(?:{_HTML_NAMES})\s*>|<(?:{_HTML_NAMES})(?:\s+[^<>]*?)?\s*/>|<(?:{_HTML_NAMES})\s+[a-z-]+\s*=[^<>]*>",
    re.IGNORECASE | re.DOTALL,
)
#: Reads as HTML at most this many times: HTML escaped thrice is as far as publishers go.
_MAX_READS = 3


def has_markup(text: str) -> bool:
    """Whether ``text`` (already plain text) still holds HTML markup or comments (see :data:`_MARKUP`)."""
    return "<" in text and _MARKUP.search(text) is not None


def plain_text(text: str, kind: str | None = None) -> str:
    """A feed value as one line of plain text with no markup left in it, whatever the feed did.

    ``text`` is read as HTML if ``kind`` is an HTML type (:func:`text_of`); then,
    while what is not a code sample (:data:`LITERAL`) still holds markup
    (:func:`has_markup`), that text is read as HTML again, as one text with each
    code sample in it a placeholder (at most :data:`_MAX_READS` times). The code
    samples' text is put back as written. Markup left where a sample meets
    the text beside it voids the exception: the whole value is read again.
    """
    samples: list[str] = []  # each code sample's text, as written, in the order met
    put_back: set[int] = set()  # the samples already put back where their placeholder stood

    def sample(found: re.Match) -> str:
        """The code sample a placeholder stands for, at its first placeholder only; nothing for any other.

        lxml never repeats text, so only a feed that wrote noncharacters can make a placeholder repeat, or
        name no sample: each copy of a sample's text would otherwise be in the result.
        """
        index = int(found[1])
        if index >= len(samples) or index in put_back:
            return ""
        put_back.add(index)
        return samples[index]

    def veil(runs: list[tuple[str, bool]]) -> str:
        """The ``runs`` joined, each code sample's text replaced by a placeholder of its index in ``samples``."""
        parts = []
        for run, shown_as_written in runs:
            # What one_line will drop is dropped before has_markup looks: <im\x01g onerror=...> would become a tag
            # only after the last look (U+0001 written raw, or &#1; decoded by a read).
            run = run.translate(_INVISIBLE)
            if shown_as_written:
                parts.append(f"{_OPEN}{len(samples)}{_CLOSE}")
                # A code sample found at a later read may hold the placeholders of earlier ones.
                samples.append(_PLACEHOLDER.sub(sample, run))
            else:
                parts.append(run)
        return "".join(parts)

    veiled = veil(_read_html(text) if _is_html(kind) else [(text, False)])
    for _ in range(_MAX_READS):
        if not has_markup(veiled):
            break
        veiled = veil(_read_html(veiled))
    if not samples:
        return one_line(veiled)
    pieces: list[str] = []
    spans: list[tuple[int, int]] = []  # where each code sample's text stands in the result
    length = start = 0
    for found in _PLACEHOLDER.finditer(veiled):
        pieces.append(veiled[start : found.start()])
        length += found.start() - start
        written = sample(found)
        pieces.append(written)
        spans.append((length, length + len(written)))
        length += len(written)
        start = found.end()
    pieces.append(veiled[start:])
    result = "".join(pieces)
    if _markup_across(result, spans):
        # Markup made of a code sample and the text beside it (or of two samples) is no code sample:
        # read it all again as HTML, as if there were none.
        for _ in range(_MAX_READS):
            if not has_markup(result):
                break
            result = html_to_text(result)
    return one_line(result)


#: A code sample's placeholder while the text around it is read again (:func:`plain_text`): its index between
#: two Unicode noncharacters, which are for a program's internal use and mean nothing in a feed's text.
#: libxml2 keeps them as text; inside a tag, an attribute or anything dropped, they go with it.
_OPEN, _CLOSE = "\ufdd0", "\ufdd1"
_PLACEHOLDER = re.compile(f"{_OPEN}([0-9]{{1,9}}){_CLOSE}")


def _markup_across(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether markup (:data:`_MARKUP`) in ``text`` runs across an edge of one of ``spans`` (in order, apart).

    A match of :data:`_MARKUP` holds ``<`` only where it starts, so one across an edge starts at the
    last ``<`` before it, after the edge before (one starting earlier runs across that one too):
    each stretch of ``text`` is searched once, however many code samples there are.
    """
    previous = 0
    for edges in spans:
        for edge in edges:
            start = text.rfind("<", previous, edge)
            if start >= 0 and (match := _MARKUP.match(text, start)) is not None and match.end() > edge:
                return True
            previous = edge
    return False


def _is_html(kind: str | None) -> bool:
    return bool(kind) and kind.lower() in HTML_TYPES


def text_of(value: str | None, kind: str | None) -> str:
    """A feed value as plain text: :func:`html_to_text` if ``kind`` is an HTML type, else as written."""
    if _is_html(kind):
        return html_to_text(value)
    return one_line(value)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters on a word boundary, with an ellipsis if cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(_ENDING_PUNCTUATION) + "…"


_ENDING_PUNCTUATION = " \t,;:-–—([{'\"“‘"
