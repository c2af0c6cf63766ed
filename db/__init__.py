"""The database both sides share: its schema and migrations, the values it holds, and its published snapshots.

:mod:`~qsite.db.migrations` is the schema (the DDL of its base tables in :mod:`~qsite.db.ddl`), :mod:`~qsite.db.news_derived` the SQL of
the tables derived from ``news`` (:mod:`~qsite.db.search_tables` the search tables as one set: their fill and their index pages)
and :mod:`~qsite.db.news_sync` the part that keeps mirrors in step; :mod:`~qsite.db.model` the values writers store
and readers serve; :mod:`~qsite.db.urls` and :mod:`~qsite.db.redact` how locations may be
shown; :mod:`~qsite.db.snapshot` what a published snapshot is and
:mod:`~qsite.db.snapshot_store` where snapshots are kept (a folder or an S3 bucket).
The bottom layer: imports nothing of qsite's other packages.
"""
