"""The site export path: fetch the one document, validate it, build the catalog rows, store them.

:mod:`~qsite.pipeline.site.export_format` validates, :mod:`~qsite.pipeline.site.catalog_rows`
builds rows (pure), :mod:`~qsite.pipeline.site.ingest` runs the steps. May import
:mod:`qsite.pipeline.store`, the shared steps, ``config`` and ``db``; not
:mod:`qsite.pipeline.news` or :mod:`qsite.pipeline.ops`.
"""
