"""qsite's ingestion pipeline: fetch, parse, normalise and store site data in SQLite.

Rooms, each importing only the ones below it (the import-linter contracts in
``pyproject.toml``):

- :mod:`pipeline.ops`: running ingests (the writer lock's holder, the
  scheduler, status, publishing snapshots);
- :mod:`pipeline.news` and :mod:`pipeline.site`, side by side: the feed path
  (fetch, parse, normalise, decide) and the site export path;
- :mod:`pipeline.store`: all SQL, the writer lock, the record types;
- :mod:`pipeline.fetch`, :mod:`pipeline.text` and :mod:`pipeline.report`: the
  shared steps both paths use.
"""
