"""What one ingest of one thing (the site export, or one news source) came to."""

from __future__ import annotations

from qsite.db.redact import redact_urls


class RunReport:
    """The outcome of ingesting one thing (the export, or one news source).

    ``status`` is one of ``ok``, ``unchanged``, ``warning`` or ``failed``,
    as stored in ``ingest_runs``, or, for a news source this run left alone,
    ``skipped`` (backing off) or ``disabled``.
    """

    def __init__(self, kind: str, source: str, status: str, counts: dict | None = None, error: str | None = None):
        self.kind = kind
        self.source = source
        self.status = status
        self.counts = counts or {}
        self.error = error

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def line(self) -> str:
        """One summary line, e.g. ``news Lab Notes: ok (new 3, updated 1)``."""
        counts = ", ".join(f"{key} {value}" for key, value in self.counts.items())
        text = f"{self.kind} {self.source}: {self.status}"
        if counts:
            text += f" ({counts})"
        if self.error:
            text += f": {redact_urls(self.error)}"  # printed and logged: no credential of a configured URL
        return text

    def __repr__(self) -> str:
        return f"RunReport({self.line()!r})"
