"""Text as it may be logged or shown: no credentials of a URL in it, and for the public no local paths.

:func:`qsite.db.urls.public_location` is the one rule for a configured location
(no userinfo, credential-like query values ``REDACTED``, a file by its name).
This module applies it where locations are not alone but inside text:

- :func:`redact_url`: one URL of any scheme (a ``redis://`` storage in a
  config error loses its userinfo and credential-like parameters too);
- :func:`redact_urls`: every URL inside free text, for logs (which operators
  read: local paths stay), and :class:`qsite.config.logs.RedactingFilter`, which does that to
  every log record;
- :func:`redact_text`: that, and every absolute path cut to its file name,
  for error messages stored where Datasette shows them.

Standard library only, so the
config, the pipeline, the service and the migration that cleans rows stored
before all use the one rule.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from qsite.db.urls import public_location, redact_parameters

#: A URL: a scheme, ``://`` and what follows. A scheme starts only where no scheme character
#: stands before it, so a long run of letters with no ``://`` is read once, not once from each of
#: its letters (a 40,000-letter HTTP method took 1.5 s to log, and held the server's worker).
#: It ends before trailing punctuation (``url: more than 5 redirects``, ``(see url).``), which
#: stays in the text; giving those characters back is one step each, so it stays linear.
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;!?)]")
#: An absolute POSIX path (at least two segments) in free text, not part of a URL.
_PATH = re.compile(r"(?<![\w.:/~-])(/[^\s'\"/<>]+)+/([^\s'\"/<>]+)")


def redact_url(url: str) -> str:
    """``url`` without credentials: :func:`~qsite.db.urls.public_location` for http(s); for others userinfo removed
    and credential-like query and fragment values replaced (:func:`~qsite.db.urls.redact_parameters`)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ in the host: not a URL anyone can fetch
        return url
    if not parts.scheme or not parts.netloc:
        return url
    if parts.scheme.lower() in ("http", "https"):
        return public_location(url)
    query, fragment = redact_parameters(parts.query, parts.fragment)  # redis://host/0?password=...
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query=query, fragment=fragment))


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (paths kept: for logs, which operators read)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted and every absolute path cut to its file name (for what is public)."""
    return _PATH.sub(lambda match: match.group(2), redact_urls(text))
