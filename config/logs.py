"""What every log handler of qsite is given: a filter that redacts the credentials of URLs, and one
of two formats (``text``, ``json``: :func:`make_formatter`).

Logging is configured in two places (``qsite``'s commands, :mod:`qsite.cli`,
and the server's ``dictConfig``, :mod:`qsite.service.serve.runner`); both attach
:class:`RedactingFilter`. The rule itself is :func:`qsite.db.redact.redact_urls`.
"""

from __future__ import annotations

import json
import logging
import os
from contextvars import ContextVar
from datetime import datetime, timezone

from qsite.db.redact import redact_urls


class RedactingFilter(logging.Filter):
    """A handler filter: every record's message and traceback with its URLs redacted (:func:`redact_urls`).

    On the handlers, not a logger, so that it sees every library's records
    (httpx logs each request's URL, query string included).
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_urls(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_urls(record.exc_text)
        return True


#: The number of the request being answered in this context (``qsite serve``, counted per worker), for log
#: lines; None outside requests. Shown as its id, :func:`request_id`.
REQUEST_ID: ContextVar[int | None] = ContextVar("qsite_request_id", default=None)


def request_id() -> str | None:
    """The id of the request being answered: the worker's process id in hex and the request's number (``4819-17``)."""
    number = REQUEST_ID.get()
    return None if number is None else f"{os.getpid():x}-{number}"

#: The text format of every qsite log line.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: ``time`` (RFC 3339, UTC, milliseconds), ``level``,
    ``logger``, ``message``, ``request_id`` when the record was logged while a request was answered,
    ``exception`` with a traceback; and the fields a record carries in ``extra={"fields": {...}}``
    (the access log's).

    Redaction happens before (the handler's :class:`RedactingFilter`), on the same message and traceback.
    """

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, timezone.utc)
        entry = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        shown = request_id()
        if shown is not None:
            entry["request_id"] = shown
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update({key: value for key, value in fields.items() if key not in entry})
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`, with ``[request id]`` after the logger's name while a request is answered."""

    def __init__(self):
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        shown = request_id()
        if shown is None:
            return super().format(record)
        name = record.name
        record.name = f"{name} [{shown}]"
        try:
            return super().format(record)
        finally:
            record.name = name


def make_formatter(kind: str) -> logging.Formatter:
    """The formatter of log format ``kind`` (``text`` or ``json``)."""
    return JsonFormatter() if kind == "json" else TextFormatter()
