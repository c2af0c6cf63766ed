"""Feed text as one line of plain text: HTML made text, plain text left as written.

feedparser hands over each text value with its type (``title_detail``,
``summary_detail``, ``content[].type``). A ``text/plain`` value is already
the text (its entities were decoded once, by the XML parser): it is only
re-spaced, never decoded again, so ``std::vector&lt;bool&gt;`` in the feed
stays ``std::vector<bool>`` and ``AT&amp;amp;T`` stays ``AT&amp;T``. Only
HTML (``text/html``, ``application/xhtml+xml``) goes through
:func:`html_to_text`.

HTML is parsed by lxml (libxml2's HTML parser), which, unlike an HTML5
parser, closes a self-closed ``<iframe/>``, ``<textarea/>``, ``<xmp/>`` or
``<noscript/>`` where it stands, as the author meant, instead of swallowing
the rest of the summary as raw text. Embedded and scripted content
(``script``, ``style``, ``noscript``, ``iframe``, ``object``...) is dropped with
everything inside it; every block-level element separates words; inline
elements do not (``T<sub>1</sub>`` is ``T1``).

A summary is plain text whatever the feed did: :func:`plain_text` reads again,
as HTML, text that still carries markup once read (HTML escaped twice, as
Reddit's feeds send ``&amp;lt;!-- SC_OFF --&amp;gt;&amp;lt;div class="md"&amp;gt;``
inside an XHTML description, or HTML in a value typed as plain text). Never
the text of a code sample, though: what HTML shows inside ``<pre>``,
``<code>``, ``<kbd>`` or ``<samp>`` is code as written, so an escaped
``&lt;iframe ...&gt;&lt;/iframe&gt;`` there (dustri.org's snippet to embed a
video) is an example of markup, which a second read deleted
(:data:`LITERAL`). Escaped twice, a code sample is text at the first read
and an element at the second, whose text then stays as written.
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
#: markup-like text included, and is never read as HTML again (:func:`plain_text`). ``<xmp>`` and
#: ``<textarea>`` are not among them: what they show is taken as markup all the same (tests/data/syntheticfeeds).
LITERAL = frozenset({"pre", "code", "kbd", "samp"})

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
    """
    if not markup:
        return []
    if "<" not in markup and "&" not in markup:
        return [(markup, False)]
    # Bytes, not str: lxml refuses a str that carries an encoding declaration.
    body = markup.replace("\x00", "").encode("utf-8", "surrogatepass")
    try:
        root = lxml.etree.fromstring(b"<div>" + body + b"</div>", _PARSER)
    except (lxml.etree.LxmlError, ValueError):
        root = None
    if root is None:
        return [(markup, False)]
    runs: list[tuple[list[str], bool]] = []  # each run's pieces, joined once at the end
    literal = 0  # how many literal elements the walk is inside

    def add(text: str) -> None:
        if runs and runs[-1][1] == (literal > 0):
            runs[-1][0].append(text)
        else:
            runs.append(([text], literal > 0))

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
            literal += tag in LITERAL
            if element.text:
                add(element.text)
        else:
            if tag in BLOCKS:
                add(" ")
            literal -= tag in LITERAL
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

    ``text`` is read as HTML if ``kind`` is an HTML type (:func:`text_of`); then
    any of it that still holds markup (:func:`has_markup`) is read as HTML
    again, until none is left (at most :data:`_MAX_READS` times), except the
    text of code samples (:data:`LITERAL`), which the HTML shows as written.
    """
    runs = _read_html(text) if _is_html(kind) else [(text, False)]
    return one_line(_reread(runs, _MAX_READS))


def _reread(runs: list[tuple[str, bool]], reads: int) -> str:
    """The ``runs`` of text joined, each not shown as written read as HTML while it holds markup (up to ``reads`` times)."""
    return "".join(
        _reread(_read_html(text), reads - 1) if reads and not literal and has_markup(text) else text for text, literal in runs
    )


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
