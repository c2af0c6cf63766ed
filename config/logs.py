"""What every log handler of qsite is given: a filter that redacts the credentials of URLs.

Logging is configured in two places (``qsite``'s commands, :mod:`qsite.cli`,
and the server's ``dictConfig``, :mod:`service.serve`); both attach
:class:`RedactingFilter`. The rule itself is :func:`db.redact.redact_urls`.
"""

from __future__ import annotations

import logging

from db.redact import redact_urls


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
