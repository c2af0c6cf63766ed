"""The news path, one feed entry from bytes to an item: fetch, parse, normalise, decide.

:mod:`~pipeline.news.feeds` parses (with :mod:`~pipeline.news.encoding` and
:mod:`~pipeline.news.dates`), in :mod:`~pipeline.news.parse_pool`;
:mod:`~pipeline.news.normalise` makes an entry an item (with
:mod:`~pipeline.news.urls`, :mod:`~pipeline.news.tracking`,
:mod:`~pipeline.news.legacy`); :mod:`~pipeline.news.policy` decides, with no
I/O; :mod:`~pipeline.news.ingest` runs the steps and hands the outcome to
:mod:`pipeline.store`. May import :mod:`pipeline.store`, the shared steps,
``config`` and ``db``; not :mod:`pipeline.site` or :mod:`pipeline.ops`.
"""
