"""What there is to translate: the Babel extractor for the interface description.

The OpenAPI document is assembled from constants and f-strings in
:mod:`qsite.service.describe.openapi`, :mod:`qsite.service.datasette.handler` and :mod:`qsite.service.http.problems`, so
its texts are not literal ``_()`` calls a source scanner could find. Instead
the extractor builds the English document exactly as the service serves it and
hands Babel each of its texts (and the problem titles the documentation page
shows), with its JSON pointer as the translator's comment. ``pyproject.toml``
maps it onto ``service/describe/openapi.py`` under ``[tool.babel]``; the documentation
template's ``_()`` calls go through Jinja's own extractor.
"""

from __future__ import annotations

from typing import Iterator

from qsite.service.i18n import document_texts
from qsite.service.describe.openapi import build_document
from qsite.service.http.problems import PROBLEMS


def interface_texts() -> Iterator[tuple[str, str]]:
    """``(where, English text)`` of every text of the interface description, in order."""
    yield from document_texts(build_document(0))
    for name, (_status, title) in PROBLEMS.items():
        yield f"problem title: {name}", title


def extract_document(fileobj, keywords, comment_tags, options) -> Iterator[tuple[int, None, str, list[str]]]:
    """Babel extraction method (``qsite.service.describe.messages.extract_document``); ``fileobj`` is not read."""
    for where, text in interface_texts():
        yield 0, None, text, [where]
