"""qsite's ingestion pipeline: fetch, parse, normalise and store site data in SQLite."""

__version__ = "0.1.0"
