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
"""

from __future__ import annotations

import lxml.etree
import lxml.html

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

_PARSER = lxml.html.HTMLParser(
    recover=True, no_network=True, remove_comments=True, remove_pis=True, default_doctype=False, encoding="utf-8"
)


def one_line(text: str | None) -> str:
    """``text`` with every run of whitespace made one space, trimmed."""
    return " ".join(text.split()) if text else ""


def html_to_text(markup: str | None) -> str:
    """HTML to one line of plain text (see the module's docstring for the rules)."""
    if not markup:
        return ""
    if "<" not in markup and "&" not in markup:
        return one_line(markup)
    # Bytes, not str: lxml refuses a str that carries an encoding declaration.
    body = markup.replace("\x00", "").encode("utf-8", "surrogatepass")
    try:
        root = lxml.etree.fromstring(b"<div>" + body + b"</div>", _PARSER)
    except (lxml.etree.LxmlError, ValueError):
        root = None
    if root is None:
        return one_line(markup)
    chunks: list[str] = []
    walker = lxml.etree.iterwalk(root, events=("start", "end"))
    for event, element in walker:
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in DROPPED:
                walker.skip_subtree()
                chunks.append(" ")
                continue
            if tag in BLOCKS:
                chunks.append(" ")
            if element.text:
                chunks.append(element.text)
        else:
            if tag in BLOCKS:
                chunks.append(" ")
            if element.tail:
                chunks.append(element.tail)
    return one_line("".join(chunks))


def text_of(value: str | None, kind: str | None) -> str:
    """A feed value as plain text: :func:`html_to_text` if ``kind`` is an HTML type, else as written."""
    if kind and kind.lower() in HTML_TYPES:
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
