"""qsite's ingestion pipeline: fetch, parse, normalise and store site data in SQLite."""
