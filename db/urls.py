"""The public form of a configured address: what may be shown of a feed or export location.

Configured URLs can carry credentials (``https://user:pass@host/feed?token=...``)
and local sources are paths on the server. Wherever a location is shown to
the public (``GET /api/v1/sources``), it is shown in this form: without
userinfo, with the value of every credential-like query parameter replaced
by ``REDACTED``, and a local file by its file name only. Shared here, beside
the data model, so the pipeline can store the same form and the service can
serve it.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "REDACTED"

#: The words of a query parameter's name that make its value a secret: ``key``, ``api_key``,
#: ``apiKey``, ``access_token``, ``client_secret``, ``X-Amz-Signature``, ``auth``, ``session_id``...
#: Whole words only, so that ``author``, ``keyword`` or ``monkey`` stay as published.
CREDENTIAL_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "signature", "sig", "auth",
     "authorization", "credential", "credentials", "session", "sessionid"}
)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def is_credential_parameter(name: str) -> bool:
    """Whether a query parameter called ``name`` carries a secret (see :data:`CREDENTIAL_WORDS`)."""
    words = _NOT_ALNUM.split(_CAMEL_BOUNDARY.sub("_", name).lower())
    return any(word in CREDENTIAL_WORDS for word in words) or "".join(words) in CREDENTIAL_WORDS


def _redact_query(query: str) -> str:
    """``query`` with credential-like values replaced; every other byte kept as it was."""
    parts = []
    for part in query.split("&"):
        name, equals, _value = part.partition("=")
        if is_credential_parameter(unquote(name.replace("+", " "))):
            part = f"{name}={REDACTED}" if equals else name
        parts.append(part)
    return "&".join(parts)


def public_location(location: str) -> str:
    """``location`` as it may be shown publicly (see the module docstring)."""
    parts = urlsplit(location)
    if parts.scheme.lower() not in ("http", "https"):
        # a path (or file: URL) on this machine: its file name says which one without saying where
        return PurePath(unquote(parts.path) if parts.scheme.lower() == "file" else location).name
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # out of range or not a number: kept as written, so the config error about it can show it
        port = parts.netloc.rpartition("@")[2].rpartition(":")[2] or None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, _redact_query(parts.query), parts.fragment))
