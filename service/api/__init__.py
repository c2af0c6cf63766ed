"""The API itself: what each endpoint is, its parameters, how its body is built and cached.

:mod:`~service.api.endpoints` is the one table of endpoints (path, parameters,
canned queries); :mod:`~service.api.parameters` validates a query string;
:mod:`~service.api.sync` holds what a mirror uses besides ``/news`` (``updated_since``, ``/news/removed``);
:mod:`~service.api.bodies` builds bodies from the canned queries' rows, which
:mod:`~service.api.reader` reads on connections of its own;
:mod:`~service.api.responses` and :mod:`~service.api.response_cache` make and
keep the answers, per :mod:`~service.api.data_versions`. May import
:mod:`service.http`, :mod:`service.i18n`, ``config`` and ``db``; nothing here
knows Datasette.
"""
