"""The news path, one feed entry from bytes to an item: fetch, parse, normalise, decide.

:mod:`~qsite.pipeline.news.feeds` parses (with :mod:`~qsite.pipeline.news.encoding` and
:mod:`~qsite.pipeline.news.dates`), in :mod:`~qsite.pipeline.news.parse_pool`;
:mod:`~qsite.pipeline.news.normalise` makes an entry an item (with
:mod:`~qsite.pipeline.news.urls`, :mod:`~qsite.pipeline.news.tracking`,
:mod:`~qsite.pipeline.news.legacy`); :mod:`~qsite.pipeline.news.policy` decides, with no
I/O; :mod:`~qsite.pipeline.news.ingest` runs the steps and hands the outcome to
:mod:`qsite.pipeline.store`. May import :mod:`qsite.pipeline.store`, the shared steps,
``config`` and ``db``; not :mod:`qsite.pipeline.site` or :mod:`qsite.pipeline.ops`.
"""
