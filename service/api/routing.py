"""From a request to its endpoint: routing a raw path, and the cache key of a request.

Both are derived from the endpoint table, :data:`qsite.service.api.endpoints.ENDPOINTS`.
"""

from __future__ import annotations

from qsite.service.api.endpoint import Endpoint
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.http.problems import API_PREFIX

#: Raw path below the prefix -> endpoint, for paths without a parameter.
_FIXED_PATHS = {
    path: endpoint
    for endpoint in ENDPOINTS.values()
    if endpoint.path_param is None
    for path in ((endpoint.path, endpoint.path + "/") if endpoint.trailing_slash else (endpoint.path,))
}
#: ``(what comes before the {parameter}, endpoint)`` for the others.
_PARAMETER_PATHS = [
    (endpoint.path.partition("{")[0], endpoint) for endpoint in ENDPOINTS.values() if endpoint.path_param is not None
]


def resolve(path: str) -> tuple[Endpoint, str | None] | None:
    """The endpoint for a raw (still percent-encoded) path, and its path parameter's value if any."""
    if not path.startswith(API_PREFIX):
        return None
    rest = path[len(API_PREFIX) :]
    endpoint = _FIXED_PATHS.get(rest)
    if endpoint is not None:
        return endpoint, None
    for prefix, endpoint in _PARAMETER_PATHS:
        if rest.startswith(prefix):
            try:
                return endpoint, endpoint.path_param.kind.parse(rest[len(prefix) :])
            except ValueError:
                return None
    return None


def cache_key(endpoint: Endpoint, arg: str | None, values: dict) -> tuple:
    """The same key for every request that must get the same response.

    The endpoint's name, its path parameter's value (if it has one, or if it
    takes no parameter at all: then ``None``), then each query parameter's
    canonical value in table order, defaults filled in.
    """
    query = tuple(values[param.name] for param in endpoint.params)
    if endpoint.path_param is not None or not query:
        return (endpoint.name, arg, *query)
    return (endpoint.name, *query)
