"""The database both sides share: its schema and migrations, the values it holds, and its published snapshots.

:mod:`~db.migrations` is the schema (the DDL of its base tables in :mod:`~db.ddl`), :mod:`~db.news_derived` the SQL of
the tables derived from ``news`` and :mod:`~db.news_sync` the part that keeps mirrors in step; :mod:`~db.model` the values writers store
and readers serve; :mod:`~db.urls` and :mod:`~db.redact` how locations may be
shown; :mod:`~db.snapshot` what a published snapshot is and
:mod:`~db.snapshot_store` where snapshots are kept (a folder or an S3 bucket).
The bottom layer: imports nothing of qsite's other packages.
"""
