"""The Datasette plugin: its hooks, the request handler they feed, and Datasette's pages as qsite shows them.

:mod:`~service.datasette.plugin` holds the ``@hookimpl`` functions;
:mod:`~service.datasette.handler` answers an /api/v1 request from the rooms
below (:mod:`~service.datasette.answers`, the edges of each answer);
:mod:`~service.datasette.metadata`, :mod:`~service.datasette.public`,
:mod:`~service.datasette.errors` and :mod:`~service.datasette.problem_pages`
adapt Datasette's own pages. The one room that may import every other one
(but not :mod:`service.serve`).
"""
