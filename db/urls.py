"""The public form of a configured address: what may be shown of a feed or export location.

Configured URLs can carry credentials (``https://user:pass@host/feed?token=...``)
and local sources are paths on the server. Wherever a location is shown to
the public (``GET /api/v1/sources``), it is shown in this form: without
userinfo, with the value of every credential-like parameter of the query or
the fragment replaced by ``REDACTED``, and a local file by its file name only. Shared here, beside
the data model, so the pipeline can store the same form and the service can
serve it.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "REDACTED"

#: The words of a parameter's name that make its value a secret: ``key``, ``api_key``,
#: ``apiKey``, ``access_token``, ``client_secret``, ``X-Amz-Signature``, ``auth``, ``session_id``,
#: ``pass``, ``jwt``, ``csrf_token``, ``PHPSESSID``... Whole words only, so that ``author``,
#: ``keyword``, ``passage`` or ``monkey`` stay as published. The names and markers of Sentry's
#: default deny list, as schemathesis keeps it (``schemathesis/config/_output.py``:
#: ``DEFAULT_KEYS_TO_SANITIZE``, ``DEFAULT_SENSITIVE_MARKERS``), are all here, less the
#: addresses it also hides (``ip_address``, ``x_forwarded_for``), which are no credentials.
CREDENTIAL_WORDS = frozenset(
    {"key", "apikey", "privatekey", "token", "secret", "password", "passwd", "pwd", "pass", "passphrase",
     "signature", "sig", "hmac", "auth", "authorization", "credential", "credentials", "bearer", "jwt",
     "session", "sessionid", "sessid", "phpsessid", "jsessionid", "sid", "csrf", "xsrf", "csrftoken",
     "cookie", "otp"}
)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
#: One ``name=value`` pair of a query or fragment: it starts the text or follows ``&`` or ``;``
#: (and in a fragment ``?``, ``/``, ``#`` or ``!``: ``#/feed?token=...``, ``#!token=...``).
_QUERY_PAIR = re.compile(r"(?:^|(?<=[&;]))(?P<name>[^&;=]+)=(?P<value>[^&;]*)")
_FRAGMENT_PAIR = re.compile(r"(?:^|(?<=[&;?/#!]))(?P<name>[^&;=?/#!]+)=(?P<value>[^&;?/#!]*)")


def is_credential_parameter(name: str) -> bool:
    """Whether a parameter called ``name`` carries a secret (see :data:`CREDENTIAL_WORDS`)."""
    words = _NOT_ALNUM.split(_CAMEL_BOUNDARY.sub("_", name).lower())
    return any(word in CREDENTIAL_WORDS for word in words) or "".join(words) in CREDENTIAL_WORDS


def _redact_pairs(pattern: re.Pattern, text: str) -> str:
    def replace(match: re.Match) -> str:
        if is_credential_parameter(unquote(match.group("name").replace("+", " "))):
            return f"{match.group('name')}={REDACTED}"
        return match.group(0)

    return pattern.sub(replace, text)


def redact_parameters(query: str, fragment: str = "") -> tuple[str, str]:
    """``query`` and ``fragment`` with credential-like values replaced; every other byte kept as it was.

    A fragment is never sent to a server, yet a location's fragment is shown with it, and OAuth's
    implicit flow puts ``access_token=...`` there: its ``name=value`` pairs are read as a query's.
    """
    return _redact_pairs(_QUERY_PAIR, query), _redact_pairs(_FRAGMENT_PAIR, fragment)


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
    query, fragment = redact_parameters(parts.query, parts.fragment)
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, query, fragment))
