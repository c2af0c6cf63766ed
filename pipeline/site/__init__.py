"""The site export path: fetch the one document, validate it, build the catalog rows, store them.

:mod:`~pipeline.site.export_format` validates, :mod:`~pipeline.site.catalog_rows`
builds rows (pure), :mod:`~pipeline.site.ingest` runs the steps. May import
:mod:`pipeline.store`, the shared steps, ``config`` and ``db``; not
:mod:`pipeline.news` or :mod:`pipeline.ops`.
"""
