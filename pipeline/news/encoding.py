"""Whether feedparser decoded a feed as the document says it is encoded, and the text if not.

feedparser follows RFC 3023: an HTTP ``charset`` wins over the XML
declaration, and when the declared encoding fails on the bytes it falls back
to another single-byte one. Both give mojibake on real feeds: a windows-1251
feed served as ``text/html; charset=ISO-8859-1`` is read as Latin-1; a feed
declaring ``euc-kr`` that uses CP949's extra syllables (as Korean Windows
writes it) fails strict EUC-KR and is read as windows-1252. feedparser does
not always say so (with a ``text/html`` header it reports only
``NonXMLContentType``), so the check compares the encoding it used with the
one the document declares (byte-order mark, else XML declaration, else
UTF-8, the XML default).

Labels are read as browsers read them (the WHATWG Encoding Standard, by
w3lib's ``resolve_encoding``): ``euc-kr`` means CP949, ``shift_jis`` CP932,
``gb2312`` GB18030, ``iso-8859-1`` windows-1252, and so on. When the
document's own encoding decodes its bytes, the feed is read again from that
text; a real contradiction (not just a superset) is reported as a warning
on the source. One exception: bytes that are valid UTF-8 and were read as
UTF-8 (by an HTTP header) stay so, since a server that re-encodes a feed
often leaves its old declaration behind, and valid UTF-8 is rarely an accident.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from w3lib.encoding import read_bom, resolve_encoding

#: The XML declaration's encoding, at the very start of the document (after a BOM, if any).
_DECLARATION = re.compile(rb"""^\s*<\?xml[^>]{0,200}?\bencoding\s*=\s*["']([A-Za-z][A-Za-z0-9._:-]{0,40})["']""")


@dataclass(frozen=True)
class EncodingCheck:
    """The outcome: the document's text when it must be read again, and a warning for the source."""

    text: str | None = None
    warning: str | None = None


def declared_encoding(body: bytes) -> tuple[str, str]:
    """The document's own encoding label and where it comes from (``BOM``, ``XML declaration``, ``default``)."""
    bom, _ = read_bom(body)
    if bom:
        return bom, "byte-order mark"
    match = _DECLARATION.match(body[:300])
    if match:
        return match.group(1).decode("ascii"), "XML declaration"
    return "utf-8", "default"


def _codec(label: str | None) -> str | None:
    try:
        return codecs.lookup(label).name if label else None
    except LookupError:
        return None


def check_encoding(body: bytes, used: str | None) -> EncodingCheck:
    """Compare feedparser's encoding ``used`` for ``body`` with the document's; see the module's docstring."""
    label, source = declared_encoding(body)
    wanted = _codec(resolve_encoding(label))
    used_codec = _codec(used)
    if wanted is None or used_codec is None or wanted == used_codec:
        return EncodingCheck()
    # A superset of what was used (windows-1252 for ISO-8859-1) is no contradiction, only a better reading.
    contradiction = _codec(resolve_encoding(used)) != wanted
    declared = f"declares {label}" if source != "default" else "declares no encoding (so UTF-8)"
    if used_codec == "utf-8" and _decodes(body, "utf-8"):
        return EncodingCheck(warning=f"the document {declared} but is UTF-8, as the server said; read as UTF-8")
    try:
        text = body.decode("utf-8-sig" if wanted == "utf-8" else wanted)
    except UnicodeDecodeError:
        if not contradiction:
            return EncodingCheck()
        return EncodingCheck(warning=f"the document {declared} but its bytes are not {label}; read as {used}")
    if not contradiction:
        return EncodingCheck(text=_redeclared(text)) if text != body.decode(used_codec, "replace") else EncodingCheck()
    return EncodingCheck(
        text=_redeclared(text),
        warning=f"the document {declared} but was read as {used}; read again as {wanted}",
    )


def _decodes(body: bytes, codec: str) -> bool:
    try:
        body.decode(codec)
    except UnicodeDecodeError:
        return False
    return True


def _redeclared(text: str) -> str:
    """``text`` with its XML declaration saying UTF-8, the encoding it is about to be given in."""
    text = text.lstrip("\ufeff")
    return re.sub(r"""^(\s*<\?xml[^>]{0,200}?\bencoding\s*=\s*["'])[^"']*""", r"\g<1>utf-8", text, count=1)
