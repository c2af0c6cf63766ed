"""The API itself: what each endpoint is, its parameters, how its body is built and cached.

:mod:`~service.api.endpoints` is the one table of endpoints (path, canned queries),
:mod:`~service.api.parameter_table` the one table of parameters;
:mod:`~service.api.parameters` validates a query string, with the kinds of value in
:mod:`~service.api.kinds` and ``q``'s language in :mod:`~service.api.search_language`;
:mod:`~service.api.sync` holds what a mirror uses besides ``/news`` (``updated_since``, ``/news/removed``);
:mod:`~service.api.bodies` and :mod:`~service.api.news_bodies` build bodies from the canned queries' rows, which
:mod:`~service.api.reader` reads on connections of its own;
:mod:`~service.api.responses` and :mod:`~service.api.response_cache` make and
keep the answers, per :mod:`~service.api.data_versions`. May import
:mod:`service.http`, :mod:`service.i18n`, ``config`` and ``db``; nothing here
knows Datasette.
"""
