"""The API itself: what each endpoint is, its parameters, how its body is built and cached.

:mod:`~qsite.service.api.endpoints` is the one table of endpoints (path, canned queries),
:mod:`~qsite.service.api.parameter_table` the one table of parameters;
:mod:`~qsite.service.api.parameters` validates a query string, with the kinds of value in
:mod:`~qsite.service.api.kinds` and ``q``'s language in :mod:`~qsite.service.api.search_language`;
:mod:`~qsite.service.api.sync` holds what a mirror uses besides ``/news`` (``updated_since``, ``/news/removed``);
:mod:`~qsite.service.api.bodies` and :mod:`~qsite.service.api.news_bodies` build bodies from the canned queries' rows, which
:mod:`~qsite.service.api.reader` reads on connections of its own;
:mod:`~qsite.service.api.responses` and :mod:`~qsite.service.api.response_cache` make and
keep the answers, per :mod:`~qsite.service.api.data_versions`. May import
:mod:`qsite.service.http`, :mod:`qsite.service.i18n`, ``config`` and ``db``; nothing here
knows Datasette.
"""
