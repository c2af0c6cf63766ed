"""The kinds of value a config key may hold: durations, locations, tags, patterns, rate limits, stores.

Promises: each validator turns what a YAML file may say into one canonical value or raises
``ValueError`` with a message a person can act on (what is expected, and what was given,
with any credential of a URL redacted). :func:`parse_duration` and :func:`parse_rate_limit`
are the one reading of a duration and of a limit everywhere qsite takes one.

Relies on :mod:`qsite.db.model` for the tags and :mod:`qsite.db.redact` to keep credentials out of messages.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import limits
from pydantic import AfterValidator, BeforeValidator, Field

from qsite.config.spelling import canonical_tag
from qsite.db.model import TAGS
from qsite.db.redact import redact_text, redact_url

_DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION_MESSAGE = "must be a duration such as 30s, 15m, 1h or 1d, or a whole number of seconds (at least 1)"


def parse_duration(value: object) -> int:
    """Turn ``30s``, ``15m``, ``1h`` or ``1d`` (or a whole number of seconds) into seconds.

    Fractions are refused rather than rounded: ``0.5`` would become a zero interval.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"{_DURATION_MESSAGE} (got {value!r})")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]


def _compile_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"is not a valid regular expression: {exc}") from None
    return value


def _check_location(value: str) -> str:
    """An http(s) URL must be one httpx can request; anything else is a path."""
    if not is_url(value):
        return value
    import httpx  # here, not at the top: every qsite command reads the config, few need httpx (0.05 s)

    try:
        url = httpx.URL(value)
        host, port = url.host, url.port  # the host's IDNA decoding happens here
    except (httpx.InvalidURL, ValueError) as exc:  # IDNA errors are ValueErrors
        raise ValueError(f"is not a valid URL: {redact_text(str(exc))} (got {redact_url(value)!r})") from None
    if not host:
        raise ValueError(f"is not a valid URL: no host (got {redact_url(value)!r})")
    if port is not None and not 0 < port <= 65535:
        raise ValueError(f"is not a valid URL: port {port} is not 1-65535 (got {redact_url(value)!r})")
    return value


Duration = Annotated[int, BeforeValidator(parse_duration)]
Location = Annotated[str, Field(min_length=1), AfterValidator(_check_location)]


Tag = Annotated[Literal[TAGS], BeforeValidator(canonical_tag)]
Regex = Annotated[str, AfterValidator(_compile_regex)]


def parse_rate_limit(value: str) -> limits.RateLimitItem | None:
    """``off`` -> None, else exactly one limits-style limit such as ``120/minute``."""
    if value.strip().lower() == "off":
        return None
    try:
        items = list(limits.parse_many(value))
    except ValueError:
        items = []
    if len(items) != 1 or items[0].amount < 1:
        raise ValueError(f"must be one limit such as 120/minute or '10 per 2 seconds', or off (got {value!r})")
    return items[0]


def check_rate_limit(value: str) -> str:
    parse_rate_limit(value)
    return value


def rate_limit_from_yaml(value: object) -> object:
    """YAML's false (a bare ``off``, ``false`` or ``no``) as ``off``; YAML's true (``on``, ``yes``) names no limit: refused.

    YAML 1.1, which PyYAML reads, takes a bare ``off`` for the boolean false: without
    this, ``rate_limit: off`` unquoted would be refused as "not a valid string".
    """
    if value is False:
        return "off"
    if value is True:
        raise ValueError("must be one limit such as 120/minute or '10 per 2 seconds', or off (got true: a bare on, yes or true)")
    return value


def check_rate_limit_storage(value: str) -> str:
    # the storages whose client libraries qsite installs (limits[redis])
    if not value.startswith(("memory://", "redis://", "rediss://", "redis+unix://")):
        raise ValueError(f"must be memory:// or a redis://host:port/db URL (got {redact_url(value)!r})")
    return value


def check_snapshot_store(value: str) -> str:
    if "://" in value and not value.startswith(("file:///", "s3://")):
        raise ValueError(f"must be a folder, a file:///absolute/path or s3://bucket/prefix URL (got {value!r})")
    if value.startswith("s3://") and not value[len("s3://") :].split("/", 1)[0]:
        raise ValueError(f"must name a bucket: s3://bucket/prefix (got {value!r})")
    return value


def check_endpoint_url(value: str | None) -> str | None:
    if value is not None and not is_url(value):
        raise ValueError(f"must be an http:// or https:// URL such as http://127.0.0.1:8333 (got {value!r})")
    return _check_location(value) if value else value


def is_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))
