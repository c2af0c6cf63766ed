"""The Datasette plugin: its hooks, the request handler they feed, and Datasette's pages as qsite shows them.

:mod:`~qsite.service.datasette.plugin` holds the ``@hookimpl`` functions;
:mod:`~qsite.service.datasette.handler` answers an /api/v1 request from the rooms
below (:mod:`~qsite.service.datasette.answers`, the edges of each answer);
:mod:`~qsite.service.datasette.metadata`, :mod:`~qsite.service.datasette.public`,
:mod:`~qsite.service.datasette.errors` and :mod:`~qsite.service.datasette.problem_pages`
adapt Datasette's own pages. The one room that may import every other one
(but not :mod:`qsite.service.serve`).
"""
