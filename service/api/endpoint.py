"""One endpoint of /api/v1, as the table in :mod:`qsite.service.api.endpoints` describes it.

Its own module so the table stays a table: what an endpoint *is* (its fields,
operation id, URL, pager and ``next`` links) is here, which endpoints there are
is there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Callable
from urllib.parse import quote

from qsite.service.api.kinds import Cursor
from qsite.service.api.parameters import Param
from qsite.service.http.problems import API_PREFIX

#: The media types of the 200 bodies: JSON but for the documentation page and the snapshot file.
JSON = "application/json"
HTML = "text/html"
#: The snapshot file, as bytes: generators read octet-stream as a file, but left application/vnd.sqlite3
#: (its registered type, which its schema names as contentMediaType) out of their clients.
BINARY = "application/octet-stream"
SQLITE = "application/vnd.sqlite3"

#: What a query string may hold as it is: RFC 3986's unreserved characters, and ``:`` (a pchar).
_AS_IS = re.compile(r"[A-Za-z0-9_.~:-]*")


def _link_text(text: str) -> str:
    """``text`` percent-encoded for a query string of a ``next`` link.

    quote() itself only where something needs encoding (names, cursors, tags and
    times seldom do; quote() works byte by byte in Python). ``:`` stays as it is:
    times read as written, and RFC 3986 allows it in a query.
    """
    return text if _AS_IS.fullmatch(text) else _quoted(text)


#: Source names come back again and again.
_quoted = lru_cache(maxsize=1024)(partial(quote, safe=":"))


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of /api/v1: a frozen row of the table, from which its routing, docs and links derive.

    :param name: its name in the index and cache keys; camelCased, its OpenAPI operationId.
    :param path: under :data:`~qsite.service.http.problems.API_PREFIX`; a last segment ``{name}`` is its path parameter.
    :param summary: one line for the OpenAPI document.
    :param schema: the OpenAPI component schema of its 200 body.
    :param returns: the description of its 200 response.
    :param build: the builder of its body (:mod:`qsite.service.api.bodies`, :mod:`qsite.service.api.news_bodies`,
        :mod:`qsite.service.api.feeds`); ``None`` for a document built once at startup.
    :param queries: the canned queries (``datasette.yaml``, without ``api_``) ``build`` may run.
    :param datasets: the ``data_versions`` rows its body is built from; a change to any drops
        the cached body, and the newest is its ``updated_at``.
    :param required: the dataset without which the answer is 503 (default: the first of ``datasets``, if built).
    :param trailing_slash: also answers at ``path + "/"``.
    :param tag: its OpenAPI tag.
    :param description: what it answers, for the OpenAPI document and the documentation page.
    :param media_type: its 200's type: :data:`JSON`, :data:`HTML` (the documentation page),
        :data:`BINARY` (the snapshot file) or a feed's (:mod:`qsite.service.api.feeds`).
    :param fresh: built anew for every request, never kept (its data changes without a
        ``data_versions`` bump); ETag and 304 work as for all.
    :param following: answered only by a ``qsite serve --follow`` replica; elsewhere a 404, left out of the index.
    :param absolute_links: how many absolute links to this instance its body holds first, built with
        :data:`~qsite.service.api.responses.BASE_URL_PLACEHOLDER` and filled per answer
        (:meth:`~qsite.service.api.responses.Entry.at_base_url`); never answered from the fast path.
    """

    name: str
    path: str
    summary: str
    schema: str
    returns: str
    tag: str = ""
    description: str = ""
    build: Callable | None = None
    queries: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    required: str | None = None
    trailing_slash: bool = False
    media_type: str = JSON
    fresh: bool = False
    following: bool = False
    absolute_links: int = 0
    #: Filled from :data:`PARAMETERS`: the query parameters it takes, and its path parameter.
    params: tuple[Param, ...] = field(default=(), compare=False)
    path_param: Param | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.required is None and self.build is not None and self.datasets:
            object.__setattr__(self, "required", self.datasets[0])

    @property
    def last_modified(self) -> bool:
        """Whether its 200 carries Last-Modified: built from data versions, and kept (not :attr:`fresh`,
        whose answers change without a version, at a fetch's second: /sources, told apart by its ETag)."""
        return self.required is not None and not self.fresh

    @property
    def operation_id(self) -> str:
        first, *rest = self.name.split("_")
        return first + "".join(word.title() for word in rest)

    @property
    def url(self) -> str:
        return API_PREFIX + self.path

    @property
    def pager(self) -> Param | None:
        """Its :class:`~qsite.service.api.kinds.Cursor` parameter, if it answers in pages."""
        return next((param for param in self.params if isinstance(param.kind, Cursor)), None)

    def next_link(self, values: dict, after) -> str:
        """The link to the page after the item ``after`` (the cursor's canonical value).

        Every other parameter that has a value (``sort`` only when not the default), in table order,
        then the cursor.
        """
        pager = self.pager
        query = [
            pair
            for param in self.params
            if param is not pager and values[param.name] is not None
            # the default order is left out: next links read as they did before sort existed
            and not (param.name == "sort" and values[param.name] == param.default)
            for pair in param.link_pairs(values[param.name])
        ]
        query.extend(pager.link_pairs(after))
        return f"{self.url}?" + "&".join(f"{_link_text(name)}={_link_text(text)}" for name, text in query)
