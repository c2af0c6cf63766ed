"""The ``endpoint`` label of a request: a few values, whatever paths clients send."""

from __future__ import annotations

from qsite.service.api.routing import resolve
from qsite.service.http.problems import API_PREFIX

#: The path ``/metrics`` is answered on (:mod:`qsite.service.metrics.middleware`).
METRICS_PATH = b"/metrics"
#: Distinct paths whose endpoint label is remembered (the table is emptied when full).
LABELS_KEPT = 4096
#: The longest path remembered, so that the table holds at most a few hundred kilobytes.
LONGEST_KEPT = 128
_API = API_PREFIX.encode()


def endpoint_label(path: bytes, query: bytes) -> str:
    """An /api/v1 endpoint's name (``api_unknown`` for a path it does not know), else ``metrics``,
    ``static``, ``datasette_sql`` (arbitrary SQL) or ``datasette``."""
    if path == _API or path.startswith(_API + b"/"):
        resolved = resolve(path.decode("latin-1"))
        return resolved[0].name if resolved is not None else "api_unknown"
    if path == METRICS_PATH:
        return "metrics"
    if path.startswith(b"/-/static"):
        return "static"
    if b"sql=" in query:
        return "datasette_sql"
    return "datasette"


class Labels:
    """:func:`endpoint_label` remembered per path (the API's ``sql=`` is never in a path)."""

    def __init__(self):
        self.known: dict[bytes, str] = {}

    def __call__(self, path: bytes, query: bytes) -> str:
        label = self.known.get(path)
        if label is None:
            label = endpoint_label(path, query)
            if label == "datasette_sql" or len(path) > LONGEST_KEPT:
                return label
            if len(self.known) >= LABELS_KEPT:
                self.known.clear()
            self.known[path] = label
        elif label == "datasette" and b"sql=" in query:
            return "datasette_sql"
        return label
