"""The config of what operators see: ``metrics:`` (``/metrics``) and ``logs:`` (the log format, the access log)."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

#: Who may read /metrics by default: this host and private networks (a Prometheus in the same
#: cluster or compose network), never the internet.
PRIVATE_NETWORKS = ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")


class MetricsConfig(BaseModel):
    """``/metrics`` of ``qsite serve`` (docs/operating.md, "Monitoring")."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    #: ``false``: no ``/metrics`` and nothing counted (the request path as without metrics).
    enabled: bool = True
    #: The client addresses (networks, ``10.0.0.0/8``; an address alone is one host) that may read
    #: ``/metrics``, as the server sees the connection (not ``X-Forwarded-For``); others get 403.
    #: ``[]``: nobody. Behind a proxy that passes ``/metrics`` on, the proxy's address is the client:
    #: the shipped ``deploy/nginx.conf`` does not pass it on.
    allow: list[IPv4Network | IPv6Network] = [*PRIVATE_NETWORKS]

    @field_validator("allow", mode="before")
    @classmethod
    def _networks(cls, value):
        if isinstance(value, str):
            value = [value]
        return value


class LogsConfig(BaseModel):
    """How ``qsite`` logs (each line redacted of credentials in either format)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``text`` (one line: time, level, logger, message) or ``json`` (one JSON object a line, with the
    #: request's id where there is one); ``--log-format`` and ``QSITE_LOG_FORMAT`` override it.
    format: Literal["text", "json"] = "text"
    #: ``true``: ``qsite serve`` logs one line per request (logger ``qsite.access``: method, path and
    #: query redacted, status, milliseconds, client).
    access: bool = False
