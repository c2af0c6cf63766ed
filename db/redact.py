"""Locations as they may be stored, logged or shown: no credentials, no local paths.

A configured source may carry credentials (``https://user:pass@host/export.json``,
``?token=...``, ``?apikey=...``) and a file source is a path on this machine.
Everything the pipeline stores (``sources``, ``ingest_runs``,
``export_state``) is public through Datasette, and logs and ``qsite status``
are read by more people than the config; so each of them gets:

- :func:`redact_url`: the URL without userinfo, the value of every
  credential-like query (or fragment) parameter replaced with ``REDACTED``,
  everything else as written, so researchers keep the publisher's public URL;
- :func:`public_location`: that for a URL, the file name for a path;
- :func:`redact_text`: the same inside free text (error messages), where a
  URL is redacted and an absolute path cut to its file name.

Written with :mod:`urllib.parse` rather than yarl or furl: those re-encode a
query they rebuild, and the URL a researcher sees should be the one the
publisher wrote, bar the secrets. Dependency-free (the standard library), as
everything in ``db/`` is, so that the config, the pipeline, the service and
the migration that cleans rows stored before all use the one rule.
"""

from __future__ import annotations

import logging
import re
from pathlib import PurePath
from urllib.parse import unquote, urlsplit, urlunsplit

#: What a credential's value is replaced with.
REDACTED = "REDACTED"

#: Parameter names (lower case, without ``-`` and ``_``) whose value is a credential.
CREDENTIAL_NAMES = frozenset(
    {
        "key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "signature", "sig",
        "auth", "authorization", "credential", "credentials", "session", "sessionid", "jwt",
    }
)
#: ... and endings of such names (``access_token``, ``client_secret``, ``X-Amz-Signature``).
CREDENTIAL_ENDINGS = ("token", "secret", "password", "signature", "credential", "apikey", "accesskey", "privatekey", "secretkey")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
#: An absolute POSIX path (at least two segments) in free text, not part of a URL.
_PATH = re.compile(r"(?<![\w.:/~-])(/[^\s'\"/<>]+)+/([^\s'\"/<>]+)")


def is_credential(name: str) -> bool:
    """Whether a query parameter called ``name`` (percent-encoded or not) carries a credential."""
    plain = re.sub(r"[-_.\s]", "", unquote(name)).lower()
    return plain in CREDENTIAL_NAMES or plain.endswith(CREDENTIAL_ENDINGS)


def _redact_parameters(text: str) -> str:
    """``a=1&token=x`` -> ``a=1&token=REDACTED``: each pair kept byte for byte unless its name is a credential."""
    parts = []
    for part in text.split("&"):
        name, equals, _value = part.partition("=")
        parts.append(f"{name}={REDACTED}" if equals and is_credential(name) else part)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` without userinfo and with credential parameters' values replaced by ``REDACTED``.

    Anything that is not a URL with a host is returned as it is.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced [ in the host: not a URL anyone can fetch
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = _redact_parameters(parts.query) if parts.query else ""
    fragment = _redact_parameters(parts.fragment) if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def is_url(location: str) -> bool:
    return bool(_URL.fullmatch(location))


def public_location(location: str) -> str:
    """What may be shown of a configured source: the redacted URL, or a path's file name."""
    if is_url(location):
        return redact_url(location)
    return PurePath(location).name or location


def redact_urls(text: str) -> str:
    """``text`` with every URL in it redacted (paths kept: for logs, which operators read)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted and every absolute path cut to its file name (for what is public)."""
    return _PATH.sub(lambda match: match.group(2), redact_urls(text))


class RedactingFilter(logging.Filter):
    """A handler filter: every record's message and traceback with its URLs redacted (:func:`redact_urls`).

    On the handlers, not a logger, so that it sees every library's records
    (httpx logs each request's URL, query string included).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_urls(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_urls(record.exc_text)
        return True
