"""qsite's ingestion pipeline: fetch, parse, normalise and store site data in SQLite.

Rooms, each importing only the ones below it (the import-linter contracts in
``pyproject.toml``):

- :mod:`qsite.pipeline.ops`: running ingests (the writer lock's holder, the
  scheduler, status, publishing snapshots);
- :mod:`qsite.pipeline.news` and :mod:`qsite.pipeline.site`, side by side: the feed path
  (fetch, parse, normalise, decide) and the site export path;
- :mod:`qsite.pipeline.store`: all SQL, the writer lock, the record types;
- :mod:`qsite.pipeline.fetch`, :mod:`qsite.pipeline.text` and :mod:`qsite.pipeline.report`: the
  shared steps both paths use.
"""
